"""The stages wired together without Airflow: discover → plan → compress → extract → assemble → load.

The CLI runs them in one process; the Airflow DAGs call the same functions, one task per
stage, with ``Batch`` manifests in between.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.config import IngestOptions
from chandra_ocr.document import Document
from chandra_ocr.errors import BadDocumentError, StageTimeoutError, StoreError
from chandra_ocr.extract import checkpoint_key, extract_batch
from chandra_ocr.manifest import Batch, DocRef, pages_read, plan_batches, run_metrics
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.registry import build_engine, reads_images
from chandra_ocr.pdf.compress import CompressResult, compress_pdf
from chandra_ocr.pdf.discover import Discovery, discover
from chandra_ocr.pdf.sources import LocalSource, ObjectSource
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.progress import Progress
from chandra_ocr.store import checkpoints
from chandra_ocr.store.duckdb_store import (
    RunRecord,
    document_versions,
    forget_documents,
    known_documents,
    load_documents,
)
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.parquet import arrow_schemas
from chandra_ocr.watchdog import WATCHDOG
from chandra_ocr.write import Written, new_document, write_document

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What one end-to-end run did."""

    run_id: str
    discovery: Discovery
    batches: list[Batch]
    loaded: dict[str, int]
    seconds: float
    pages: int

    @property
    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.batches:
            for d in b.docs:
                out[d.status or "?"] = out.get(d.status or "?", 0) + 1
        return out


# The CLI loads into DuckDB once this many pages are written (and at the end): a load has a fixed
# cost (~0.1 s: open, schema, commit, checkpoint) and holds the file's lock. A crash before a load
# costs little: a rerun finds the extract checkpoints (OCR, the costly part) and redoes only the
# compression and assembly of those documents.
LOAD_PAGES = 1000


def discover_new(
    source: str | Path | LocalSource | ObjectSource, layout: KbLayout, options: IngestOptions, **filters
) -> Discovery:
    """New PDFs under ``source``; with ``reprocess``, also those ingested under an older pipeline version.

    Entries unchanged since the KB's source entries table saw them are not read (``rehash`` reads all)."""
    known = known_documents(layout)
    if options.reprocess:
        current = {
            d for d, (version, _model) in document_versions(layout).items() if version == PIPELINE_VERSION
        }
        known = {d: uri for d, uri in known.items() if d in current}
    return discover(
        source,
        known,
        settle_seconds=options.pdf.settle_seconds,
        layout=layout,
        rehash=options.rehash,
        **filters,
    )


def after_load(layout: KbLayout, docs: list[DocRef]) -> None:
    """Once documents are loaded: forget the older documents they replaced at the same location (their
    chunks get tombstones), and delete the work-area copies of remote sources."""
    replaced = sorted({d.replaces for d in docs if d.replaces} - {d.doc_id for d in docs})
    if replaced:
        log.info(
            "%d document(s) replaced at their source location: forgetting the old version", len(replaced)
        )
        forget_documents(layout, replaced)
    for doc in docs:
        if doc.local:
            Path(doc.local).unlink(missing_ok=True)


def _count_pages(path: str) -> int:
    import pymupdf

    with pymupdf.open(path) as doc:
        return doc.page_count


def plan(discovery: Discovery, options: IngestOptions, workers: PdfWorkers) -> list[Batch]:
    """Batches of about ``options.batch_pages`` pages (page counts read in workers, time-limited)."""
    docs = [DocRef(f.doc_id, f.path, f.bytes, local=f.local, replaces=f.replaces) for f in discovery.new]
    futures = [workers.submit(_count_pages, d.readable, timeout=30.0) for d in docs]
    progress = Progress("plan: counting pages", 0, log, total_docs=len(docs))
    for doc, fut in zip(docs, workers.in_order(futures, "page count"), strict=True):
        try:
            doc.n_pages = int(fut.result())
        except Exception:  # unreadable here → the extract stage quarantines it with the real reason
            doc.n_pages = 1
        progress.add(pages=doc.n_pages, docs=1)
    progress.done()
    return plan_batches(docs, options.batch_pages)


