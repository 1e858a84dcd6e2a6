"""The extract stage of one batch: triage every document, then stream all OCR pages through one engine.

Text-route pages are checkpointed straight from triage. OCR-route pages of every document in
the batch form one stream (rendering in worker processes overlaps inference; no per-file
barrier). A page the engine cannot read validly falls back to the text layer, then to the CPU
engine, and is marked ``fallback`` — or ``failed`` when nothing could read it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.document import Page
from chandra_ocr.errors import BadDocumentError, ConfigError, StageTimeoutError
from chandra_ocr.manifest import Batch, DocRef
from chandra_ocr.ocr.base import OcrEngine, PageRequest, PageResult
from chandra_ocr.pdf.render_spec import RenderSpec
from chandra_ocr.pdf.triage import PageTriage, triage_document
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.progress import Progress
from chandra_ocr.store import checkpoints
from chandra_ocr.store.layout import KbLayout

log = logging.getLogger(__name__)


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


def render_spec_of(engine: OcrEngine) -> RenderSpec:
    """The engine's render budget (its preset's for VLM engines)."""
    spec = getattr(engine, "render_spec", None) or getattr(getattr(engine, "preset", None), "render", None)
    return spec or RenderSpec()


def extract_batch(
    batch: Batch, layout: KbLayout, options: IngestOptions, engine: OcrEngine, workers: PdfWorkers
) -> Batch:
    """Triage and read every page of ``batch`` (resuming from checkpoints); returns the updated manifest."""
    key = engine_key(engine)
    pending = _triage_all(batch, layout, options, engine, workers, key)
    ocr_pages = [
        (p, pt)
        for p in pending
        for pt in p.pages.values()
        if pt.route == "ocr" and checkpoints.read_page(layout, p.doc.doc_id, pt.page_no, key) is None
    ]
    progress = Progress(f"extract {batch.batch_id}", len(ocr_pages), log)
    failed: list[tuple[_Pending, PageTriage, PageResult | None, str]] = []
    by_id = {p.doc.doc_id: p for p in pending}

    def requests() -> Iterator[PageRequest]:
        for p, pt in ocr_pages:
            yield PageRequest(p.doc.doc_id, pt.page_no, p.pdf_path, pt.width_pt, pt.height_pt)

    def rendered() -> Iterator[PageRequest]:
        stream = workers.render_stream(
            requests(), render_spec_of(engine), timeout=options.pdf.page_timeout_s, window=_window(engine)
        )
        for req, err in stream:
            if err is None:
                yield req
                continue
            p = by_id[req.doc_id]
            failed.append((p, p.pages[req.page_no], None, f"render: {err}"))

    if ocr_pages:
        for result in engine.run(rendered()):
            p = by_id[result.doc_id]
            pt = p.pages[result.page_no]
            if result.status == "ok":
                checkpoints.write_page(layout, result.doc_id, _ocr_page(pt, result), key)
            else:
                failed.append((p, pt, result, result.error or f"finish_reason={result.finish_reason}"))
            progress.add(pages=1)
    _fallback(failed, layout, options, engine, key)
    progress.done()
    batch.engine, batch.model = engine.name, engine.model
    batch.counts = {"ocr_pages": len(ocr_pages), "fallback_pages": len(failed)} | {
        "quarantined": sum(1 for d in batch.docs if d.status == "quarantined")
    }
    return batch


def _window(engine: OcrEngine) -> int:
    """Rendered pages to keep queued ahead of the engine: enough to keep it busy, bounded for memory."""
    return int(getattr(engine, "in_flight_pages", 0) or 16)


def _triage_all(
    batch: Batch, layout: KbLayout, options: IngestOptions, engine: OcrEngine, workers: PdfWorkers, key: str
) -> list[_Pending]:
    force = "text" if engine.name == "text" else None
    futures = {}
    for doc in batch.docs:
        record = checkpoints.read_document_record(layout, doc.doc_id)
        if record is None or record.get("engine_key") != key:
            args = (layout, doc.doc_id, doc.work_pdf or doc.source, options.pdf, force, key)
            futures[doc.doc_id] = workers.submit(
                triage_and_checkpoint, *args, timeout=options.pdf.doc_timeout_s
            )
    pending = []
    for doc in batch.docs:
        if doc.doc_id in futures:
            record = _record_of(futures[doc.doc_id], key)
            checkpoints.write_document_record(layout, doc.doc_id, record)
        else:
            record = checkpoints.read_document_record(layout, doc.doc_id)
        doc.status = "quarantined" if record["status"] == "quarantined" else None
        if doc.status == "quarantined":
            continue
        doc.n_pages = record["n_pages"]
        pages = {pt["page_no"]: PageTriage(**pt) for pt in record["pages"]}
        pending.append(_Pending(doc, doc.work_pdf or doc.source, pages))
    return pending


def triage_and_checkpoint(
    layout: KbLayout, doc_id: str, pdf_path: str, options: PdfOptions, force: str | None, key: str
) -> dict:
    """Worker side: triage one document and checkpoint its text-route pages; returns the document record.

    Runs in a PDF worker so that text extraction and checkpoint writing use every core and a
    hung or crashing parser only costs that worker.
    """
    triage = triage_document(pdf_path, options, force_route=force)
    for pt in triage.pages:
        if pt.route == "text" and checkpoints.read_page(layout, doc_id, pt.page_no, key) is None:
            blocks = triage.text_blocks.get(pt.page_no, [])
            page = Page(
                pt.page_no,
                pt.width_pt,
                pt.height_pt,
                route="text",
                engine="text",
                route_reason=pt.reason,
                finish_reason="stop",
                blocks=blocks,
                tables=triage.tables.get(pt.page_no, []),
            )
            checkpoints.write_page(layout, doc_id, page, key)
    return {
        "status": "ok",
        "n_pages": triage.n_pages,
        "pages": [asdict(p) for p in triage.pages],
        "engine_key": key,
    }


def _record_of(future, key: str) -> dict:
    """The document record from a triage future; failures become a quarantine record with the reason."""
    try:
        return future.result()
    except (BadDocumentError, StageTimeoutError) as e:  # unreadable, timed out, out of memory, crashed
        return {"status": "quarantined", "error": str(e), "engine_key": key}
    except Exception as e:  # a parser error we have no better name for
        return {
            "status": "quarantined",
            "error": f"could not read PDF: {type(e).__name__}: {e}",
            "engine_key": key,
        }


def _ocr_page(pt: PageTriage, result: PageResult, status: str = "ok", reason: str | None = None) -> Page:
    return Page(
        pt.page_no,
        pt.width_pt,
        pt.height_pt,
        route="ocr",
        engine=result.engine,
        model=result.model,
        route_reason=pt.reason,
        status=status,
        attempts=result.attempts,
        finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens,
        output_tokens=result.output_tokens,
        latency_ms=result.latency_ms,
        fallback_reason=reason,
        raw=result.text or None,
        blocks=result.blocks,
        tables=result.tables,
    )


def _fallback(failed, layout: KbLayout, options: IngestOptions, primary: OcrEngine, key: str) -> None:
    """Text layer first (where the page has any), then the CPU engine; else record the page as failed."""
    from chandra_ocr.ocr.registry import build_engine

    left = list(failed)
    for kind in ("text", "cpu"):
        if not left or kind == primary.name:
            continue
        try:
            engine = build_engine(kind, options.preset)
            engine.start()
        except ConfigError as e:
            log.warning("fallback engine %s unavailable: %s", kind, e)
            continue
        todo = [f for f in left if kind != "text" or f[1].n_chars > 0]
        reqs = [
            PageRequest(p.doc.doc_id, pt.page_no, p.pdf_path, pt.width_pt, pt.height_pt)
            for p, pt, _, _ in todo
        ]
        index = {(p.doc.doc_id, pt.page_no): (p, pt, r, why) for p, pt, r, why in todo}
        done = set()
        try:
            for result in engine.run(iter(reqs)):
                p, pt, primary_result, why = index[(result.doc_id, result.page_no)]
                if result.status != "ok" or (kind == "text" and not result.blocks):
                    continue
                page = _ocr_page(pt, result, status="fallback", reason=why)
                if primary_result is not None:
                    page.attempts = primary_result.attempts
                    page.finish_reason = primary_result.finish_reason
                    page.prompt_tokens = primary_result.prompt_tokens
                    page.output_tokens = primary_result.output_tokens
                checkpoints.write_page(layout, result.doc_id, page, key)
                done.add((result.doc_id, result.page_no))
        finally:
            engine.close()
        left = [f for f in left if (f[0].doc.doc_id, f[1].page_no) not in done]
    for p, pt, result, why in left:
        page = Page(
            pt.page_no,
            pt.width_pt,
            pt.height_pt,
            route="ocr",
            engine=primary.name,
            model=primary.model,
            route_reason=pt.reason,
            status="failed",
            error=why,
            attempts=result.attempts if result else 0,
            finish_reason=result.finish_reason if result else None,
        )
        checkpoints.write_page(layout, p.doc.doc_id, page, key)
