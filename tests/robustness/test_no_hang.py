"""No run may hang: Tesseract's pipes and PDF workers being replaced, every wait with a deadline.

The hang this guards against (issue: a replacement PDF worker inherits Tesseract's pipes): pebble
forks replacement workers from a background thread; when the pool was forked from the process
whose threads run ``tesseract`` children, a worker forked while a child's pipes are open keeps
copies of them. The child's stdin never sees EOF (Tesseract waits for it), and a killed child's
stdout never does either (its reader waited for ever). Here a real ``tesseract`` reads small pages
through ``CpuEngine`` while a churn of tasks killed at their time limit makes pebble fork
replacement workers all the time, in the pool the pipeline builds for that engine.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pace import scaled
from PIL import Image, ImageDraw
from processes import pipe_inodes

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.document import PageRequest
from chandra_ocr.errors import StageTimeoutError, StallError
from chandra_ocr.ocr.cpu_engine import CpuEngine, CpuOptions
from chandra_ocr.progress import Progress
from chandra_ocr.stages.context import worker_pool
from chandra_ocr.watchdog import Watchdog

pytestmark = pytest.mark.slow

PAGES = 40


def _page(n: int) -> PageRequest:
    image = Image.new("L", (600, 160), 255)
    ImageDraw.Draw(image).text((20, 60), f"Page {n} of the churn test", fill=0)
    return PageRequest(f"doc{n}", 1, "unused.pdf", 432.0, 115.2, image=image)


def _churn(workers, stop: threading.Event) -> int:
    """Keep submitting tasks that outlive their limit: each one's worker is killed and replaced."""
    killed = 0
    while not stop.is_set():
        futures = [workers.submit(time.sleep, 5, timeout=0.05) for _ in range(workers.workers)]
        for future in futures:
            try:
                future.result(timeout=30)
            except Exception:
                killed += 1
    return killed


@pytest.mark.timeout(600)
def test_tesseract_pages_finish_while_workers_are_replaced(tmp_path: Path):
    engine = CpuEngine(CpuOptions(workers=2, psm=6, timeout_s=8))
    engine.start()
    options = IngestOptions(pdf=PdfOptions(workers=2, memory_limit_mb=512))
    stop, killed = threading.Event(), []
    with worker_pool(options, engine) as workers:
        churn = threading.Thread(target=lambda: killed.append(_churn(workers, stop)), daemon=True)
        churn.start()
        time.sleep(1.0)  # the churn is under way before the first page
        bound = scaled(PAGES * 8 / 2)  # pages that waited out their 8 s limit would take twice that
        started = time.monotonic()
        try:
            results = list(engine.run(_page(n) for n in range(PAGES)))
        finally:
            stop.set()
            churn.join(timeout=60)
        elapsed = time.monotonic() - started
        workers.close(cancel=True)
    engine.close()
    assert killed and killed[0] >= 10, f"too few worker replacements to test anything ({killed})"
    failed = [(r.doc_id, r.error) for r in results if r.status != "ok"]
    assert len(results) == PAGES and not failed, f"{len(failed)} pages failed: {failed[:3]}"
    assert elapsed < bound, f"{elapsed:.0f} s: pages waited for their time limit"


@pytest.mark.timeout(300)
def test_a_worker_replaced_while_tesseract_runs_holds_none_of_its_pipes():
    """Deterministic: the replacement is forked exactly while a tesseract child's pipes are open (the
    window the engine's threads open for every page). A worker forked from this process would hold
    the child's stdin write end: Tesseract reads its image to EOF, so it would wait for ever."""
    engine = CpuEngine(CpuOptions(psm=6))
    engine.start()
    png = io.BytesIO()
    _page(1).image.save(png, format="PNG")
    options = IngestOptions(pdf=PdfOptions(workers=1, memory_limit_mb=512))
    with worker_pool(options, engine) as workers:
        workers.submit(os.getpid, timeout=30).result(timeout=120)  # the pool is up
        cmd = [shutil.which("tesseract"), "stdin", "stdout", "--psm", "6", "tsv"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pipes = {os.fstat(f.fileno()).st_ino for f in (proc.stdin, proc.stdout, proc.stderr)}
        with pytest.raises(StageTimeoutError):  # the worker is killed; its replacement is forked now
            workers.submit(time.sleep, 30, timeout=0.2).result(timeout=120)
        held = workers.submit(pipe_inodes, timeout=30).result(timeout=120)
        try:
            out, _ = proc.communicate(png.getvalue(), timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = b""
    engine.close()
    assert not held & pipes, "the replacement worker holds the tesseract child's pipes"
    assert proc.returncode == 0 and out.startswith(b"level"), "tesseract did not finish its page"


def test_watchdog_fails_a_stall_naming_the_stage_and_what_it_waits_on(caplog):
    dog = Watchdog()
    with dog.armed(warn_after_s=0.2, fail_after_s=0.6):
        dog.beat("extract b0001")
        dog.check(lambda: "never called before a limit")
        time.sleep(0.3)
        with caplog.at_level("WARNING", logger="chandra_ocr.watchdog"):
            dog.check(lambda: "2 pages of a.pdf")
        assert "nothing finished for" in caplog.text and "2 pages of a.pdf" in caplog.text
        time.sleep(0.4)
        with pytest.raises(StallError, match=r"stage 'extract b0001'.*waiting on 2 pages of a\.pdf"):
            dog.check(lambda: "2 pages of a.pdf")
        dog.beat()
        dog.check(lambda: "nothing")  # finished work resets the clock
    time.sleep(0.7)
    dog.check(lambda: "nothing")  # disarmed: no limits


def test_progress_beats_the_process_watchdog():
    from chandra_ocr.watchdog import WATCHDOG

    with WATCHDOG.armed(warn_after_s=60, fail_after_s=120):
        time.sleep(0.2)
        before = WATCHDOG.stalled_s()
        Progress("a step", 1, __import__("logging").getLogger("test")).add(pages=1)
        assert WATCHDOG.stalled_s() < before


def test_stall_limit_must_exceed_every_per_document_limit():
    from chandra_ocr.errors import ConfigError

    with pytest.raises(ConfigError, match="stall_timeout_s"):
        IngestOptions(stall_timeout_s=200, pdf=PdfOptions(doc_timeout_s=300))
