"""Extract stage (the OCR stage): triage the documents of a batch, then stream their OCR pages through
one engine.

Each document's text-route pages are checkpointed straight from triage, in the document's record
(a document read from the text layer alone is then complete: the assemble stage writes it like
any other). OCR-route
pages of every document in the batch form one stream (rendering in worker processes overlaps
inference; no per-file barrier). A page the engine cannot read validly goes to the fallback
chain (``stages/fallback.py``): the text layer, then the CPU engine; it is marked ``fallback`` — or
``failed`` when nothing could read it.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from chandra_ocr.config import PdfOptions
from chandra_ocr.document import Page, PageRequest, PageTriage
from chandra_ocr.errors import BadDocumentError, EngineOutOfMemoryError, StageTimeoutError, StoreError
from chandra_ocr.manifest import Batch, DocRef, file_names, incomplete_line
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.pdf.passwords import load_passwords
from chandra_ocr.pdf.triage import DocumentTriage, joined, triage_document, triage_pages
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.progress import Progress
from chandra_ocr.stages.context import RunContext
from chandra_ocr.stages.fallback import RENDER_FAILED, FailedPage, Reading, run_fallbacks
from chandra_ocr.stages.ownership import claim_batch
from chandra_ocr.store import checkpoints
from chandra_ocr.store.checkpoints import ExtractRecord, checkpoint_key
from chandra_ocr.store.layout import KbLayout

log = logging.getLogger(__name__)

MIN_PART_PAGES = 12  # a document is triaged in parts of no fewer pages (each part opens it again)


@dataclass
class _Pending:
    doc: DocRef
    pdf_path: str
    pages: dict[int, PageTriage]


def engine_key(engine: OcrEngine) -> str:
    return checkpoint_key(engine.name, engine.model)


class Extract:
    """``Extract(ctx)(batch)`` → the batch, every page of it read (resuming from checkpoints).

    Encrypted documents open with ``ctx.passwords`` (default: the book in
    ``options.pdf.passwords_file``, if set). When the engine runs out of memory its in-flight
    budget is halved and the pages not yet read are streamed again; raises EngineError
    (EngineOutOfMemoryError at a budget of one page) when the engine fails for good. Pages
    already read stay checkpointed either way. Records the stage's seconds in
    ``batch.seconds["extract"]`` and the engine's metrics (paging values) in ``batch.engine_metrics``.
    """

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, batch: Batch) -> Batch:
        with self.ctx.pool():
            return self.finish(self.start(batch))

    def start(self, batch: Batch) -> Triaging:
        """Claim ``batch`` and submit its triage to the pool the context holds (``ctx.pool()``), returning
        at once; ``finish`` collects it. The pipeline starts the next batch's triage this way before it
        assembles the last one, so that the workers have work while this process joins and waits."""
        started = time.monotonic()
        ctx, engine = self.ctx, self.ctx.ocr
        if ctx.workers is None:
            raise StoreError("Extract.start needs the pool held by ctx.pool(); call the stage instead")
        claim_batch(ctx, batch)  # documents another run claimed or loaded meanwhile are left to it
        reading = Reading(ctx, ctx.workers, engine_key(engine), _batch_passwords(batch, ctx))
        return Triaging(batch, reading, _submit_triage(reading, batch), started)

    def finish(self, triaging: Triaging) -> Batch:
        """The batch of ``start``, every page of it read: triage collected, OCR pages streamed through the
        engine, fallbacks run."""
        batch, reading, engine = triaging.batch, triaging.reading, self.ctx.ocr
        pending = _collect_triage(reading, batch, triaging.submitted)
        n_ocr = _read_ocr_pages(reading, batch.batch_id, pending)
        run_fallbacks(reading)
        batch.engine, batch.model = engine.name, engine.model
        batch.counts = {"ocr_pages": n_ocr, "fallback_pages": len(reading.failed)} | {
            "quarantined": sum(1 for d in batch.docs if d.status == "quarantined")
        }
        batch.engine_metrics = engine.metrics()
        batch.seconds["extract"] = time.monotonic() - triaging.started
        return batch


@dataclass
class _Submitted:
    """A batch's triage tasks in the pool: the records found under the key, the documents submitted
    and each one's count of tasks (parts), the futures in the order of those tasks."""

    done: dict[str, ExtractRecord]
    todo: list[DocRef]
    tasks: dict[str, int]
    futures: list[Future]