def compress_batch(
    batch: Batch, layout: KbLayout, options: IngestOptions, workers: PdfWorkers | None = None
) -> Batch:
    """Pre-compress each document into its work folder (the original is never touched).

    With ``workers``, each document is compressed in a worker process under a time limit. The
    text engine renders no page, so a smaller copy would gain it nothing: it skips this stage.
    Records the stage's seconds in ``batch.seconds["compress"]``.
    """
    progress = Progress(f"compress {batch.batch_id}", _pages(batch), log, total_docs=len(batch.docs))
    pdf = options.pdf
    args = [(Path(d.readable), layout.compressed_pdf(d.doc_id)) for d in batch.docs]
    job = partial(
        compress_pdf,
        min_dpi=pdf.ocr_dpi,
        timeout_s=pdf.compress_timeout_s,
        min_image_pixels=pdf.compress_min_image_pixels,
    )
    results: Iterator[CompressResult | None]
    if not pdf.compress or not reads_images(options.engine):
        results = iter([None] * len(args))
    elif workers is None:
        results = (job(src, dst) for src, dst in args)
    else:
        sizes = [d.n_pages for d in batch.docs]
        futures = workers.submit_largest_first(job, args, sizes, timeout=pdf.compress_timeout_s + 30)
        results = (_result_or_none(f) for f in workers.in_order(futures, "compress"))
    for doc, result in zip(batch.docs, results, strict=True):
        kept = result if result is not None and result.kept else None
        doc.work_pdf = kept.output if kept else doc.readable
        doc.compressed_bytes = kept.bytes_after if kept else None
        doc.compress_method = kept.method if kept else "none"
        progress.add(pages=doc.n_pages, docs=1)
    batch.seconds["compress"] = progress.done()
    return batch


def _pages(batch: Batch) -> int:
    return sum(d.n_pages for d in batch.docs)


def _result_or_none(future):
    """A compression that failed or timed out just means: use the original."""
    try:
        return future.result()
    except Exception as e:  # the original stays usable whatever went wrong with the copy
        log.warning("compression skipped: %s", e)
        return None


def assemble_batch(
    batch: Batch, layout: KbLayout, options: IngestOptions, run_id: str, workers: PdfWorkers | None = None
) -> Batch:
    """Build each document from its checkpoints, chunk it, write its Parquet shards and exports.

    Documents the extract stage finished (``status`` ingested or partial) are passed by. With
    ``workers``, documents are assembled in parallel in the worker processes. Records the
    stage's seconds in ``batch.seconds["assemble"]``.
    """
    if batch.engine is None:
        raise StoreError(f"batch {batch.batch_id} has not been through the extract stage")
    todo = [ref for ref in batch.docs if ref.status in (None, "quarantined")]
    progress = Progress(f"assemble {batch.batch_id}", _pages(batch), log, total_docs=len(batch.docs))
    progress.add(pages=_pages(batch) - sum(d.n_pages for d in todo), docs=len(batch.docs) - len(todo))
    args = [(ref, layout, options, batch.engine, batch.model, run_id, datetime.now(UTC)) for ref in todo]
    if workers is None:
        results = (assemble_and_write(*a) for a in args)
    else:
        timeout = options.pdf.doc_timeout_s
        sizes = [d.n_pages for d in todo]
        futures = workers.submit_largest_first(assemble_and_write, args, sizes, timeout=timeout)
        done = workers.in_order(futures, "assemble")
        results = (_result_or_quarantine(f, a) for f, a in zip(done, args, strict=True))
    for ref, result in zip(todo, results, strict=True):
        ref.status, ref.prompt_tokens, ref.output_tokens = result
        progress.add(pages=ref.n_pages, docs=1)
    batch.seconds["assemble"] = progress.done()
    return batch


def _result_or_quarantine(future, args: tuple) -> Written:
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
    """Assemble one document, write its shards and exports; returns its status and tokens spent."""
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
    return doc


