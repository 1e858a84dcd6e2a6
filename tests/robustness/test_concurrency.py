"""Concurrent runs under a real scheduler: the nightly ingest DAG and a backfill over overlapping folders
(plus a second ingest run, queued behind the first) end with each document once, no task failing on
DuckDB's single-writer lock or on the other run's files, and the DuckDB writers one at a time in their
1-slot pool.

The race is produced, not left to timing: the loader pool has no slot until both runs have discovered,
claimed and assembled everything, so both find the shared documents new, and each shared document is
left by one run to the other (store/claims.py), which the runs' records count."""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime
from itertools import combinations
from pathlib import Path

import duckdb
import pytest
from airflow_stack import AirflowStack
from pace import scaled

pytestmark = [pytest.mark.corpus, pytest.mark.slow, pytest.mark.timeout(1500)]

SOURCES = "docling/tests/data/pdf/sources"
LOADER_POOL = "chandra_ocr_loader"


@pytest.fixture
def stack(tmp_path: Path):
    settings = {
        "CHANDRA_OCR_SCHEDULE": "none",  # only the runs this test triggers
        "CHANDRA_OCR_RETRIES": "0",  # a lock error would fail its task at once, not hide in a retry
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
    }
    airflow = AirflowStack(tmp_path / "airflow", settings)
    airflow.start()
    yield airflow
    airflow.stop()


def _landing(corpus: Path, root: Path) -> None:
    """in/{a,b}.pdf and in/sub/{c,d}.pdf, plus in/sub/copy_of_a.pdf: the same bytes as a.pdf."""
    (root / "sub").mkdir(parents=True)
    files = {
        "a": "2305.03393v1-pg9",
        "b": "code_and_formula",
        "sub/c": "multi_page",
        "sub/d": "picture_classification",
    }
    for name, stem in files.items():
        shutil.copy(corpus / SOURCES / f"{stem}.pdf", root / f"{name}.pdf")
    shutil.copy(root / "a.pdf", root / "sub" / "copy_of_a.pdf")


def _moment(value: str | None) -> datetime:
    return datetime.fromisoformat(value) if value else datetime.max


def test_overlapping_runs_load_each_document_once_and_writers_take_turns(corpus: Path, tmp_path: Path, stack):
    src, kb = tmp_path / "in", tmp_path / "kb"
    _landing(corpus, src)
    stack.wait_for_dags(["chandra_ocr_ingest", "chandra_ocr_backfill", "chandra_ocr_vector_feed"])

    conf = {"kb": str(kb), "engine": "text"}
    stack.airflow("pools", "set", LOADER_POOL, "0", "no load until both runs have assembled")
    triggers = [
        stack.trigger("chandra_ocr_ingest", "nightly", conf | {"source": str(src)}),
        stack.trigger("chandra_ocr_backfill", "backfill", conf | {"source": str(src / "sub")}),
    ]
    for t in triggers:
        assert t.wait(timeout=scaled(300)) == 0, t.stderr.read()
    _wait_for_both_loads_to_wait(stack)
    stack.airflow("pools", "set", LOADER_POOL, "1", "the loader: one writer at a time")
    again = stack.trigger("chandra_ocr_ingest", "nightly-again", conf | {"source": str(src)})
    assert again.wait(timeout=scaled(300)) == 0, again.stderr.read()
    runs = stack.wait_for_runs()

    # Every run (the feed runs the loads triggered included) succeeded; no task failed or retried.
    assert {r[2] for r in runs} == {"success"}, runs
    tasks = stack.query("SELECT dag_id, run_id, task_id, map_index, state, try_number FROM task_instance")
    assert {t[4] for t in tasks} <= {"success", "skipped"}, [
        t for t in tasks if t[4] not in ("success", "skipped")
    ]
    assert max(t[5] for t in tasks) == 1
    # The two ingestions really ran at the same time.
    spans = {r[1]: (_moment(r[3]), _moment(r[4])) for r in runs}
    (a0, a1), (b0, b1) = spans["nightly"], spans["backfill"]
    assert a0 < b1 and b0 < a1, spans
    # DuckDB writers (loads and feed exports) never overlapped: the 1-slot pool held them apart.
    writers = stack.query(
        "SELECT run_id, task_id, start_date, end_date FROM task_instance "
        "WHERE pool = ? AND state = 'success'",
        LOADER_POOL,
    )
    assert {w[1] for w in writers} >= {"load", "export"} and len(writers) >= 3
    for (r1, t1, s1, e1), (r2, t2, s2, e2) in combinations(writers, 2):
        assert _moment(e1) <= _moment(s2) or _moment(e2) <= _moment(s1), (r1, t1, r2, t2)

    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        n_docs, n_ids = con.execute("SELECT count(*), count(DISTINCT doc_id) FROM documents").fetchone()
        statuses = con.execute("SELECT DISTINCT status FROM documents").fetchall()
        uneven = con.execute(
            "SELECT d.doc_id FROM documents d LEFT JOIN pages p USING (doc_id) "
            "GROUP BY d.doc_id, d.n_pages HAVING count(p.page_no) <> d.n_pages"
        ).fetchall()
        gaps = con.execute(
            "SELECT doc_id FROM chunks GROUP BY doc_id "
            "HAVING count(*) <> count(DISTINCT chunk_no) OR max(chunk_no) - min(chunk_no) + 1 <> count(*)"
        ).fetchall()
        loaded_runs = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
        metrics = con.execute("SELECT metrics FROM runs").fetchall()
        left = [json.loads(m).get("elsewhere", {}) for (m,) in metrics]
    finally:
        con.close()
    assert (n_docs, n_ids) == (4, 4)  # a, b, c, d: copy_of_a is a's bytes, so a's document
    assert statuses == [("ingested",)] and not uneven and not gaps
    assert {"nightly", "backfill"} <= loaded_runs and "nightly-again" not in loaded_runs  # nothing left to do
    # a, c and d were found by both runs: each was left by one run to the other, which loaded it
    assert sum(n for counts in left for n in counts.values()) == 3, left
    assert {run for counts in left for run in counts} <= {"nightly", "backfill"}


def _wait_for_both_loads_to_wait(stack: AirflowStack, timeout_s: float = 600) -> None:
    """Until both runs' ``load`` tasks wait for the loader pool: every batch discovered and assembled."""
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        loads = stack.query(
            "SELECT run_id, state FROM task_instance "
            "WHERE task_id = 'load' AND run_id IN ('nightly', 'backfill')"
        )
        assert not [r for r in loads if r[1] in ("failed", "upstream_failed")], loads
        if len(loads) == 2 and all(r[1] in ("scheduled", "queued") for r in loads):
            return
        time.sleep(2)
    raise AssertionError(f"the loads did not both reach the loader pool:\n{stack.tail()}")
