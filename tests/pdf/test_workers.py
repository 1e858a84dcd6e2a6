"""The PDF worker pool with real processes: kills on timeout, memory caps, bounded render streams."""

from __future__ import annotations

import gc
import os
import resource
import time
from pathlib import Path

import pymupdf
import pytest
from pace import scaled

from chandra_ocr.config import PdfOptions
from chandra_ocr.document import PageRequest, RenderSpec
from chandra_ocr.errors import BadDocumentError, StageTimeoutError
from chandra_ocr.pdf.render import target_size
from chandra_ocr.pdf.triage import triage_document
from chandra_ocr.pdf.workers import PdfWorkers

LIMIT_MB = 1024


@pytest.fixture(scope="module", params=[False, True], ids=["forkserver", "fork"])
def workers(request):
    with PdfWorkers(2, LIMIT_MB, fork=request.param) as pool:
        pool.forked = request.param
        yield pool


def test_workers_come_from_the_start_method_asked_for_and_cap_memory(workers: PdfWorkers) -> None:
    parent = workers.submit(os.getppid, timeout=30).result()
    soft, hard = workers.submit(resource.getrlimit, resource.RLIMIT_AS, timeout=30).result()
    limit = LIMIT_MB * 1024 * 1024
    assert soft == hard
    if workers.forked:  # a child of this process: the cap is the limit on top of what it inherited
        assert parent == os.getpid() and limit < soft < limit + 64 * 1024**3
    else:  # a forkserver child, capped at exactly the limit
        assert parent != os.getpid() and soft == limit


def test_workers_leave_what_they_inherited_to_the_garbage_collector_once(workers: PdfWorkers) -> None:
    frozen = workers.submit(gc.get_freeze_count, timeout=30).result()
    assert frozen > 1000  # the modules' objects, out of every collection's walk
    assert workers.submit(gc.get_threshold, timeout=30).result()[0] > gc.get_threshold()[0]


def test_a_task_over_its_time_limit_is_killed_and_the_pool_goes_on(workers: PdfWorkers) -> None:
    bound = scaled(20)  # far less than the task's 60 s
    started = time.monotonic()
    stuck = workers.submit(time.sleep, 60, timeout=1.0)
    with pytest.raises(StageTimeoutError, match="1 s limit"):
        stuck.result()
    assert time.monotonic() - started < bound
    assert workers.submit(sum, [1, 2, 3], timeout=30).result() == 6
    assert workers.submit(os.getpid, timeout=30).result() > 0


def test_allocation_over_the_memory_limit_is_an_error_not_an_oom_kill(workers: PdfWorkers) -> None:
    with pytest.raises(BadDocumentError, match="memory"):
        workers.submit(bytearray, 2 * LIMIT_MB * 1024 * 1024, timeout=30).result()
    assert workers.submit(sum, [1], timeout=30).result() == 1


def test_a_crashed_worker_is_reported_and_replaced(workers: PdfWorkers) -> None:
    with pytest.raises(BadDocumentError, match="crashed its worker"):
        workers.submit(os._exit, 3, timeout=30).result()
    assert workers.submit(sum, [2], timeout=30).result() == 2


@pytest.mark.corpus
def test_task_errors_come_back_readable(workers: PdfWorkers, corpus: Path) -> None:
    path = str(corpus / "ocrmypdf/tests/resources/invalid.pdf")
    with pytest.raises(BadDocumentError, match="cannot open"):
        workers.submit(triage_document, path, PdfOptions(), timeout=30).result()


@pytest.mark.corpus
def test_render_stream_yields_every_page_at_its_size(workers: PdfWorkers, corpus: Path) -> None:
    path = str(corpus / "docling/tests/data/ocr/sources/nemotron_multipage.pdf")  # 4 scanned pages
    doc = pymupdf.open(path)
    spec = RenderSpec(dpi=100, multiple_of=28)
    pulled, yielded, window = [], [], 2

    def requests():
        for page in doc:
            pulled.append(page.number + 1)
            yield PageRequest("nemotron", page.number + 1, path, page.rect.width, page.rect.height)

    for request, error in workers.render_stream(requests(), spec, timeout=60, window=window):
        assert error is None
        assert len(pulled) - len(yielded) <= window  # lazy: never more than the window ahead
        yielded.append(request.page_no)
        expected = target_size(request.width_pt, request.height_pt, spec)
        assert request.image is not None and request.image.size == expected and request.image.mode == "RGB"
        assert request.image.convert("L").getextrema()[0] < 100  # the scan's text is there
    assert sorted(yielded) == list(range(1, doc.page_count + 1))


