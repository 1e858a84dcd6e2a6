"""Crash and resume: a CLI run SIGKILLed in the middle of OCR, run again, ends exactly where an
uninterrupted run ends, and the pages finished before the kill are not read again."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

# Scanned documents only (every page goes to OCR): 6 + 4 + 1 + 1 pages, read by Tesseract.
SCANS = [
    "ocrmypdf/tests/resources/multipage.pdf",
    "ocrmypdf/tests/resources/cardinal.pdf",
    "derived/phototest.scan.pdf",
    "derived/eurotext.scan.pdf",
]
N_PAGES = 12
DOCUMENT_TABLES = ("documents", "pages", "blocks", "tables", "table_cells", "chunks")
# Columns that differ between any two runs by design (run ids, clocks).
VOLATILE = {
    "documents": {"run_id", "first_seen", "ingested_at"},
    "pages": {"latency_ms"},
    "chunks": {"updated_at"},
}


def _command(src: Path, kb: Path) -> list[str]:
    return [
        sys.executable, "-m", "chandra_ocr.cli", "run", str(src), "--kb", str(kb),
        "--engine", "cpu", "--engine-option", "dpi=150", "--settle-seconds", "0", "--no-compress",
    ]  # fmt: skip


def _run(src: Path, kb: Path, log: Path) -> None:
    with open(log, "ab") as out:
        done = subprocess.run(_command(src, kb), stdout=out, stderr=subprocess.STDOUT, timeout=600)
    assert done.returncode == 0, log.read_text(errors="replace")[-3000:]


def _checkpoints(kb: Path) -> dict[Path, tuple[int, str]]:
    """Every page checkpoint: (mtime in ns, sha256 of its bytes)."""
    return {
        p: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in (kb / "work").glob("*/*/pages/*.json")
    }


def _ocr_pages_done(kb: Path) -> int:
    n = 0
    for path in (kb / "work").glob("*/*/pages/*.json"):
        with contextlib.suppress(OSError, ValueError):  # renamed into place whole; a racing listing is fine
            n += json.loads(path.read_text())["page"]["route"] == "ocr"
    return n


def _table_hashes(kb: Path) -> dict[str, tuple[int, str]]:
    """Rows and a content hash of each table, run-specific columns left out."""
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        out = {}
        for table in DOCUMENT_TABLES:
            columns = [
                c[0]
                for c in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                    "ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            kept = ", ".join(f'"{c}"' for c in columns if c not in VOLATILE.get(table, set()))
            rows = con.execute(f'SELECT {kept} FROM "{table}" ORDER BY ALL').fetchall()
            out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
        metrics = [
            json.loads(m[0]) for m in con.execute("SELECT metrics FROM runs ORDER BY started_at").fetchall()
        ]
    finally:
        con.close()
    return out | {"_engine_pages": [m.get("pages") for m in metrics]}


def _kill_after(src: Path, kb: Path, log: Path, pages: int) -> None:
    """Start a run and SIGKILL its whole process group once ``pages`` OCR pages are checkpointed."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            _command(src, kb), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 300
        while _ocr_pages_done(kb) < pages:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no OCR progress within 300 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI, its PDF workers and the tesseract processes
        proc.wait()


def test_killed_run_resumes_to_the_same_knowledge_base_without_rereading_pages(corpus: Path, tmp_path: Path):
    src = tmp_path / "scans"
    src.mkdir()
    for i, rel in enumerate(SCANS):
        (src / f"{i}-{Path(rel).name}").write_bytes((corpus / rel).read_bytes())
    log = tmp_path / "runs.log"

    _run(src, tmp_path / "kb-straight", log)
    straight = _table_hashes(tmp_path / "kb-straight")

    kb = tmp_path / "kb-killed"
    _kill_after(src, kb, log, pages=3)
    before = _checkpoints(kb)
    read_before_kill = _ocr_pages_done(kb)
    assert 3 <= read_before_kill < N_PAGES, "the kill must land in the middle of the batch"
    assert not (kb / "kb.duckdb").exists() or not _has_rows(kb), "nothing is loaded before the batch ends"

    _run(src, kb, log)
    resumed = _table_hashes(kb)

    after = _checkpoints(kb)
    assert {p: after[p] for p in before} == before, "a page finished before the kill was written again"
    assert len(after) == N_PAGES
    # The resumed run's engine read only what was missing; the uninterrupted run read everything.
    assert straight.pop("_engine_pages") == [N_PAGES]
    assert resumed.pop("_engine_pages") == [N_PAGES - read_before_kill]
    assert resumed == straight
    assert straight["documents"][0] == len(SCANS) and straight["pages"][0] == N_PAGES


def _has_rows(kb: Path) -> bool:
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        return bool(con.execute("SELECT count(*) FROM documents").fetchone()[0])
    except duckdb.CatalogException:
        return False
    finally:
        con.close()
