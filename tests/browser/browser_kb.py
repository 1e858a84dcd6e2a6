"""The browser tests' knowledge base: what it holds beyond the samples, and how to read it back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pymupdf

from chandra_ocr.document import Block, Chunk, Document, Page
from chandra_ocr.store.duckdb_store import connect, load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged

PAYLOADS = ("<script>window.__xss = 1</script>", '<img src=x onerror="window.__xss = 2">',
            "<svg onload=alert(3)>", "\"'><b id=injected>bold</b>")  # fmt: skip
XSS_FILE = "x<img src=x onerror=alert(4)>.pdf"
FALLBACK_ID = "f" * 64
FALLBACK_REASON = "vllm: output cut at max_tokens 3 times"


@dataclass(frozen=True)
class BrowserKb:
    root: Path
    layout: KbLayout

    def doc_id(self, file_name: str) -> str:
        return self.rows("SELECT doc_id FROM documents WHERE file_name = ?", [file_name])[0][0]

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        con = connect(self.layout, read_only=True)
        try:
            return con.execute(sql, params or []).fetchall()
        finally:
            con.close()


def xss_pdf(path: Path) -> None:
    """One page: the payloads as lines of text, then a ruled 3×2 table whose cells are payloads too."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for i, text in enumerate(PAYLOADS):
        page.insert_text((72, 90 + 22 * i), text, fontsize=11)
    cells = [["Name", "Value"], [PAYLOADS[0], PAYLOADS[1]], [PAYLOADS[2], PAYLOADS[3]]]
    x, y, w, h = 72, 260, 230, 28
    for r, row in enumerate(cells):
        for c, text in enumerate(row):
            rect = pymupdf.Rect(x + c * w, y + r * h, x + (c + 1) * w, y + (r + 1) * h)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            page.insert_text((rect.x0 + 4, rect.y0 + 18), text, fontsize=8)
    doc.save(path)
    doc.close()


def fallback_document(layout: KbLayout) -> None:
    """A partial one-page document whose page fell back after three attempts; its source is gone."""
    blocks = [Block(0, "text", (72, 72, 540, 120), "read by the fallback engine")]
    page = Page(1, 612, 792, "ocr", "cpu", model="tesseract", status="fallback", attempts=3,
                finish_reason="length", fallback_reason=FALLBACK_REASON, blocks=blocks)  # fmt: skip
    doc = Document(FALLBACK_ID, "/gone/ledger.pdf", "ledger.pdf", 1234, status="partial",
                   error="1 of 1 pages fell back", n_pages=1, pages=[page])  # fmt: skip
    chunk = Chunk(f"{FALLBACK_ID}-0", FALLBACK_ID, 0, "text", blocks[0].text, 4, (), 1, 1,
                  ((1, 72.0, 72.0, 540.0, 120.0),))  # fmt: skip
    write_staged(layout, "r", FALLBACK_ID, document_rows(doc, [chunk], run_id="r", now=datetime.now(UTC)))
    load_documents(layout, "r", [FALLBACK_ID])
