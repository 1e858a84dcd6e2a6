"""Memory bounds of the extract stage's main process: rendered pages queued ahead of the engine."""

from __future__ import annotations

from chandra_ocr.extract import _window, render_spec_of
from chandra_ocr.ocr.cpu_engine import CpuEngine, CpuOptions


def test_the_cpu_engine_queues_few_rendered_pages():
    """Tesseract reads ~1 page/s per worker and rendering is faster, so 2 pages per worker keep it busy;
    the queue (not the engine) decides how many page images this process holds at once."""
    for workers in (1, 2, 4):
        engine = CpuEngine(CpuOptions(workers=workers))
        assert _window(engine) == 2 * workers
        queued_bytes = _window(engine) * render_spec_of(engine).max_pixels * 3
        assert queued_bytes <= workers * 75_000_000  # ≤ 75 MB of RGB pixels per Tesseract worker