def load_batches(
    batches: list[Batch], layout: KbLayout, run: Callable[[], RunRecord] | None = None
) -> dict[str, int]:
    """Load the shards of ``batches`` into DuckDB in one transaction; each batch's
    ``seconds["load"]`` gets its share of the time, by pages. ``run`` makes the run's record,
    stored in the same transaction once the rows are in (the batches' load seconds set by then)."""
    pages = sum(_pages(b) for b in batches)
    docs = [d.doc_id for b in batches for d in b.docs]
    progress = Progress(f"load {len(batches)} batch(es)", pages, log, total_docs=len(docs))

    def share(seconds: float) -> None:
        for b in batches:
            b.seconds["load"] = seconds * _pages(b) / max(pages, 1)

    def record() -> RunRecord:
        share(progress.elapsed())
        return run()  # type: ignore[misc]

    counts = load_documents(layout, docs, record if run is not None else None)
    after_load(layout, [d for b in batches for d in b.docs])
    progress.add(pages=pages, docs=len(docs))
    share(progress.done())
    return counts


def worker_pool(options: IngestOptions, engine: OcrEngine | None = None) -> PdfWorkers:
    """The PDF worker pool of a run or task. Forked from this process (milliseconds to start) only
    for an engine whose ``threads`` is False; from the forkserver otherwise (pdf/workers.py says why)."""
    fork = engine is not None and not engine.threads
    return PdfWorkers(options.pdf.workers, options.pdf.memory_limit_mb, fork=fork)


def watching(options: IngestOptions) -> AbstractContextManager:
    """The stall watchdog armed with the run's limit (a warning after a sixth of it)."""
    return WATCHDOG.armed(options.stall_timeout_s / 6, options.stall_timeout_s)


def load_groups(batches: list[Batch]) -> list[list[Batch]]:
    """Consecutive batches loaded together: each group ends once it holds ``LOAD_PAGES`` pages."""
    groups: list[list[Batch]] = [[]]
    for batch in batches:
        if sum(_pages(b) for b in groups[-1]) >= LOAD_PAGES:
            groups.append([])
        groups[-1].append(batch)
    return groups if batches else []


def run(
    source: str | Path | LocalSource | ObjectSource,
    kb_dir: str | Path,
    options: IngestOptions,
    engine: OcrEngine | None = None,
    **filters,
) -> RunSummary:
    """Ingest new PDFs from ``source`` into the knowledge base at ``kb_dir``, end to end, in this process."""
    started, t0 = datetime.now(UTC), time.monotonic()
    run_id = f"cli-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    layout = KbLayout(Path(kb_dir))
    discovery = discover_new(source, layout, options, **filters)
    log.info(
        "discovered %d new, %d known, %d duplicates, %d recent, %d refused",
        len(discovery.new),
        len(discovery.known),
        len(discovery.duplicates),
        len(discovery.recent),
        len(discovery.refused),
    )
    owns_engine = engine is None
    engine = engine or build_engine(options.engine, options.preset, options.engine_options)
    batches: list[Batch] = []
    loaded: Counter[str] = Counter()
    if not engine.threads and discovery.new:
        arrow_schemas()  # inherited by forked workers, which write the shards without opening DuckDB

    def pool() -> PdfWorkers:
        return worker_pool(options, engine)

    def run_record() -> RunRecord:  # made inside the last load, which it times too
        seconds, pages = time.monotonic() - t0, pages_read(batches)
        metrics = run_metrics(batches)
        metrics |= {
            "seconds": seconds,
            "pages_per_s": pages / seconds,
            "output_tokens_per_s": metrics["output_tokens"] / seconds,
            "engine": engine.name,
            "model": engine.model,
            **engine.metrics(),
        }
        n_docs = sum(len(b.docs) for b in batches)
        return RunRecord(run_id, started, datetime.now(UTC), n_docs, pages, metrics)

    with watching(options):
        with pool() as workers:
            batches = plan(discovery, options, workers)
        if batches:
            engine.start()
        try:
            groups = load_groups(batches)
            for group in groups:
                # One pool per load: DuckDB's threads never run while a worker may be forked from here.
                with pool() as workers:
                    for batch in group:
                        compress_batch(batch, layout, options, workers)
                        extract_batch(batch, layout, options, engine, workers, run_id=run_id)
                        assemble_batch(batch, layout, options, run_id, workers)
                    workers.finish()  # stopped: no new worker is forked; it winds down during the load
                    last = group is groups[-1]
                    loaded.update(load_batches(group, layout, run_record if last else None))
        finally:
            if owns_engine:
                engine.close()
    seconds = time.monotonic() - t0
    return RunSummary(run_id, discovery, batches, dict(loaded), seconds, pages_read(batches))
