"""The engine interface: a stream of page requests in, a stream of page results out.

Every engine — the PyMuPDF text layer, Tesseract on the CPU, in-process vLLM, a vLLM
server — implements `OcrEngine`. Results may come back in any order; callers match them to
requests by ``(doc_id, page_no)``. Heavy imports (vllm, torch) happen in ``start``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from chandra_ocr.document import PageRequest, PageResult, RenderSpec


@runtime_checkable
class OcrEngine(Protocol):
    """Initialise once, run streams of pages, close."""

    name: str
    model: str | None
    # True when ``run`` drives threads in this process that create file descriptors (subprocess
    # pipes, sockets): PDF workers must then come from a forkserver, never a fork of this process.
    threads: bool
    # False for an engine that reads the PDF's own text layer (text): every page then takes the text
    # route, nothing is rendered or compressed, and a page it finds no text on is not read.
    reads_images: bool
    render_spec: RenderSpec  # how OCR-route pages are rendered for this engine
    # Rendered pages the caller keeps queued or in flight (the budget an out-of-memory error halves);
    # None until ``start`` has sized it (vLLM), or for an engine that reads no images (text).
    in_flight_pages: int | None

    def start(self) -> None:
        """Load models / open connections. Idempotent."""

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Yield one result per request, in completion order, while requests keep streaming in."""

    def close(self) -> None:
        """Release the model, processes and connections."""

    def metrics(self) -> dict:
        """Engine-level numbers for the run record (paging values, KV capacity, ...); may be empty."""
