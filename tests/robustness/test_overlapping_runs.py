"""Three ``chandra-ingest run`` processes started together on one knowledge base over nested folders: each
run exits 0, each document is loaded once (by one run; the others leave it to that run), and the KB
equals the one a single run makes.

The race is produced, not hoped for: the test holds the KB's write lock while the runs start, so every
run discovers, claims and stages before any can load, and each document that n runs found is left to
another run by n - 1 of them — a count the test checks exactly, in two rounds. A third round runs
free, with the timing the machine gives (loads overlapping later discoveries).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from chandra_ocr.testing.synthetic_pdfs import pdf_bytes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# folder → files: the runs read root (everything), root/sub and root/sub/deep
TREE = {"": 2, "sub": 3, "sub/deep": 3}
RUNS = ("", "sub", "sub/deep")
# Columns that say when or by which run (or how fast) a row was made, not what it holds.
VOLATILE = {"run_id", "first_seen", "ingested_at", "updated_at", "latency_ms"}
TABLES = ("documents", "pages", "blocks", "tables", "table_cells", "chunks")


@pytest.fixture(scope="module")
def source(tmp_path_factory, samples: Path) -> Path:
    root = tmp_path_factory.mktemp("overlap") / "in"
    n = 0
    for folder, count in TREE.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for _ in range(count):
            n += 1
            (root / folder / f"doc{n:02d}.pdf").write_bytes(pdf_bytes(n, note="overlap"))
    shutil.copy(samples / "report.pdf", root / "sub" / "deep" / "report.pdf")  # a table, for table_cells
    return root


def _start(src: Path, kb: Path) -> subprocess.Popen:
    args = ["run", str(src), "--kb", str(kb), "--engine", "text", "--settle-seconds", "0"]
    args += ["--batch-pages", "1", "--workers", "1"]  # a batch per document: claims taken one by one
    return subprocess.Popen(
        [sys.executable, "-m", "chandra_ocr.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _waiting_for(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (a run opens the write lock only to load)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def _finish(procs: list[subprocess.Popen]) -> list[str]:
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (proc.returncode, out, err)
        assert "unexpected" not in err, err
        outs.append(out)
    return outs


def _left_to_others(outputs: list[str]) -> int:
    return sum(int(n) for out in outputs for n in re.findall(r"^\s+(\d+) left to run ", out, re.M))


def _contents(kb: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        out = {}
        for table in TABLES:
            described = con.execute(f"SELECT * FROM {table} LIMIT 0").description
            cols = [c[0] for c in described if c[0] not in VOLATILE]
            out[table] = con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL").fetchall()
        return out
    finally:
        con.close()


def _check_once(kb: Path, single: dict[str, list[tuple]], runs: int) -> None:
    contents = _contents(kb)
    ids = [row[0] for row in contents["documents"]]
    assert len(ids) == len(set(ids)) == sum(TREE.values()) + 1
    assert contents == single  # the same rows as a single run's, each once
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(runs,)]  # each run recorded
    finally:
        con.close()
    assert not (kb / "staging").exists()  # every run removed its staged rows
    assert not [p for p in (kb / "claims").iterdir() if not p.name.startswith(".")]  # and its claims


def test_three_runs_started_together_load_each_document_once(source: Path, tmp_path: Path):
    single_kb = tmp_path / "single"
    (out,) = _finish([_start(source, single_kb)])
    assert _left_to_others([out]) == 0
    single = _contents(single_kb)
    found = {run: sum(n for f, n in TREE.items() if f.startswith(run)) for run in RUNS}
    found["sub/deep"] += 1  # report.pdf
    found["sub"] += 1
    found[""] += 1
    contested = sum(found.values()) - found[""]  # each document found by k runs is left k - 1 times

    for round_no in range(2):
        kb = tmp_path / f"kb{round_no}"
        kb.mkdir()
        lock = kb / ".write.lock"
        with open(lock, "a+b") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # no run loads before every run has claimed
            procs = [_start(source / run, kb) for run in RUNS]
            deadline = time.monotonic() + 240
            while not all(_waiting_for(p.pid, lock) for p in procs):
                assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
                assert time.monotonic() < deadline, "the runs did not all reach their load"
                time.sleep(0.2)
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)
        outputs = _finish(procs)
        assert _left_to_others(outputs) == contested, outputs  # the race was hit, every time
        _check_once(kb, single, len(RUNS))

    kb = tmp_path / "free"  # the same three runs with the machine's own timing
    _finish([_start(source / run, kb) for run in RUNS])
    _check_once(kb, single, len(RUNS))
