"""Nightly ingestion: new PDFs from the landing folder → OCR → chunks → Parquet → DuckDB.

Schedule: ``$CHANDRA_OCR_SCHEDULE`` (default ``@daily``), no catch-up. Settings: Params, Variable
``chandra_ocr`` or ``CHANDRA_OCR_*`` variables (see ``chandra_ocr.airflow.settings``). Emits an
event on the asset ``chandra_ocr_kb`` with the run's counts when something was loaded.
"""

import os

from chandra_ocr.airflow.graph import ingest_dag
from chandra_ocr.airflow.settings import DagSettings

dag = ingest_dag("chandra_ocr_ingest", DagSettings.from_env(os.environ), backfill=False, doc_md=__doc__)
