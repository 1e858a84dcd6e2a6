"""Vector feed: after each knowledge-base update (asset ``chandra_ocr_kb``), export the chunks added,
changed or deleted since the last export to ``<kb>/outbox/vector-<n>.parquet``
(format: ``chandra_ocr.vector.outbox``).
"""

import os

from chandra_ocr.airflow.graph import feed_dag
from chandra_ocr.airflow.settings import DagSettings

dag = feed_dag("chandra_ocr_vector_feed", DagSettings.from_env(os.environ), doc_md=__doc__)
