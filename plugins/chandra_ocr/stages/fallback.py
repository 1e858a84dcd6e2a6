"""The extract stage's fallback chain (``IngestOptions.fallbacks``, by default the text layer, then the
CPU engine, each with its ``fallback_options``), else a ``failed`` page record.

Every page the primary engine could not read validly comes here. The text layer is tried
only where triage found text; the CPU engine gets its pages rendered in the PDF workers (time
and memory limits hold there too), and a page whose rendering already failed is not rendered
again. Whatever is left is checkpointed as ``failed`` with the primary failure as its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from chandra_ocr.document import Page, PageRequest, PageResult, PageTriage, RenderSpec
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.stages.context import RunContext
from chandra_ocr.store import checkpoints

log = logging.getLogger(__name__)

RENDER_FAILED = "render: "  # reason prefix of a page that could not be rendered


@dataclass(frozen=True)
class FailedPage:
    """A page the primary engine did not read: where it is, its triage, the engine's result and why."""

    doc_id: str
    pdf_path: str
    triage: PageTriage
    result: PageResult | None  # None when the page never reached the engine (rendering failed)
    reason: str

    @property
    def key(self) -> tuple[str, int]:
        return self.doc_id, self.triage.page_no

    def request(self) -> PageRequest:
        pt = self.triage
        return PageRequest(self.doc_id, pt.page_no, self.pdf_path, pt.width_pt, pt.height_pt)


@dataclass
class Reading:
    """One batch's reading of pages, shared by the extract stage's steps and this chain: the run's
    context, the pool it holds, the checkpoint key, the batch's passwords (doc_id → password) and
    the pages the primary engine could not read."""

    ctx: RunContext
    workers: PdfWorkers
    key: str
    passwords: dict[str, str]
    failed: list[FailedPage] = field(default_factory=list)

    def checkpointed(self, doc_id: str, page_no: int) -> Page | None:
        """The page's checkpoint under this key, if it has one."""
        return checkpoints.read_page(self.ctx.layout, doc_id, page_no, self.key)

    def checkpoint(self, doc_id: str, page: Page) -> None:
        """Checkpoint ``page`` of ``doc_id`` under this key."""
        checkpoints.write_page(self.ctx.layout, doc_id, page, self.key)


def run_fallbacks(reading: Reading) -> None:
    """Checkpoint every page of ``reading.failed``: as ``fallback`` when an engine of the chain reads
    it, else as ``failed``."""
    from chandra_ocr.ocr.registry import build_engine, fallback_kinds

    options = reading.ctx.options
    left = list(reading.failed)
    for kind in fallback_kinds(options.fallbacks, reading.ctx.ocr):
        if not left:
            continue
        try:
            engine = build_engine(kind, options.preset, options.fallback_options.get(kind), reading.passwords)
            engine.start()
        except ConfigError as e:
            log.warning("fallback engine %s unavailable: %s", kind, e)
            continue
        if not engine.reads_images:
            todo = [f for f in left if f.triage.n_chars > 0]
            requests: Iterable[PageRequest] = [f.request() for f in todo]
        else:
            todo = [f for f in left if not f.reason.startswith(RENDER_FAILED)]
            requests = _rendered(reading, [f.request() for f in todo], engine.render_spec)
        try:
            done = _read(reading, engine, requests, {f.key: f for f in todo})
        finally:
            engine.close()
        left = [f for f in left if f.key not in done]
    for f in left:
        _write_failed(reading, f)


def _rendered(reading: Reading, requests: list[PageRequest], spec: RenderSpec) -> Iterator[PageRequest]:
    """The requests whose page rendered in the workers; the others are left out (they stay failed)."""
    timeout = reading.ctx.options.pdf.page_timeout_s
    for request, error in reading.workers.render_stream(
        requests, spec, timeout=timeout, window=4, passwords=reading.passwords
    ):
        if error is None:
            yield request
        else:
            log.debug("fallback rendering of %s p.%d failed: %s", request.doc_id, request.page_no, error)


def _read(
    reading: Reading,
    engine: OcrEngine,
    requests: Iterable[PageRequest],
    todo: dict[tuple[str, int], FailedPage],
) -> set[tuple[str, int]]:
    """Run ``engine`` over ``requests``, checkpoint every valid page as ``fallback``; returns their keys."""
    done = set()
    for result in engine.run(requests):
        failure = todo[(result.doc_id, result.page_no)]
        if result.status != "ok" or (not engine.reads_images and not result.blocks):
            continue
        page = Page.read(failure.triage, result, "fallback", failure.reason, accounting=failure.result)
        reading.checkpoint(result.doc_id, page)
        done.add(failure.key)
    return done


def _write_failed(reading: Reading, failure: FailedPage) -> None:
    primary = reading.ctx.ocr
    page = Page.failed(failure.triage, primary.name, primary.model, failure.reason, failure.result)
    reading.checkpoint(failure.doc_id, page)
