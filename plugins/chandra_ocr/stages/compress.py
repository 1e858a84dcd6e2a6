"""Compress stage: a smaller copy of each document in its work folder (the original is never touched)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from functools import partial
from pathlib import Path

from chandra_ocr.manifest import Batch, DocRef
from chandra_ocr.ocr.kinds import reads_images
from chandra_ocr.pdf.compress import CompressResult, compress_pdf
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.progress import Progress
from chandra_ocr.stages.context import RunContext
from chandra_ocr.stages.ownership import claim_batch

log = logging.getLogger(__name__)


class Compress:
    """``Compress(ctx)(batch)`` → the batch, each document's ``work_pdf`` set: its compressed copy when one
    was kept, else the original (a remote object's local copy). Each document is compressed in a worker
    under a time limit, and only when a page that triage sends to OCR holds a large raster image (the
    other pages are never rendered: a born-digital document is passed by); an engine that renders no
    page (``text``) gains nothing from a smaller copy, so all documents are passed by, as are those
    another run claimed or loaded first (stages/ownership.py).
    Records the stage's seconds in ``batch.seconds["compress"]``."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, batch: Batch) -> Batch:
        ctx, pdf = self.ctx, self.ctx.options.pdf
        claim_batch(ctx, batch)
        docs = [d for d in batch.docs if d.state != "elsewhere"]
        progress = Progress(f"compress {batch.batch_id}", batch.pages, log, total_docs=len(batch.docs))
        if docs and pdf.compress and reads_images(ctx.options.engine):
            with ctx.pool() as workers:
                self._record(docs, self._compressed(docs, workers), progress)
        else:
            self._record(docs, iter([None] * len(docs)), progress)
        batch.seconds["compress"] = progress.done()
        return batch

    def _compressed(self, docs: list[DocRef], workers: PdfWorkers) -> Iterator[CompressResult | None]:
        pdf = self.ctx.options.pdf
        job = partial(
            compress_pdf,
            min_dpi=pdf.ocr_dpi,
            timeout_s=pdf.compress_timeout_s,
            min_image_pixels=pdf.compress_min_image_pixels,
            routes=pdf,
        )
        args = [(Path(d.readable), self.ctx.layout.compressed_pdf(d.doc_id)) for d in docs]
        sizes = [d.n_pages for d in docs]
        futures = workers.submit_largest_first(job, args, sizes, timeout=pdf.compress_timeout_s + 30)
        return (_result_or_none(f) for f in workers.in_order(futures, "compress"))

    @staticmethod
    def _record(docs: list[DocRef], results: Iterator[CompressResult | None], progress: Progress) -> None:
        for doc, result in zip(docs, results, strict=True):
            kept = result if result is not None and result.kept else None
            doc.work_pdf = kept.output if kept else doc.readable
            doc.compressed_bytes = kept.bytes_after if kept else None
            doc.compress_method = kept.method if kept else "none"
            progress.add(pages=doc.n_pages, docs=1)


def _result_or_none(future: Future) -> CompressResult | None:
    """A compression that failed or timed out just means: use the original."""
    try:
        return future.result()
    except Exception as e:  # the original stays usable whatever went wrong with the copy
        log.warning("compression skipped: %s", e)
        return None
