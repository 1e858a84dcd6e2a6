"""The extract stage of one batch: triage every document, then stream all OCR pages through one engine.

A document whose every page takes the text route is finished where it was triaged, when the
caller passes its run id: chunked and written (shards, exports) in the same worker task, with
no checkpoint (redoing it costs a text pass; the assemble stage passes it by). Otherwise its
text-route pages are checkpointed straight from triage, in the document's record. OCR-route
pages of every document in the batch form one stream (rendering in worker processes overlaps
inference; no per-file barrier). A page the engine cannot read validly goes to the fallback
chain (``fallback.py``): the text layer, then the CPU engine; it is marked ``fallback`` — or
``failed`` when nothing could read it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.document import ExtractRecord, Page, PageRequest, PageTriage
from chandra_ocr.errors import BadDocumentError, EngineOutOfMemoryError, StageTimeoutError
from chandra_ocr.fallback import RENDER_FAILED, FailedPage, ocr_page, run_fallbacks
from chandra_ocr.manifest import Batch, DocRef
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.passwords import PasswordBook, load_passwords
from chandra_ocr.pdf.triage import DocumentTriage, triage_document
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.progress import Progress
from chandra_ocr.store import checkpoints
from chandra_ocr.store.layout import KbLayout

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finish:
    """What a worker needs to finish a text-only document itself (see the module doc)."""

    options: IngestOptions
    engine: str
    model: str | None
    run_id: str


@dataclass
class _Pending:
    doc: DocRef
    pdf_path: str
    pages: dict[int, PageTriage]


def checkpoint_key(engine: str, model: str | None) -> str:
    """What a page checkpoint is valid for: pipeline version, engine and model."""
    return f"{PIPELINE_VERSION}|{engine}|{model or '-'}"


def engine_key(engine: OcrEngine) -> str:
    return checkpoint_key(engine.name, engine.model)


def extract_batch(
    batch: Batch,
    layout: KbLayout,
    options: IngestOptions,
    engine: OcrEngine,
    workers: PdfWorkers,
    passwords: PasswordBook | None = None,
    run_id: str | None = None,
) -> Batch:
    """Triage and read every page of ``batch`` (resuming from checkpoints); returns the updated manifest.

    With ``run_id``, documents read from the text layer alone are also written here (their
    ``status`` is set; see the module doc). ``passwords`` opens encrypted documents (default: the
    book in ``options.pdf.passwords_file``, if set). When the engine runs out of memory its
    in-flight budget is halved and the pages not yet read are streamed again; raises EngineError
    (EngineOutOfMemoryError at a budget of one page) when the engine fails for good. Pages already
    read stay checkpointed either way. Records the stage's seconds in ``batch.seconds["extract"]``
    and the engine's metrics (paging values) in ``batch.engine_metrics``.
    """
    started = time.monotonic()
    key = engine_key(engine)
    secrets = _batch_passwords(batch, options.pdf, passwords)
    finish = Finish(options, engine.name, engine.model, run_id) if run_id is not None else None
    pending = _triage_all(batch, layout, options, engine, workers, key, secrets, finish)
    failed: list[FailedPage] = []
    n_ocr = _read_ocr_pages(batch.batch_id, pending, layout, options, engine, workers, key, secrets, failed)
    run_fallbacks(failed, layout, options, engine, key, workers, secrets)
    batch.engine, batch.model = engine.name, engine.model
    batch.counts = {"ocr_pages": n_ocr, "fallback_pages": len(failed)} | {
        "quarantined": sum(1 for d in batch.docs if d.status == "quarantined")
    }
    batch.engine_metrics = engine.metrics()
    batch.seconds["extract"] = time.monotonic() - started
    return batch


def _batch_passwords(batch: Batch, pdf: PdfOptions, book: PasswordBook | None) -> dict[str, str]:
    """doc_id → password for the batch's documents that have one."""
    if book is None and pdf.passwords_file:
        book = load_passwords(pdf.passwords_file)
    return book.for_documents((d.doc_id, d.source) for d in batch.docs) if book else {}


def _read_ocr_pages(
    batch_id: str,
    pending: list[_Pending],
    layout: KbLayout,
    options: IngestOptions,
    engine: OcrEngine,
    workers: PdfWorkers,
    key: str,
    passwords: dict[str, str],
    failed: list[FailedPage],
) -> int:
    """Stream the OCR-route pages without a checkpoint through ``engine``; returns how many there were."""
    todo = [
        (p, pt)
        for p in pending
        for pt in p.pages.values()
        if pt.route == "ocr" and checkpoints.read_page(layout, p.doc.doc_id, pt.page_no, key) is None
    ]
    progress = Progress(f"extract {batch_id}", len(todo), log)
    total = len(todo)
    while todo:
        try:
            _stream(todo, layout, options, engine, workers, key, passwords, failed, progress)
            break
        except EngineOutOfMemoryError as e:
            budget = engine.in_flight_pages or 0
            if budget <= 1:
                raise
            engine.in_flight_pages = budget // 2
            log.warning(
                "engine out of memory (%s); in-flight budget %d → %d, resuming", e, budget, budget // 2
            )
            gone = {f.key for f in failed}
            todo = [
                (p, pt)
                for p, pt in todo
                if (p.doc.doc_id, pt.page_no) not in gone
                and checkpoints.read_page(layout, p.doc.doc_id, pt.page_no, key) is None
            ]
    progress.done()
    return total


