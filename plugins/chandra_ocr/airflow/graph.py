"""The one place that builds the DAGs: the ingestion graph (nightly and backfill DAGs) and the feed.

preflight → discover → per batch (mapped task group): compress → extract (OCR: GPU pool/queue) → assemble
→ load (1-slot pool) → event on ``KB_ASSET`` → report (HTML + PNG in ``<kb>/report``) → in the
backfill DAG, continue (the next run, while batches are left). Mapping is over batches, never pages.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, Param, XComArg, task_group

from chandra_ocr.airflow.backfill import DONE_PARAM, TOTAL_PARAM, XCOM_KEY, ContinueBackfillOperator
from chandra_ocr.airflow.feed_operators import FeedExportOperator, VectorIndexOperator
from chandra_ocr.airflow.operators import (
    AssembleOperator,
    ChandraOcrOperator,
    CompressOperator,
    DiscoverOperator,
    LoadOperator,
    PreflightOperator,
)
from chandra_ocr.airflow.report_operator import ReportOperator
from chandra_ocr.airflow.settings import DagSettings
from chandra_ocr.config import ENGINE_KINDS

# Updated by every load that changed the knowledge base; extra: kb, run_id, documents, pages, chunks.
KB_ASSET = Asset(name="chandra_ocr_kb", group="chandra_ocr")
START = datetime(2026, 1, 1)
TAGS = ["chandra_ocr"]


def run_params(*, backfill: bool) -> dict[str, Param]:
    """The DAG-run Params; an empty value means: Variable ``chandra_ocr`` → environment → default."""
    empty = "empty: Variable chandra_ocr, else ${env}, else {default}"
    relative = "; a relative path is taken under $CHANDRA_OCR_BASE_DIR, else $AIRFLOW_HOME"
    params = {
        "source": Param(None, type=["null", "string"], title="Source folder, glob or object-store URL",
                        description=empty.format(env="CHANDRA_OCR_SOURCE", default="./landing") + relative
                        + "; s3://bucket/prefix (gs://, az://, …) reads the store with source_conn_id"),
        "source_conn_id": Param(None, type=["null", "string"], title="Connection of an object-store source",
                                description=empty.format(env="CHANDRA_OCR_SOURCE_CONN_ID", default="none: "
                                                         "the store's standard environment")),
        "rehash": Param(False, type="boolean",
                        description="hash every source file, even those unchanged since the last run"),
        "kb": Param(None, type=["null", "string"], title="Knowledge-base folder",
                    description=empty.format(env="CHANDRA_OCR_KB", default="./kb") + relative),
        "engine": Param(None, type=["null", "string"], enum=[None, *ENGINE_KINDS],
                        description=empty.format(env="CHANDRA_OCR_ENGINE", default="auto")),
        "preset": Param(None, type=["null", "string"],
                        description=empty.format(env="CHANDRA_OCR_PRESET", default="olmocr2")),
        "batch_pages": Param(None, type=["null", "integer"], minimum=1, title="Pages per mapped batch",
                             description=empty.format(env="CHANDRA_OCR_BATCH_PAGES", default=100)),
        "fail_on_incomplete": Param(None, type=["null", "boolean"], title="Fail on quarantine",
                                    description="fail the run when a document is quarantined or partial; "
                                    + empty.format(env="CHANDRA_OCR_FAIL_ON_INCOMPLETE", default="false")),
    }  # fmt: skip
    if backfill:
        params |= {
            "modified_since": Param(None, type=["null", "string"],
                                    description="only files modified at or after this ISO date/time (UTC)"),
            "modified_until": Param(None, type=["null", "string"],
                                    description="only files modified before this ISO date/time (UTC)"),
            "max_documents": Param(None, type=["null", "integer"], minimum=1,
                                   description="stop after this many new documents"),
            "reprocess": Param(False, type="boolean",
                               description="redo documents ingested under an older pipeline version"),
            DONE_PARAM: Param(None, type=["null", "integer"], minimum=0,
                              description="set by the DAG when it continues itself: batches done so far"),
            TOTAL_PARAM: Param(None, type=["null", "integer"], minimum=0,
                               description="set by the DAG when it continues itself: the backfill's batches"),
        }  # fmt: skip
    return params


def _dag(dag_id: str, settings: DagSettings, schedule: Any, params: dict, doc_md: str | None) -> DAG:
    """The settings every chandra_ocr DAG shares: one active run, no catch-up, the project's tags."""
    return DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        params=params,
        default_args=_default_args(settings),
        tags=TAGS,
        doc_md=doc_md,
    )


def ingest_dag(dag_id: str, settings: DagSettings, *, backfill: bool, doc_md: str | None = None) -> DAG:
    """The ingestion DAG: scheduled by ``settings.schedule``, or manual (``schedule=None``) for a
    backfill, which continues itself (a new run) while batches are left (chandra_ocr/airflow/backfill.py)."""
    schedule = None if backfill else settings.schedule
    with _dag(dag_id, settings, schedule, run_params(backfill=backfill), doc_md) as dag:
        _ingest_tasks(settings, dag_id if backfill else None)
    return dag


def feed_dag(dag_id: str, settings: DagSettings, *, doc_md: str | None = None) -> DAG:
    """The vector-feed DAG: runs after every knowledge-base update and exports what changed."""
    with _dag(dag_id, settings, [KB_ASSET], run_params(backfill=False), doc_md) as dag:
        config = PreflightOperator(task_id="preflight", pools=[settings.loader_pool], needs_source=False)
        exports = FeedExportOperator(task_id="export", config=config.output, pool=settings.loader_pool).output
        VectorIndexOperator(task_id="index", config=config.output, exports=exports)
    return dag


def _default_args(settings: DagSettings) -> dict[str, Any]:
    return {
        "retries": settings.retries,
        "retry_delay": timedelta(seconds=settings.retry_delay_s),
        "retry_exponential_backoff": 2.0,
    }


def _ingest_tasks(settings: DagSettings, continue_dag_id: str | None) -> None:
    config = PreflightOperator(task_id="preflight", pools=[settings.gpu_pool, settings.loader_pool]).output
    discover = DiscoverOperator(task_id="discover", config=config)
    batches = discover.output

    @task_group(group_id="batch")
    def per_batch(batch: dict[str, Any]) -> Any:
        compressed = CompressOperator(task_id="compress", config=config, batch=batch)
        read = ChandraOcrOperator(
            task_id="extract",
            config=config,
            batch=compressed.output,
            pool=settings.gpu_pool,
            queue=settings.gpu_queue,
            retries=settings.retries,
            retry_delay=timedelta(seconds=settings.retry_delay_s),
            execution_timeout=timedelta(minutes=settings.ocr_timeout_min),
            idle_timeout_s=settings.model_idle_timeout_s,
        )
        return AssembleOperator(task_id="assemble", config=config, batch=read.output).output

    assembled = per_batch.expand(batch=batches)
    assert isinstance(assembled, XComArg)  # typed DAGNode by Airflow; a group returns what its function does
    load = LoadOperator(
        task_id="load",
        config=config,
        batches=assembled,
        kb_asset=KB_ASSET,
        progress=XComArg(discover, key=XCOM_KEY),
        pool=settings.loader_pool,
    )
    report = ReportOperator(task_id="report", config=config)
    load >> report
    if continue_dag_id is not None:
        report >> ContinueBackfillOperator(
            task_id="continue", discover_task_id="discover", trigger_dag_id=continue_dag_id, retries=0
        )
