"""Discover stage: the new PDFs of a source, planned into batches of about ``batch_pages`` pages."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.manifest import Batch, DocRef, plan_batches
from chandra_ocr.progress import Progress
from chandra_ocr.sources.discover import Discovery, discover
from chandra_ocr.sources.local import LocalSource
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.stages.context import RunContext
from chandra_ocr.store import claims
from chandra_ocr.store.duckdb_store import document_versions, known_documents

log = logging.getLogger(__name__)

COUNT_TIMEOUT_S = 30.0  # opening a PDF to count its pages; past it the extract stage finds out why


@dataclass
class Planned:
    """What discovery found and the batches its new documents were planned into."""

    discovery: Discovery
    batches: list[Batch]


class Discover:
    """``Discover(ctx)(source, **filters)`` → ``Planned``: new PDFs (with ``reprocess``, also those
    ingested under an older pipeline version), their pages counted in the workers (time-limited).

    ``source`` is a local folder or glob, or a source object (sources/: a folder, or an object store through
    fsspec, with the credentials its caller chose). Entries unchanged since the KB's source entries
    table saw them are not read again (``options.rehash`` reads them all); a new remote object is
    streamed once into its document's work area, which the stages then read (``DocRef.readable``)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, source: str | Path | LocalSource | ObjectSource, **filters: Any) -> Planned:
        claims.sweep(self.ctx.layout)  # what dead runs left: claims, staged rows
        discovery = self.find(source, **filters)  # discovery logs its counts, once
        return Planned(discovery, self.plan(discovery))

    def find(self, source: str | Path | LocalSource | ObjectSource, **filters: Any) -> Discovery:
        """The PDFs under ``source``, split into new, known, duplicate, recent and refused."""
        ctx = self.ctx
        known = known_documents(ctx.layout)
        if ctx.options.reprocess:
            versions = document_versions(ctx.layout)
            current = {d for d, (version, _model) in versions.items() if version == PIPELINE_VERSION}
            known = {d: uri for d, uri in known.items() if d in current}
        return discover(
            source,
            known,
            settle_seconds=ctx.options.pdf.settle_seconds,
            layout=ctx.layout,
            rehash=ctx.options.rehash,
            **filters,
        )

    def plan(self, discovery: Discovery) -> list[Batch]:
        """Batches of about ``options.batch_pages`` pages (page counts read in the workers)."""
        docs = [DocRef(f.doc_id, f.path, f.bytes, local=f.local, replaces=f.replaces) for f in discovery.new]
        progress = Progress("plan: counting pages", 0, log, total_docs=len(docs))
        with self.ctx.pool() as workers:
            futures = [workers.submit(_count_pages, d.readable, timeout=COUNT_TIMEOUT_S) for d in docs]
            for doc, fut in zip(docs, workers.in_order(futures, "page count"), strict=True):
                try:
                    doc.n_pages = int(fut.result())
                except Exception:  # unreadable here → the extract stage quarantines it with the real reason
                    doc.n_pages = 1
                progress.add(pages=doc.n_pages, docs=1)
        progress.done()
        return plan_batches(docs, self.ctx.options.batch_pages)


def _count_pages(path: str) -> int:
    import pymupdf

    with pymupdf.open(path) as doc:
        return doc.page_count
