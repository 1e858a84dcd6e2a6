"""Assemble stage: each extracted document rebuilt from its checkpoints, chunked and written
(staged rows, Markdown/JSON exports) in a PDF worker under the per-document time limit."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime

from chandra_ocr.config import IngestOptions
from chandra_ocr.document import Document, Page
from chandra_ocr.errors import BadDocumentError, StageTimeoutError, StoreError
from chandra_ocr.manifest import Batch, DocRef
from chandra_ocr.progress import Progress
from chandra_ocr.stages.context import RunContext
from chandra_ocr.stages.write import Written, new_document, write_document
from chandra_ocr.store import checkpoints
from chandra_ocr.store.checkpoints import checkpoint_key
from chandra_ocr.store.layout import KbLayout

log = logging.getLogger(__name__)


class Assemble:
    """``Assemble(ctx)(batch)`` → the batch, every extracted document written (its state ``written``,
    its status set), those read from the text layer alone included; documents written already are
    passed by. One whose assembly times out or crashes its worker is quarantined with the reason and
    the batch goes on.
    Records the stage's seconds in ``batch.seconds["assemble"]``."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, batch: Batch) -> Batch:
        if not any(ref.state == "extracted" for ref in batch.docs):  # all written or elsewhere: no pool
            return self.finish(self.start(batch))
        with self.ctx.pool():
            return self.finish(self.start(batch))

    def start(self, batch: Batch) -> Assembling:
        """Submit the assembly of the batch's extracted documents to the pool the context holds
        (``ctx.pool()``), returning at once; ``finish`` collects it."""
        if batch.engine is None:
            raise StoreError(f"batch {batch.batch_id} has not been through the extract stage")
        ctx = self.ctx
        todo = [ref for ref in batch.docs if ref.state == "extracted"]
        progress = Progress(f"assemble {batch.batch_id}", batch.pages, log, total_docs=len(batch.docs))
        progress.add(pages=batch.pages - sum(d.n_pages for d in todo), docs=len(batch.docs) - len(todo))
        now = datetime.now(UTC)
        args = [(ref, ctx.layout, ctx.options, batch.engine, batch.model, ctx.run_id, now) for ref in todo]
        sizes = [d.n_pages for d in todo]
        futures: list[Future] = []
        if todo:
            if ctx.workers is None:
                raise StoreError("Assemble.start needs the pool held by ctx.pool(); call the stage instead")
            timeout = ctx.options.pdf.doc_timeout_s
            futures = ctx.workers.submit_largest_first(assemble_and_write, args, sizes, timeout=timeout)
        return Assembling(batch, todo, args, futures, progress)

    def finish(self, assembling: Assembling) -> Batch:
        """The batch of ``start``, its documents written."""
        batch, todo, args = assembling.batch, assembling.todo, assembling.args
        if todo:
            assert self.ctx.workers is not None, "Assemble.finish outside the pool of its start"
            done = self.ctx.workers.in_order(assembling.futures, "assemble")
            for ref, future, a in zip(todo, done, args, strict=True):
                ref.status, ref.prompt_tokens, ref.output_tokens, ref.error = _result_or_quarantine(future, a)
                ref.state = "written"
                assembling.progress.add(pages=ref.n_pages, docs=1)
        batch.seconds["assemble"] = assembling.progress.done()
        return batch


@dataclass
class Assembling:
    """A batch whose assembly ``Assemble.start`` submitted, for ``Assemble.finish``."""

    batch: Batch
    todo: list[DocRef]
    args: list[tuple]
    futures: list[Future]
    progress: Progress


def _result_or_quarantine(future: Future, args: tuple) -> Written:
    """A document whose assembly timed out or crashed its worker is quarantined; the batch goes on."""
    try:
        return future.result()
    except (StageTimeoutError, BadDocumentError) as e:
        ref, layout, options, engine, model, run_id, now = args
        log.warning("assembly of %s failed: %s", ref.doc_id, e)
        doc = new_document(ref, engine, model)
        doc.status, doc.error = "quarantined", f"assembly failed: {e}"
        return write_document(doc, layout, options, run_id, now)


def assemble_and_write(
    ref: DocRef,
    layout: KbLayout,
    options: IngestOptions,
    engine: str,
    model: str | None,
    run_id: str,
    now: datetime,
) -> Written:
    """Worker side: assemble one document, stage its rows, write its exports → its status and tokens."""
    return write_document(
        assemble_document(ref, layout, options, engine, model), layout, options, run_id, now
    )


def assemble_document(
    ref: DocRef, layout: KbLayout, options: IngestOptions, engine: str, model: str | None
) -> Document:
    """A document rebuilt from its extract checkpoints; raises StoreError if extraction is incomplete."""
    key = checkpoint_key(engine, model)
    record = checkpoints.read_document_record(layout, ref.doc_id)
    if record is None:
        raise StoreError(f"document {ref.doc_id} was never extracted")
    doc = new_document(ref, engine, model)
    if record.outcome == "quarantined" or record.n_pages is None:
        doc.status, doc.error = "quarantined", record.error
        return doc
    doc.n_pages = record.n_pages
    text = {p.page_no: p for p in record.text_pages}
    for n in range(1, doc.n_pages + 1):
        page = text.get(n) or checkpoints.read_page(layout, ref.doc_id, n, key)
        if page is None:
            raise StoreError(f"page {n} of {ref.doc_id} has no checkpoint; rerun the extract stage")
        doc.pages.append(page)
    failed = [p for p in doc.pages if p.status == "failed"]
    if failed and len(failed) / max(doc.n_pages, 1) > options.failed_page_budget:
        doc.status = "partial"
        first = failed[0]
        doc.error = (
            f"{len(failed)} of {doc.n_pages} pages could not be read (page {first.page_no}: {first.error})"
        )
    elif not any(_has_text(p) for p in doc.pages):  # blank pages, or images with no text: no chunk
        doc.status = "partial"
        doc.error = f"no text found on any page ({doc.n_pages} page{'s' if doc.n_pages > 1 else ''})"
    return doc


def _has_text(page: Page) -> bool:
    cells = (c for t in page.tables for c in t.cells)
    return any(b.text.strip() for b in page.blocks) or any(c.text.strip() for c in cells)