def _stream(
    todo: list[tuple[_Pending, PageTriage]],
    layout: KbLayout,
    options: IngestOptions,
    engine: OcrEngine,
    workers: PdfWorkers,
    key: str,
    passwords: dict[str, str],
    failed: list[FailedPage],
    progress: Progress,
) -> None:
    """One pass of ``todo`` through the engine: rendered in the workers, results checkpointed."""
    by_id = {p.doc.doc_id: p for p, _ in todo}
    requests = (
        PageRequest(p.doc.doc_id, pt.page_no, p.pdf_path, pt.width_pt, pt.height_pt) for p, pt in todo
    )

    def rendered() -> Iterator[PageRequest]:
        stream = workers.render_stream(
            requests,
            engine.render_spec,
            timeout=options.pdf.page_timeout_s,
            window=_window(engine),
            passwords=passwords,
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
            checkpoints.write_page(layout, result.doc_id, ocr_page(pt, result), key)
        else:
            why = result.error or f"finish_reason={result.finish_reason}"
            failed.append(FailedPage(p.doc.doc_id, p.pdf_path, pt, result, why))
        progress.add(pages=1)


def _window(engine: OcrEngine) -> int:
    """Rendered pages to keep queued ahead of the engine: enough to keep it busy, bounded for memory."""
    return engine.in_flight_pages or 16


def _triage_all(
    batch: Batch,
    layout: KbLayout,
    options: IngestOptions,
    engine: OcrEngine,
    workers: PdfWorkers,
    key: str,
    passwords: dict[str, str],
    finish: Finish | None,
) -> list[_Pending]:
    force = None if engine.reads_images else "text"
    done: dict[str, ExtractRecord] = {}  # records checkpointed under this key by an earlier attempt
    todo: list[DocRef] = []
    for doc in batch.docs:
        stored = checkpoints.read_document_record(layout, doc.doc_id)
        if stored is not None and stored.engine_key == key:
            done[doc.doc_id] = stored
        else:
            todo.append(doc)
    jobs = [(layout, d, options.pdf, force, key, passwords.get(d.doc_id), finish) for d in todo]
    sizes = [d.n_pages for d in todo]
    submitted = workers.submit_largest_first(
        triage_and_checkpoint, jobs, sizes, timeout=options.pdf.doc_timeout_s
    )
    triaging = {d.doc_id for d in todo}
    progress = Progress(f"triage {batch.batch_id}", sum(d.n_pages for d in todo), log, total_docs=len(todo))
    finished = workers.in_order(submitted, "triage")
    pending = []
    for doc in batch.docs:
        if doc.doc_id in triaging:
            record = _record_of(next(finished), key)
            progress.add(pages=doc.n_pages, docs=1)
            if record.outcome == "quarantined":  # a worker stored the triaged ones itself
                checkpoints.write_document_record(layout, doc.doc_id, record)
        else:
            record = done[doc.doc_id]
        doc.status = "quarantined" if record.outcome == "quarantined" else record.written_status
        doc.n_pages = record.n_pages if record.n_pages is not None else doc.n_pages
        if record.outcome == "triaged":
            pages = {pt.page_no: pt for pt in record.triage}
            pending.append(_Pending(doc, doc.work_pdf or doc.readable, pages))
    progress.done()
    return pending


def triage_and_checkpoint(
    layout: KbLayout,
    doc: DocRef,
    options: PdfOptions,
    force: str | None,
    key: str,
    password: str | None = None,
    finish: Finish | None = None,
) -> ExtractRecord:
    """Worker side: triage one document and checkpoint it; returns its record (without page content).

    The checkpoint is the document record with the finished text-route pages in it (one file
    per document: these pages come all at once, unlike OCR pages, which are checkpointed one by
    one as the engine returns them). With ``finish``, a document whose pages all take the text
    route is written instead, and the record says so (outcome ``written``) without being stored.
    Runs in a PDF worker so that text extraction and the writes use every core and a hung or
    crashing parser only costs that worker.
    """
    triage = triage_document(doc.work_pdf or doc.readable, options, password=password, force_route=force)
    text_pages = [_text_page(triage, pt) for pt in triage.pages if pt.route == "text"]
    if finish is not None and len(text_pages) == triage.n_pages:
        # imported here: Arrow and DuckDB take ~1 GB of address space, which counts against the
        # worker's cap, and a worker that only renders or triages OCR pages never needs them
        from chandra_ocr.write import new_document, write_document

        done = new_document(doc, finish.engine, finish.model)
        done.n_pages, done.pages = triage.n_pages, text_pages
        written = write_document(done, layout, finish.options, finish.run_id, datetime.now(UTC))
        return ExtractRecord(key, "written", n_pages=triage.n_pages, written_status=written.status)
    record = ExtractRecord(key, "triaged", n_pages=triage.n_pages, triage=triage.pages)
    checkpoints.write_document_record(layout, doc.doc_id, replace(record, text_pages=text_pages))
    return record


def _text_page(triage: DocumentTriage, pt: PageTriage) -> Page:
    """A text-route page as triage read it."""
    return Page(
        pt.page_no,
        pt.width_pt,
        pt.height_pt,
        route="text",
        engine="text",
        route_reason=pt.reason,
        finish_reason="stop",
        blocks=triage.text_blocks.get(pt.page_no, []),
        tables=triage.tables.get(pt.page_no, []),
    )


def _record_of(future, key: str) -> ExtractRecord:
    """The document record from a triage future; failures become a quarantine record with the reason,
    except the knowledge base's own I/O errors (a full disk is no reason to quarantine a PDF: the
    task fails and its retry resumes; reading the source is a BadDocumentError already)."""
    try:
        return future.result()
    except (BadDocumentError, StageTimeoutError) as e:  # unreadable, timed out, out of memory, crashed
        return ExtractRecord(key, "quarantined", error=str(e))
    except OSError:
        raise
    except Exception as e:  # a parser error we have no better name for
        return ExtractRecord(key, "quarantined", error=f"could not read PDF: {type(e).__name__}: {e}")
