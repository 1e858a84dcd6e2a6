"""Memory bounds of the extract stage's main process: rendered pages queued ahead of the engine, and
freed as soon as they are read."""

from __future__ import annotations

import gc
from concurrent.futures import Future

import pymupdf

from chandra_ocr.document import PageRequest, RenderSpec
from chandra_ocr.ocr.cpu_engine import CpuEngine, CpuOptions
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.stages.extract import _window


def test_the_cpu_engine_queues_few_rendered_pages():
    """Tesseract reads ~1 page/s per worker and rendering is faster, so 2 pages per worker keep it busy;
    the queue (not the engine) decides how many page images this process holds at once."""
    for workers in (1, 2, 4):
        engine = CpuEngine(CpuOptions(workers=workers))
        assert _window(engine) == 2 * workers
        queued_bytes = _window(engine) * engine.render_spec.max_pixels * 3
        assert queued_bytes <= workers * 75_000_000  # ≤ 75 MB of RGB pixels per Tesseract worker


def test_finished_renders_are_freed_at_once_not_by_the_cycle_collector(tmp_path):
    """Each rendered page travels back as raw RGB bytes (tens of MB at OCR resolution). A reference
    cycle between a render's pool future and its relay would keep every one of them alive until the
    cyclic GC happens to run, which counts objects, not bytes: GBs in a long batch."""
    path = tmp_path / "pages.pdf"
    doc = pymupdf.open()
    for n in range(12):
        doc.new_page().insert_text((72, 72), f"page {n + 1}")
    doc.save(path)
    spec = RenderSpec(dpi=150, max_pixels=2_000_000)
    requests = (PageRequest("d", n, str(path), 612.0, 792.0) for n in range(1, 13))
    with PdfWorkers(2, 3072) as workers:
        gc.collect()
        gc.disable()
        try:
            rendered = 0
            for request, error in workers.render_stream(requests, spec, timeout=60, window=3):
                assert error is None
                request.image = None
                rendered += 1
            alive = [o for o in gc.get_objects() if isinstance(o, Future) and o.done() and not o.exception()]
        finally:
            gc.enable()
    assert rendered == 12
    assert len(alive) <= 2, f"{len(alive)} finished render futures still hold their pixels"  # the last pair
