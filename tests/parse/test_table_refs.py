"""Every parser gives a table block the number of its ``Table``; a block whose grid could not be read
names none (chunking then keeps its text alone)."""

from __future__ import annotations

from pathlib import Path

from chandra_ocr.config import PdfOptions
from chandra_ocr.parse.chandra_html import parse_chandra_html
from chandra_ocr.parse.markdown import parse_markdown
from chandra_ocr.pdf.triage import triage_document

GRID = "<table><tr><th>Year</th><th>Count</th></tr><tr><td>2001</td><td>7</td></tr></table>"


def _refs(blocks, tables) -> list[tuple[int | None, tuple[str, ...] | None]]:
    by_no = {t.table_no: t for t in tables}
    return [
        (b.table_no, by_no[b.table_no].header if b.table_no else None) for b in blocks if b.label == "table"
    ]


def test_chandra_html_table_blocks_name_their_tables():
    html = (
        '<div data-label="Table" data-bbox="0 0 500 100">no grid here</div>'
        f'<div data-label="Text" data-bbox="0 100 500 200">Between.</div>'
        f'<div data-label="Table" data-bbox="0 200 500 300">{GRID}</div>'
    )
    page = parse_chandra_html(html, 612, 792)
    assert _refs(page.blocks, page.tables) == [(None, None), (2, ("Year", "Count"))]


def test_markdown_table_blocks_name_their_tables():
    md = f"| A | B |\n|---|---|\n| 1 | 2 |\n\nText between.\n\n{GRID}\n"
    page = parse_markdown(md, 612, 792)
    assert _refs(page.blocks, page.tables) == [(1, ("A", "B")), (2, ("Year", "Count"))]


def test_native_table_blocks_name_their_tables(samples: Path):
    triage = triage_document(str(samples / "report.pdf"), PdfOptions())
    refs = [
        r
        for page_no in triage.text_blocks
        for r in _refs(triage.text_blocks[page_no], triage.tables.get(page_no, []))
    ]
    assert refs and all(no is not None and header for no, header in refs)
