"""The ``text`` engine: reads a page's own text layer with PyMuPDF (no model, no image)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping

import pymupdf

from chandra_ocr.document import PageRequest, PageResult, RenderSpec
from chandra_ocr.errors import BadDocumentError
from chandra_ocr.pdf.text_layer import read_page
from chandra_ocr.pdf.triage import open_pdf

log = logging.getLogger(__name__)


class TextEngine:
    """An ``OcrEngine`` over the PDF text layer, for forced text routes and as the first fallback.

    Consecutive requests for the same file reuse one open document. Extraction runs in the
    calling process: pages that may hang MuPDF should have been triaged in a worker first.
    ``passwords`` maps doc_id → password for encrypted documents.
    """

    name = "text"
    threads = False  # reads in the calling thread
    reads_images = False
    render_spec = RenderSpec()  # unused: no page is rendered
    in_flight_pages: int | None = None
    model: str | None = None

    def __init__(self, passwords: Mapping[str, str] | None = None) -> None:
        self._passwords = dict(passwords or {})
        self._doc: pymupdf.Document | None = None
        self._doc_path: str | None = None
        self._pages = 0
        self._failed = 0

    def start(self) -> None:
        """Nothing to load; present for the engine interface."""

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Yield one result per request, in request order."""
        for request in requests:
            yield self.read(request)

    def read(self, request: PageRequest) -> PageResult:
        """The text-layer result for one page; failures come back as ``status="failed"``."""
        started = time.perf_counter()
        self._pages += 1
        try:
            doc = self._open(request)
            if not 1 <= request.page_no <= doc.page_count:
                raise BadDocumentError(f"page {request.page_no} does not exist ({doc.page_count} pages)")
            extracted = read_page(doc.load_page(request.page_no - 1))
        except Exception as e:  # per-page failures are results, not exceptions
            self._failed += 1
            log.debug("text layer of %s p.%d failed: %s", request.pdf_path, request.page_no, e)
            return PageResult.of(
                request, self.name, None, error=f"{type(e).__name__}: {e}", latency_ms=_since(started)
            )
        return PageResult.of(
            request, self.name, None, text=extracted.text, blocks=extracted.blocks, finish_reason="stop",
            latency_ms=_since(started),
        )  # fmt: skip

    def close(self) -> None:
        """Close the cached document."""
        if self._doc is not None:
            self._doc.close()
        self._doc, self._doc_path = None, None

    def metrics(self) -> dict:
        """Pages read and pages failed since construction."""
        return {"pages": self._pages, "failed": self._failed}

    def _open(self, request: PageRequest) -> pymupdf.Document:
        """The document of ``request``, reusing the open one when the path is the same."""
        if self._doc is None or self._doc_path != request.pdf_path:
            self.close()
            self._doc = open_pdf(request.pdf_path, password=self._passwords.get(request.doc_id))
            self._doc_path = request.pdf_path
        return self._doc


def _since(started: float) -> float:
    """Milliseconds since ``started`` (a ``perf_counter`` value)."""
    return (time.perf_counter() - started) * 1000