@dataclass
class Triaging:
    """A batch whose triage ``Extract.start`` submitted, for ``Extract.finish``."""

    batch: Batch
    reading: Reading
    submitted: _Submitted
    started: float


def _batch_passwords(batch: Batch, ctx: RunContext) -> dict[str, str]:
    """doc_id → password for the batch's documents that have one."""
    book = ctx.passwords
    if book is None and ctx.options.pdf.passwords_file:
        book = load_passwords(ctx.options.pdf.passwords_file)
    return book.for_documents((d.doc_id, d.source) for d in batch.docs) if book else {}


def _read_ocr_pages(reading: Reading, batch_id: str, pending: list[_Pending]) -> int:
    """Stream the OCR-route pages without a checkpoint through the run's engine; returns their count."""
    todo = [
        (p, pt)
        for p in pending
        for pt in p.pages.values()
        if pt.route == "ocr" and reading.checkpointed(p.doc.doc_id, pt.page_no) is None
    ]
    docs = list({p.doc.doc_id: p.doc for p, _ in todo}.values())
    if todo:
        log.info("OCR: %d page(s) of %d document(s): %s", len(todo), len(docs), file_names(docs))
    progress = Progress(f"extract {batch_id}", len(todo), log)
    total = len(todo)
    while todo:
        try:
            _stream(reading, todo, progress)
            break
        except EngineOutOfMemoryError as e:
            engine = reading.ctx.ocr
            budget = engine.in_flight_pages or 0
            if budget <= 1:
                raise
            engine.in_flight_pages = budget // 2
            log.warning(
                "engine out of memory (%s); in-flight budget %d → %d, resuming", e, budget, budget // 2
            )
            gone = {f.key for f in reading.failed}
            todo = [
                (p, pt)
                for p, pt in todo
                if (key := (p.doc.doc_id, pt.page_no)) not in gone and reading.checkpointed(*key) is None
            ]
    progress.done()
    return total


def _stream(reading: Reading, todo: list[tuple[_Pending, PageTriage]], progress: Progress) -> None:
    """One pass of ``todo`` through the engine: rendered in the workers, results checkpointed."""
    ctx, engine, failed = reading.ctx, reading.ctx.ocr, reading.failed
    by_id = {p.doc.doc_id: p for p, _ in todo}
    requests = (
        PageRequest(p.doc.doc_id, pt.page_no, p.pdf_path, pt.width_pt, pt.height_pt) for p, pt in todo
    )

    def rendered() -> Iterator[PageRequest]:
        stream = reading.workers.render_stream(
            requests,
            engine.render_spec,
            timeout=ctx.options.pdf.page_timeout_s,
            window=_window(engine),
            passwords=reading.passwords,
        )
        for req, err in stream:
            if err is None:
                yield req
                continue
            p = by_id[req.doc_id]
            failed.append(
                FailedPage(p.doc.doc_id, p.pdf_path, p.pages[req.page_no], None, f"{RENDER_FAILED}{err}")
            )

    for result in engine.run(rendered()):
        p = by_id[result.doc_id]
        pt = p.pages[result.page_no]
        if result.status == "ok":
            reading.checkpoint(result.doc_id, Page.read(pt, result))
        else:
            why = result.error or f"finish_reason={result.finish_reason}"
            failed.append(FailedPage(p.doc.doc_id, p.pdf_path, pt, result, why))
        progress.add(pages=1)


