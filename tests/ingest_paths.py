"""One ingestion through either production path over the same stages: the CLI runner
(``pipeline.run``) or the Airflow operators, task after task as the DAG maps them (``execute`` with
a real metadata DB, no scheduler). Robustness tests take the ``ingest_path`` fixture to run both."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from chandra_ocr.config import IngestOptions
from chandra_ocr.ocr.base import OcrEngine

Ingest = Callable[[Path, Path, IngestOptions, OcrEngine], dict[str, int]]


def ingest_cli(src: Path, kb: Path, options: IngestOptions, engine: OcrEngine) -> dict[str, int]:
    """Documents by status after ``pipeline.run``."""
    from chandra_ocr.pipeline import run

    return run(src, kb, options, engine=engine).statuses


def ingest_airflow(src: Path, kb: Path, options: IngestOptions, engine: OcrEngine) -> dict[str, int]:
    """Documents by status after the DAG's tasks, each batch through compress → ocr → assemble, then load.

    The OCR task gets ``engine`` in place of the one it would build from the run's settings (the
    operator builds it on first use of ``ocr_engine``): the tests' engines are stand-ins or point
    at a test server."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from chandra_ocr.airflow.graph import KB_ASSET
    from chandra_ocr.airflow.operators import (
        AssembleOperator,
        ChandraOcrOperator,
        CompressOperator,
        DiscoverOperator,
        LoadOperator,
    )
    from chandra_ocr.airflow.settings import RunConfig

    started = datetime.now(UTC).isoformat()
    config = RunConfig(str(src), str(kb), "vllm_default", options.to_dict(), started_at=started).to_dict()
    context = {"run_id": "airflow-path"}
    done = []
    for i, batch in enumerate(DiscoverOperator(task_id="discover", config=config).execute(context)):
        batch = CompressOperator(task_id=f"compress-{i}", config=config, batch=batch).execute(context)
        ocr = ChandraOcrOperator(task_id=f"ocr-{i}", config=config, batch=batch)
        ocr.__dict__["ocr_engine"] = engine  # the cached property, set before its first use
        batch = ocr.execute(context)
        done.append(AssembleOperator(task_id=f"assemble-{i}", config=config, batch=batch).execute(context))
    load = LoadOperator(task_id="load", config=config, batches=done, kb_asset=KB_ASSET)
    return load.execute(context | {"outlet_events": OutletEventAccessors()})["documents"]


PATHS: dict[str, Ingest] = {"cli": ingest_cli, "airflow": ingest_airflow}
