"""Scale-out on this machine: ``chandra_ocr_ingest`` on a real CeleryExecutor deployment.

PostgreSQL (metadata DB + Celery results), Redis (broker), api-server, scheduler, dag-processor
and two Celery workers — one on the ``gpu`` queue, one on ``default`` — all on 127.0.0.1 (see
``deployment.py``). The run is triggered through the REST API; the task instance records in
PostgreSQL tell which worker ran each task. The knowledge base must equal the one a single
process (``pipeline.run``) builds from the same files. No GPU here: the ``gpu`` worker reads with
Tesseract (``engine=cpu``); what is proven is the routing, not the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest
from deployment import (
    VENV_BIN,
    Processes,
    airflow_env,
    free_port,
    postgres_bin,
    start_airflow,
    start_postgres,
    start_redis,
    wait_until,
)
from kb_query import kb_rows
from pace import scaled

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout

pytestmark = [pytest.mark.slow, pytest.mark.corpus, pytest.mark.timeout(600)]

DAG_ID = "chandra_ocr_ingest"
BATCH_PAGES = 2
PDFS = {  # corpus files: two born-digital, one scan (OCR route), one broken (quarantined)
    "born_a": "docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf",
    "born_b": "docling/tests/data/pdf/sources/code_and_formula.pdf",
    "scanned": "derived/phototest.scan.pdf",
    "broken": "ocrmypdf/tests/resources/invalid.pdf",
}
# Columns that differ between any two runs: run ids, load times, measured latencies.
VOLATILE = {
    "documents": ["run_id", "first_seen", "ingested_at"],
    "pages": ["latency_ms"],
    "chunks": ["updated_at"],
}


@dataclass
class CeleryRun:
    state: str
    tasks: list[tuple[str, int, str, str, str]]  # task_id, map_index, state, queue, hostname
    kb: Path
    landing: Path
    airflow_home: Path


def _api(base: str, method: str, path: str, token: str | None = None, body: dict | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, method=method, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=scaled(30)) as response:
        return json.loads(response.read() or b"{}")


def _query(dsn: str, sql: str, args: tuple = ()) -> list[tuple]:
    with psycopg2.connect(dsn) as con, con.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def _landing(root: Path, corpus: Path) -> Path:
    landing = root / "landing"
    landing.mkdir()
    for name, rel in PDFS.items():
        shutil.copyfile(corpus / rel, landing / f"{name}.pdf")
        os.utime(landing / f"{name}.pdf", (1_700_000_000, 1_700_000_000))
    return landing


def _trigger_and_wait(procs: Processes, dsn: str, api: str, conf: dict) -> str:
    parsed = "SELECT 1 FROM dag WHERE dag_id = %s"
    wait_until(lambda: _query(dsn, parsed, (DAG_ID,)), 180, "DAG parsed", procs)
    wait_until(lambda: _api(api, "GET", "/api/v2/monitor/health"), 60, "api-server up", procs)
    token = _api(api, "GET", "/auth/token")["access_token"]
    _api(api, "PATCH", f"/api/v2/dags/{DAG_ID}", token, {"is_paused": False})
    run_id = _api(api, "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", token, {"logical_date": None, "conf": conf})[
        "dag_run_id"
    ]
    done = "SELECT state FROM dag_run WHERE run_id = %s AND state IN ('success', 'failed')"
    return wait_until(lambda: _query(dsn, done, (run_id,)), 360, "the DAG run finished", procs)[0][0]


@pytest.fixture(scope="module")
def celery_run(corpus) -> CeleryRun:
    missing = "needs Debian's redis-server and postgresql: make test installs them"
    assert shutil.which("redis-server") and postgres_bin(), missing
    root = Path(tempfile.mkdtemp(prefix="chandra-scaleout-"))
    root.chmod(0o755)  # PostgreSQL runs as the postgres user under root/pg
    (root / "logs").mkdir()
    procs = Processes(root / "logs")
    try:
        dsn = start_postgres(procs, root / "pg")
        broker = start_redis(procs, root)
        api_port = free_port()
        env = airflow_env(root / "airflow", dsn, broker, api_port)
        setup = [str(VENV_BIN / "python"), "-m", "chandra_ocr.airflow.setup"]
        done = procs.run_once("setup", setup, env, timeout_s=180)
        assert done == 0, procs.tail("setup")
        start_airflow(procs, env, api_port)
        landing = _landing(root, corpus)
        conf = {"source": str(landing), "kb": str(root / "kb"), "engine": "cpu", "batch_pages": BATCH_PAGES}
        state = _trigger_and_wait(procs, dsn, f"http://127.0.0.1:{api_port}", conf)
        tasks = _query(dsn, "SELECT task_id, map_index, state, queue, hostname FROM task_instance "
                            "WHERE dag_id = %s ORDER BY task_id, map_index", (DAG_ID,))  # fmt: skip
        yield CeleryRun(state, tasks, root / "kb", landing, root / "airflow")
    finally:
        procs.stop_all()
        shutil.rmtree(root, ignore_errors=True)


def test_ocr_ran_on_the_gpu_worker_and_everything_else_on_the_default_worker(celery_run):
    assert celery_run.state == "success", celery_run.tasks
    ocr = [t for t in celery_run.tasks if t[0] == "batch.extract"]
    others = [t for t in celery_run.tasks if t[0] != "batch.extract"]
    assert len(ocr) >= 2  # one mapped instance per batch
    assert {(state, queue, host) for _, _, state, queue, host in ocr} == {("success", "gpu", "gpu-worker")}
    assert {(queue, host) for _, _, _, queue, host in others} == {("default", "default-worker")}
    stages = {"preflight", "discover", "batch.compress", "batch.assemble", "load", "report"}
    assert {t[0] for t in others} == stages


def _content(kb: Path) -> dict[str, list[tuple]]:
    con = connect(KbLayout(kb), read_only=True)
    try:
        out = {}
        for table in DOCUMENT_TABLES:
            skip = VOLATILE.get(table)
            columns = f"* EXCLUDE ({', '.join(skip)})" if skip else "*"
            out[table] = sorted(con.execute(f"SELECT {columns} FROM {table}").fetchall(), key=repr)
        return out
    finally:
        con.close()


def test_the_knowledge_base_equals_a_single_process_run(celery_run, tmp_path):
    options = IngestOptions(engine="cpu", batch_pages=BATCH_PAGES, pdf=PdfOptions(settle_seconds=0))
    single = tmp_path / "kb"
    run(celery_run.landing, single, options)
    distributed, alone = _content(celery_run.kb), _content(single)
    status = "SELECT file_name, status, error FROM documents ORDER BY 1"
    assert kb_rows(celery_run.kb, status) == kb_rows(single, status)
    assert {t: len(r) for t, r in distributed.items()} == {t: len(r) for t, r in alone.items()}
    assert len(distributed["chunks"]) > 0 and any(r[4] == "ocr" for r in distributed["pages"])
    for table in DOCUMENT_TABLES:
        assert distributed[table] == alone[table], table


def test_the_run_record_report_and_progress_lines(celery_run):
    ((metrics,),) = kb_rows(celery_run.kb, "SELECT metrics FROM runs")
    stages = json.loads(metrics)["stage_seconds"]
    assert set(stages) == {"compress", "extract", "assemble", "load"} and min(stages.values()) > 0
    assert (celery_run.kb / "report" / "report.html").stat().st_size > 0
    logs = celery_run.airflow_home / "logs" / f"dag_id={DAG_ID}"
    lines = {"batch.compress": "compress b-", "batch.extract": "extract b-", "batch.assemble": "assemble b-",
             "load": " batch(es): ", "report": "run report of kb "}  # fmt: skip
    for task, line in lines.items():
        texts = [p.read_text(errors="replace") for p in logs.rglob(f"task_id={task}/**/*.log")]
        assert texts and all(line in t for t in texts), task