def _window(engine: OcrEngine) -> int:
    """Rendered pages to keep queued ahead of the engine: enough to keep it busy, bounded for memory."""
    return engine.in_flight_pages or 16


def _submit_triage(reading: Reading, batch: Batch) -> _Submitted:
    """Submit the triage of the batch's documents to the workers (those with a record under this key are
    not read again), a large one in parts (``_parts``)."""
    ctx, key = reading.ctx, reading.key
    layout, options = ctx.layout, ctx.options
    force = None if ctx.ocr.reads_images else "text"
    done: dict[str, ExtractRecord] = {}  # records checkpointed under this key by an earlier attempt
    todo: list[DocRef] = []
    for doc in batch.docs:
        if doc.state == "elsewhere":
            continue
        stored = checkpoints.read_document_record(layout, doc.doc_id)
        if stored is not None and stored.engine_key == key:
            done[doc.doc_id] = stored
        else:
            todo.append(doc)
    parts = _parts([d.n_pages for d in todo], reading.workers.workers)
    tasks: list[tuple[int, Callable[..., Any], tuple]] = []  # (pages, function, arguments)
    for d, ranges in zip(todo, parts, strict=True):
        password = reading.passwords.get(d.doc_id)
        if len(ranges) == 1:
            tasks.append((d.n_pages, triage_and_checkpoint, (layout, d, options.pdf, force, key, password)))
        else:
            source = d.work_pdf or d.readable
            tasks += [(n, triage_part, (source, options.pdf, force, password, r)) for r, n in ranges]
    futures = _submitted(reading.workers, tasks, options.pdf.doc_timeout_s)
    counts = {d.doc_id: len(ranges) for d, ranges in zip(todo, parts, strict=True)}
    return _Submitted(done, todo, counts, futures)


def _collect_triage(reading: Reading, batch: Batch, submitted: _Submitted) -> list[_Pending]:
    """The submitted triage of the batch, each document's record checkpointed (parts joined); returns
    the documents with pages left for the engine."""
    layout, key = reading.ctx.layout, reading.key
    todo, triaging = submitted.todo, submitted.tasks
    progress = Progress(f"triage {batch.batch_id}", sum(d.n_pages for d in todo), log, total_docs=len(todo))
    finished = reading.workers.in_order(submitted.futures, "triage")
    pending = []
    for doc in (d for d in batch.docs if d.state != "elsewhere"):
        if doc.doc_id in triaging:
            futures = [next(finished) for _ in range(triaging[doc.doc_id])]
            record = _record_of(futures, key, layout, doc)
            progress.add(pages=doc.n_pages, docs=1)
            if record.outcome == "quarantined":  # a worker stored the triaged ones itself
                checkpoints.write_document_record(layout, doc.doc_id, record)
        else:
            record = submitted.done[doc.doc_id]
        doc.state = "extracted"
        if record.outcome == "quarantined":
            doc.status, doc.error = "quarantined", record.error
            log.warning("%s", incomplete_line(doc))
        else:
            doc.status = None  # set by the assemble stage
            doc.n_pages = record.n_pages if record.n_pages is not None else doc.n_pages
            pages = {pt.page_no: pt for pt in record.triage}
            pending.append(_Pending(doc, doc.work_pdf or doc.readable, pages))
    progress.done()
    return pending


_Range = tuple[tuple[int, int | None], int]  # ((first page index, end index or None: to the last), pages)


def _parts(sizes: list[int], workers: int) -> list[list[_Range]]:
    """Each document's page ranges to triage, with their page counts: documents larger than a
    share of the batch that keeps every worker busy (a ``4 * workers``-th of its pages, at least
    ``MIN_PART_PAGES``) are split, so that one large document does not leave the others idle;
    a document's last range runs to its last page (the page count is a planning estimate)."""
    part = max(MIN_PART_PAGES, math.ceil(sum(sizes) / (4 * workers))) if workers > 1 else None
    out: list[list[_Range]] = []
    for n in sizes:
        if part is None or n < 2 * part:
            out.append([((0, None), n)])
            continue
        k = n // part
        cuts = [round(i * n / k) for i in range(k + 1)]  # k ranges of even size
        out.append([((a, b if b < n else None), b - a) for a, b in itertools.pairwise(cuts)])
    return out


