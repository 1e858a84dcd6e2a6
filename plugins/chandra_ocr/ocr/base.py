"""The engine interface: a stream of page requests in, a stream of page results out.

Every engine — the PyMuPDF text layer, Tesseract on the CPU, in-process vLLM, a vLLM
server — implements `OcrEngine`. Results may come back in any order; callers match them to
requests by ``(doc_id, page_no)``. Heavy imports (vllm, torch) happen in ``start``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from chandra_ocr.document import Block, Table
from chandra_ocr.pdf.render_spec import RenderSpec

if TYPE_CHECKING:
    from PIL import Image


@dataclass
class PageRequest:
    """One page to read. ``image`` is the rendered page (OCR engines); the text engine reads the PDF."""

    doc_id: str
    page_no: int  # 1-based
    pdf_path: str
    width_pt: float  # displayed page size (rotation applied)
    height_pt: float
    image: Image.Image | None = None


@dataclass
class PageResult:
    """What an engine made of one page, with its accounting.

    ``status`` is ``ok`` only for a valid result (finished with ``stop`` and parsed);
    ``failed`` results carry ``error`` and are handed to the fallback chain by the caller.
    """

    doc_id: str
    page_no: int
    engine: str
    model: str | None
    status: Literal["ok", "failed"]
    text: str = ""
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None


@runtime_checkable
class OcrEngine(Protocol):
    """Initialise once, run streams of pages, close."""

    name: str
    model: str | None
    # True when ``run`` drives threads in this process that create file descriptors (subprocess
    # pipes, sockets): PDF workers must then come from a forkserver, never a fork of this process.
    threads: bool
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
