"""Retries, fallbacks and failures by reason: pages written and loaded by the real staging writer and loader.

The pages' accounting (attempts, finish and fallback reasons, errors) is set by the test, as the
extract stage would record it; no engine here produces fallbacks on demand.
"""

from __future__ import annotations

from datetime import UTC, datetime

from chandra_ocr.document import Document, Page
from chandra_ocr.report import write_report
from chandra_ocr.report.data import collect
from chandra_ocr.store.duckdb_store import load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged


def _page(no: int, **accounting) -> Page:
    return Page(no, 612.0, 792.0, route="ocr", engine="vllm", **accounting)


def test_reasons_are_grouped_without_their_details(tmp_path):
    pages = [
        _page(1, attempts=3, finish_reason="stop"),  # read on the third try
        _page(2, attempts=2, finish_reason="stop"),
        _page(3, status="fallback", attempts=3, finish_reason="length", fallback_reason="length"),
        _page(4, status="fallback", fallback_reason="render failed: MemoryError at page 4"),
        _page(5, status="fallback", fallback_reason="render failed: timeout after 60 s"),
        _page(6, status="failed", attempts=0, error="no engine could read it: tesseract exited 1"),
    ]
    doc = Document("d" * 64, "/in/a.pdf", "a.pdf", 1000, n_pages=len(pages), pages=pages, engine="vllm")
    layout = KbLayout(tmp_path / "kb")
    write_staged(layout, "r1", doc.doc_id, document_rows(doc, [], run_id="r1", now=datetime.now(UTC)))
    load_documents(layout, "r1", [doc.doc_id])

    data = collect(layout)
    assert sorted(data.retries) == [("length", 1, 2), ("stop", 2, 3)]  # reason, pages, extra attempts
    assert sorted(data.fallbacks) == [
        ("failed", "no engine could read it", 1),
        ("fallback", "length", 1),
        ("fallback", "render failed", 2),
    ]
    files = write_report(layout.root)
    text = files.html.read_text(encoding="utf-8")
    assert "render failed" in text and "MemoryError" not in text