def _submitted(
    workers: PdfWorkers, tasks: list[tuple[int, Callable[..., Any], tuple]], timeout: float
) -> list[Future]:
    """``tasks`` submitted to ``workers``, the largest first (a large one started last would keep one
    worker busy after the others ran dry); their futures in the order of ``tasks``."""
    futures: list[Future | None] = [None] * len(tasks)
    for i in sorted(range(len(tasks)), key=lambda i: -tasks[i][0]):
        _, fn, args = tasks[i]
        futures[i] = workers.submit(fn, *args, timeout=timeout)
    return futures  # type: ignore[return-value]


def triage_and_checkpoint(
    layout: KbLayout,
    doc: DocRef,
    options: PdfOptions,
    force: str | None,
    key: str,
    password: str | None = None,
) -> ExtractRecord:
    """Worker side: triage one document and checkpoint it; returns its record (without page content).

    The checkpoint is the document record with the finished text-route pages in it (one file
    per document: these pages come all at once, unlike OCR pages, which are checkpointed one by
    one as the engine returns them). Runs in a PDF worker so that text extraction uses every core
    and a hung or crashing parser only costs that worker.
    """
    triage = triage_document(doc.work_pdf or doc.readable, options, password=password, force_route=force)
    return _checkpointed(layout, doc.doc_id, key, triage)


def triage_part(
    pdf_path: str, options: PdfOptions, force: str | None, password: str | None, pages: tuple[int, int | None]
) -> DocumentTriage:
    """Worker side: triage one part of a large document (``triage_pages``); the extract stage joins
    the parts and checkpoints the document."""
    return triage_pages(pdf_path, options, password=password, force_route=force, pages=pages)


def _checkpointed(layout: KbLayout, doc_id: str, key: str, triage: DocumentTriage) -> ExtractRecord:
    """Checkpoint a triaged document: its record with its text-route pages; returns the record
    without them."""
    text_pages = [_text_page(triage, pt) for pt in triage.pages if pt.route == "text"]
    record = ExtractRecord(key, "triaged", n_pages=triage.n_pages, triage=triage.pages)
    checkpoints.write_document_record(layout, doc_id, replace(record, text_pages=text_pages))
    return record


def _text_page(triage: DocumentTriage, pt: PageTriage) -> Page:
    """A text-route page as triage read it."""
    blocks, tables = triage.text_blocks.get(pt.page_no, []), triage.tables.get(pt.page_no, [])
    return Page.from_triage(pt, "text", finish_reason="stop", blocks=blocks, tables=tables)


def _record_of(futures: list[Future], key: str, layout: KbLayout, doc: DocRef) -> ExtractRecord:
    """The document record from its triage futures (one: ``triage_and_checkpoint``'s record; more: the
    parts of ``triage_part``, joined and checkpointed here); failures become a quarantine record with
    the reason, except the knowledge base's own I/O errors (a full disk is no reason to quarantine a
    PDF: the task fails and its retry resumes; reading the source is a BadDocumentError already)."""
    try:
        if len(futures) == 1:
            return futures[0].result()
        return _checkpointed(layout, doc.doc_id, key, joined([f.result() for f in futures]))
    except (BadDocumentError, StageTimeoutError) as e:  # unreadable, timed out, out of memory, crashed
        return ExtractRecord(key, "quarantined", error=str(e))
    except OSError:
        raise
    except Exception as e:  # a parser error we have no better name for
        return ExtractRecord(key, "quarantined", error=f"could not read PDF: {type(e).__name__}: {e}")
