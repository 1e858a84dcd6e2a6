"""The one place that builds the DAGs: the ingestion graph (nightly and backfill DAGs) and the feed.

preflight → discover → per batch (mapped task group): compress → extract (OCR: GPU pool/queue) → assemble
→ load (1-slot pool) → event on ``KB_ASSET`` → report (HTML + PNG in ``<kb>/report``) → in the
backfill DAG, continue (the next run, while batches are left). Mapping is over batches, never pages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, Param, XComArg, task_group

from chandra_ocr.airflow.backfill import DONE_PARAM, TOTAL_PARAM, XCOM_KEY
from chandra_ocr.airflow.feed_operators import FeedExportOperator, VectorIndexOperator
from chandra_ocr.airflow.operators import (
    AssembleOperator,
    ChandraOcrOperator,
    CompressOperator,
    DiscoverOperator,
    LoadOperator,
)
from chandra_ocr.airflow.preflight import PreflightOperator
from chandra_ocr.airflow.report_operator import ReportOperator
from chandra_ocr.airflow.settings import DagSettings
from chandra_ocr.run_settings import SETTINGS, Setting

# Updated by every load that changed the knowledge base; extra: kb, run_id, documents, pages, chunks.
KB_ASSET = Asset(name="chandra_ocr_kb", group="chandra_ocr")
START = datetime(2026, 1, 1)
TAGS = ["chandra_ocr"]


_PARAM_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def run_params(*, backfill: bool) -> dict[str, Param]:
    """The DAG-run Params, one per run setting with one (run_settings.py); an empty value means:
    Variable ``chandra_ocr`` → environment → default."""
    params = {s.name: _param(s) for s in SETTINGS if s.param == "all" or (backfill and s.param == "backfill")}
    if backfill:
        params |= {
            DONE_PARAM: Param(None, type=["null", "integer"], minimum=0,
                              description="set by the DAG when it continues itself: batches done so far"),
            TOTAL_PARAM: Param(None, type=["null", "integer"], minimum=0,
                               description="set by the DAG when it continues itself: the backfill's batches"),
        }  # fmt: skip
    return params


def _param(s: Setting) -> Param:
    kind = _PARAM_TYPES[s.type]
    extra: dict[str, Any] = {"minimum": s.minimum} if s.minimum is not None else {}
    if s.title:
        extra["title"] = s.title
    if s.env is None:  # the run's own choice: the Param alone gives it
        if s.type is bool:
            return Param(False, type=kind, description=s.help, **extra)
        return Param(None, type=["null", kind], description=s.help, **extra)
    default = s.default if s.default not in ("", None) else "none"
    default = str(default).lower() if isinstance(default, bool) else default
    description = f"{s.help}; empty: Variable chandra_ocr, else ${s.env}, else {default}"
    if s.name in ("source", "kb"):
        description += "; a relative path is taken under $CHANDRA_OCR_BASE_DIR, else $AIRFLOW_HOME"
    if s.choices:
        extra["enum"] = [None, *s.choices]
    return Param(None, type=["null", kind], description=description, **extra)


def _dag(dag_id: str, settings: DagSettings, schedule: Any, params: dict, doc_md: str | None) -> DAG:
    """The settings every chandra_ocr DAG shares: one active run, no catch-up, the project's tags."""
    return DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        params=params,
        default_args=settings.retry_args(),
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
            settings=settings,
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
        from chandra_ocr.airflow.continue_backfill import ContinueBackfillOperator  # seconds: backfill only

        report >> ContinueBackfillOperator(
            task_id="continue", discover_task_id="discover", trigger_dag_id=continue_dag_id, retries=0
        )
