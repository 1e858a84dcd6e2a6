"""Archive backfill, triggered by hand: the ingestion graph over a folder or glob, with filters.

Params: source, modified_since / modified_until (ISO, UTC), max_documents, batch_pages, engine,
preset, reprocess. Re-triggering after a failure redoes only what is missing: pages already read
are checkpointed in the KB's work folder and loaded documents are not rediscovered.
"""

import os

from chandra_ocr.airflow.graph import ingest_dag
from chandra_ocr.airflow.settings import DagSettings

dag = ingest_dag("chandra_ocr_backfill", DagSettings.from_env(os.environ), backfill=True, doc_md=__doc__)