@pytest.mark.corpus
def test_render_stream_reports_errors_per_page(workers: PdfWorkers, corpus: Path) -> None:
    scan = str(corpus / "derived/eurotext.scan.pdf")
    locked = str(corpus / "pdfplumber/tests/pdfs/password-example.pdf")
    hugemono = str(corpus / "ocrmypdf/tests/resources/hugemono.pdf")
    cyclic = str(corpus / "pdfjs/test/pdfs/Pages-tree-refs.pdf")
    requests = [
        PageRequest("scan", 1, scan, 0, 0),
        PageRequest("scan", 5, scan, 0, 0),
        PageRequest("locked", 1, locked, 0, 0),
        PageRequest("locked-ok", 1, locked, 0, 0),
        PageRequest("huge", 1, hugemono, 0, 0),  # ~1 gigapixel at 300 dpi: only the cap lets it fit
        PageRequest("cyclic", 2, cyclic, 0, 0),  # MuPDF's own (unpicklable) exception type
    ]
    spec = RenderSpec(dpi=300, max_pixels=4_000_000)
    results = dict(
        ((r.doc_id, r.page_no), e)
        for r, e in workers.render_stream(
            requests, spec, timeout=60, window=3, passwords={"locked-ok": "test"}
        )
    )
    assert results[("scan", 1)] is None and results[("locked-ok", 1)] is None and results[("huge", 1)] is None
    assert isinstance(results[("scan", 5)], BadDocumentError) and "does not exist" in str(
        results[("scan", 5)]
    )
    assert isinstance(results[("locked", 1)], BadDocumentError) and "password" in str(results[("locked", 1)])
    assert isinstance(results[("cyclic", 2)], BadDocumentError) and "cycle" in str(results[("cyclic", 2)])
    assert requests[4].image is not None and requests[4].image.width * requests[4].image.height <= 4_000_000


def test_render_stream_times_out_per_page(tmp_path: Path) -> None:
    # A page that takes MuPDF ~2 s to draw, given 0.3 s: killed, reported, and the pool renders on.
    doc = pymupdf.open()
    page = doc.new_page(width=4000, height=4000)
    for i in range(400):
        page.draw_circle((2000, 2000), 5 + i * 4)
    path = tmp_path / "heavy.pdf"
    doc.save(path)
    spec = RenderSpec(dpi=72, max_pixels=16_000_000)
    with PdfWorkers(1, LIMIT_MB) as pool:
        requests = [
            PageRequest("heavy", 1, str(path), 4000, 4000),
            PageRequest("heavy", 1, str(path), 4000, 4000),
        ]
        assert pool.submit(sum, [1], timeout=30).result() == 1  # the worker is up
        bound = scaled(1.8)  # the drawing takes MuPDF ~2 s on a quiet machine, longer on a busy one
        started = time.monotonic()
        out = list(pool.render_stream(requests[:1], spec, timeout=0.3, window=1))
        assert isinstance(out[0][1], StageTimeoutError)
        assert time.monotonic() - started < bound  # killed inside MuPDF's C code, not after it returned
        small = RenderSpec(dpi=72, max_pixels=250_000)
        out = list(pool.render_stream(requests[1:], small, timeout=60, window=1))
        assert out[0][1] is None and out[0][0].image.size == (500, 500)


def test_a_finished_pool_keeps_its_results_and_takes_no_more_tasks() -> None:
    """finish(): the pool winds down after the last task (pipeline.run calls it before the last load)."""
    with PdfWorkers(2, LIMIT_MB, fork=True) as pool:
        futures = [pool.submit(os.getpid, timeout=10) for _ in range(4)]
        pids = {f.result() for f in futures}
        pool.finish()
        assert pids and os.getpid() not in pids
        with pytest.raises(RuntimeError):
            pool.submit(os.getpid, timeout=10)


def test_largest_jobs_start_first_and_futures_keep_the_jobs_order() -> None:
    """One worker runs the jobs one after another: their start times show the submission order."""
    with PdfWorkers(1, LIMIT_MB, fork=True) as pool:
        jobs = [(name,) for name in ("small", "large", "medium", "also small")]
        futures = pool.submit_largest_first(_started, jobs, [1, 30, 5, 1], timeout=10)
        results = [f.result() for f in futures]
    assert [name for name, _ in results] == ["small", "large", "medium", "also small"]
    by_start = [name for name, _ in sorted(results, key=lambda r: r[1])]
    assert by_start == ["large", "medium", "small", "also small"]


def _started(name: str) -> tuple[str, float]:
    return name, time.monotonic()


def test_a_wait_behind_other_tasks_lasts_while_the_pool_progresses(monkeypatch) -> None:
    """in_order counts any task of the pool finishing as progress: a batch's tasks queued behind the
    next batch's (pipeline.overlapped) are not failed for waiting, while a pool that finishes
    nothing for a task's limit still fails it."""
    import chandra_ocr.pdf.workers as workers_module

    monkeypatch.setattr(workers_module, "WAKE_S", 0.05)
    monkeypatch.setattr(workers_module, "_GRACE_S", 0.0)
    with PdfWorkers(1, LIMIT_MB, fork=True) as pool:
        ahead = [pool.submit(time.sleep, 0.3, timeout=10) for _ in range(6)]  # 1.8 s of work ahead
        (mine,) = list(pool.in_order([pool.submit(os.getpid, timeout=1.0)], "test"))
        assert mine.result() != os.getpid() and all(f.done() for f in ahead)
        pool.submit(time.sleep, 2.0, timeout=10)  # finishes nothing for longer than the next task's limit
        (late,) = list(pool.in_order([pool.submit(os.getpid, timeout=0.5)], "test"))
        with pytest.raises(StageTimeoutError, match="no answer"):
            late.result()
