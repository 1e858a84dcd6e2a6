"""Tables read from text lines: header levels, stub heads and wrapped cells (``tables/header.py``,
``tables/wrapped.py``), on pages made here and on camelot's m27.pdf (wrapped cells of an unruled
listing)."""

from __future__ import annotations

import json

import pymupdf
import pytest

from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
from chandra_ocr.tables.page import page_tables
from chandra_ocr.testing.cell_match import anchor_grid

COLS = [72, 230, 300, 380, 450]  # the label column, then two groups of two


def _tables(page: pymupdf.Page):
    textpage = page.get_textpage(flags=TEXT_FLAGS)
    read = read_page(page, textpage)
    return page_tables(page, read.blocks, textpage, read.stats.row_splits)[1]


def _write(page: pymupdf.Page, y: float, pieces: list[tuple[float, str]]) -> None:
    for x, text in pieces:
        page.insert_text((x, y), text, fontsize=10)


def test_a_two_level_header_with_a_stub_head_over_two_lines():
    """Group labels ruled under over their two columns, the stub head's two lines set beside both
    levels: two header rows, the stub head one cell spanning them, labels joined by level."""
    page = pymupdf.open().new_page(width=612, height=792)
    _write(page, 100, [(72, "Age group"), (250, "Women"), (405, "Men")])
    page.draw_line((225, 104), (350, 104))
    page.draw_line((375, 104), (500, 104))
    _write(page, 114, [(72, "(yrs)"), (230, "no."), (300, "Rate"), (380, "no."), (450, "Rate")])
    for n, age in enumerate(["45-54", "55-64", "65-74", "75-84", "85+", "All ages"]):
        values = [f"{120 + 31 * n:,}", f"{3.5 + n:.1f}", f"{98 + 17 * n:,}", f"{2.5 + n:.1f}"]
        _write(page, 130 + 14 * n, [(72, age), *zip(COLS[1:], values, strict=True)])
    (table,) = _tables(page)
    assert table.header_rows == 2 and table.stub_head == "Age group (yrs)"
    assert table.header == ("Age group (yrs)", "Women / no.", "Women / Rate", "Men / no.", "Men / Rate")
    head = sorted((c.header_level, c.col, c.rowspan, c.colspan, c.text) for c in table.cells if c.is_header)
    assert head[:3] == [(1, 0, 2, 1, "Age group (yrs)"), (1, 1, 1, 2, "Women"), (1, 3, 1, 2, "Men")]
    assert [h[4] for h in head[3:]] == ["no.", "Rate", "no.", "Rate"] and {h[0] for h in head[3:]} == {2}
    assert anchor_grid(table)[2] == ["45-54", "120", "3.5", "98", "2.5"]
    assert all(c.header_level is None for c in table.cells if not c.is_header)


def test_a_wrapped_cell_is_one_cell_and_a_section_label_stays_a_row():
    """Rows set one line apart: a description too long for its column goes on under itself (its
    first line full to the next column) and is one cell; a label line of the first column stays a
    row."""
    page = pymupdf.open().new_page(width=612, height=792)
    long_text = "Cloud services for agencies under one"
    edge = 180 + pymupdf.get_text_length(long_text, fontsize=10) + 12  # the next column, a gap away
    lines = [
        [(72, "Program"), (180, "Description"), (edge, "Budget")],
        [(72, "Services")],
        [(72, "Performance"), (180, "Goals and results"), (edge, "1.1")],
        [(72, "FedRAMP"), (180, long_text), (edge, "0.3")],
        [(180, "authorization")],
        [(72, "Data centers"), (180, "Consolidation"), (edge, "0.4")],
        [(72, "Email"), (180, "Cloud email"), (edge, "0.2")],
        [(72, "Records"), (180, "Records portal"), (edge, "0.1")],
    ]
    for n, pieces in enumerate(lines):
        _write(page, 100 + 13 * n, pieces)
    (table,) = _tables(page)
    rows = anchor_grid(table)
    assert rows[0] == ["Program", "Description", "Budget"] and table.header_rows == 1
    assert rows[1] == ["Services", "", ""]
    assert rows[3] == ["FedRAMP", f"{long_text} authorization", "0.3"]
    assert len(rows) == len(lines) - 1


@pytest.mark.corpus
def test_wrapped_cells_of_an_unruled_listing_do_not_become_rows(corpus):
    """camelot's m27.pdf: a name or an address on two lines, the record's other cells set at its
    last line. Every body row is one licence (its number first), in the order camelot's expected
    table lists the licence numbers."""
    expected = json.loads((corpus / "camelot/camelot_expected_tables.json").read_text())["expected"]
    numbers = [row[0] for row in expected["data_stream_split_text"] if row[0].isdigit()]
    with pymupdf.open(corpus / "camelot/tests/files/tabula/m27.pdf") as doc:
        (table,) = _tables(doc[0])
    body = anchor_grid(table)[table.header_rows :]
    assert [row[0] for row in body] == numbers
    assert table.header[:4] == ("LICENSE NUMBER", "TYPE", "DBA NAME", "LICENSEE NAME")
