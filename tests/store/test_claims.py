"""Claims between runs on one knowledge base (store/claims.py): a live run keeps what it claimed, a dead
one (a killed CLI process, an Airflow run whose lease ran out or whose DAG started its next run) holds
nothing up, and what dead runs left is swept."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from chandra_ocr.store import claims
from chandra_ocr.store.layout import KbLayout

HOLDER = """
import sys, time
from pathlib import Path
from chandra_ocr.store import claims
from chandra_ocr.store.layout import KbLayout
layout = KbLayout(Path(sys.argv[1]))
with claims.process_run(layout, "cli-a"):
    assert claims.claim(layout, "cli-a", ["d1", "d2"]) == {}
    layout.staged("cli-a", "d1").write_bytes(b"rows")
    print("ready", flush=True)
    time.sleep(120)
"""


def test_a_cli_run_holds_its_claims_while_its_process_lives_and_not_a_moment_after(tmp_path: Path):
    layout = KbLayout(tmp_path)
    cmd = [sys.executable, "-c", HOLDER, str(tmp_path)]
    holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        assert claims.alive(layout, "cli-a")
        assert claims.claim(layout, "cli-b", ["d1", "d3"]) == {"d1": "cli-a"}
        assert claims.sweep(layout) == 0 and layout.staged("cli-a", "d1").exists()  # a live run's rows stay
    finally:
        holder.kill()  # SIGKILL: no cleanup of its own
        holder.wait(timeout=30)
    assert not claims.alive(layout, "cli-a")  # the kernel dropped its lock
    assert claims.claim(layout, "cli-b", ["d1"]) == {}  # taken over at once
    assert claims.sweep(layout) == 1  # its staging folder, and its claim of d2
    assert not layout.staging_dir("cli-a").exists()
    assert sorted(p.name for p in layout.claims_dir.iterdir() if p.name[0] != ".") == ["d1", "d3"]


def test_an_airflow_run_holds_its_claims_for_its_lease_or_until_its_dag_runs_again(tmp_path, monkeypatch):
    layout = KbLayout(tmp_path)
    assert claims.claim(layout, "scheduled__1", ["d1", "d2"], series="chandra_ocr_ingest") == {}
    # the backfill DAG, meanwhile: the nightly run is alive (its tasks are separate processes)
    assert claims.claim(layout, "manual__b", ["d1"], series="chandra_ocr_backfill") == {"d1": "scheduled__1"}
    # the nightly DAG again (max_active_runs=1): its earlier run is over, failed or not
    assert claims.claim(layout, "scheduled__2", ["d1"], series="chandra_ocr_ingest") == {}
    assert claims.claim(layout, "manual__b", ["d2"], series="chandra_ocr_backfill") == {"d2": "scheduled__1"}
    layout.staged("scheduled__1", "d2").write_bytes(b"rows")

    now = time.time()
    monkeypatch.setattr(claims.time, "time", lambda: now + claims.LEASE_S + 1)  # no task renewed it since
    assert claims.claim(layout, "manual__b", ["d2"], series="chandra_ocr_backfill") == {}
    assert claims.sweep(layout) == 0  # kept a while: a task cleared and rerun days later finds its rows
    assert layout.staged("scheduled__1", "d2").exists()
    monkeypatch.setattr(claims.time, "time", lambda: now + 2 * claims.LEASE_S + claims.KEEP_S + 2)
    assert claims.sweep(layout) == 3  # every run's lease is long over: all three folders go
    assert not layout.staging_root.exists() or not any(layout.staging_root.iterdir())


def test_the_end_of_a_run_releases_its_claims_and_removes_its_staging_folder(tmp_path: Path):
    layout = KbLayout(tmp_path)
    claims.claim(layout, "r1", ["d1", "d2"])
    claims.claim(layout, "r2", ["d3"])
    layout.staged("r1", "d1").write_bytes(b"rows")
    claims.end_run(layout, "r1")
    assert not layout.staging_dir("r1").exists() and layout.staging_dir("r2").exists()
    assert claims.claim(layout, "r3", ["d1", "d2", "d3"]) == {"d3": "r2"}
