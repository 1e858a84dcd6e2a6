"""Native (ruled) tables of born-digital pages against other projects' expected cells.

Metric (chandra_ocr.testing.cell_match): exact-cell match after whitespace normalisation over
monotonically aligned grids; per table, matched cells / max(non-empty expected, non-empty
extracted). The set: every ruled ("lattice") table of camelot's tests with its expected
DataFrame in camelot_expected_tables.json, except the two whose text is rotated 90° on an
upright page, and the tabula-java spreadsheet CSVs of ruled pages. Tables without rules
(camelot "stream", tabula-java's basic extractor) are out of scope: they stay text blocks.
Where camelot's test asks for copied span text (``copy_text``), spans are compared filled,
elsewhere text sits at a merged cell's top-left; tabula's CSVs stack every table of the page.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path

import pymupdf
import pytest

from chandra_ocr.parse.html_text import html_to_text
from chandra_ocr.pdf.text_layer import text_blocks
from chandra_ocr.tables.markup import grid, table_from_html, table_text
from chandra_ocr.tables.native import native_tables
from chandra_ocr.tables.page import page_tables
from chandra_ocr.testing.cell_match import anchor_grid, cell_match, filled_grid, norm

pytestmark = pytest.mark.corpus

CAMELOT = "camelot/tests/files/"
TABULA = "tabula-java/src/test/resources/technology/tabula/"

# (pdf, page, expected variable, how spans are laid out in the expectation)
CAMELOT_CASES = [
    ("tabula/icdar2013-dataset/competition-dataset-us/us-030.pdf", 2, "data_lattice", "anchor"),
    ("twotables_2.pdf", 1, "data_lattice_two_tables_1", "anchor"),
    ("twotables_2.pdf", 1, "data_lattice_two_tables_2", "anchor"),
    ("table_region.pdf", 1, "data_lattice_table_regions", "anchor"),
    ("background_lines_1.pdf", 1, "data_lattice_process_background", "anchor"),
    ("row_span_1.pdf", 1, "data_lattice_copy_text", "filled"),
    ("column_span_2.pdf", 1, "data_lattice_shift_text_left_top", "anchor"),
    # Not tabula/arabic.pdf: camelot expects its cells in visual (left-to-right) character order, as
    # pdfminer returns them; we store right-to-left text in logical order, as docling's ground truth
    # does (tests/test_born_digital_accuracy.py) — the two cannot both be matched.
    ("split_text_lattice.pdf", 1, "data_lattice_split_text", "anchor"),
]
TABULA_CASES = [
    "spanning_cells",
    "twotables",
    "frx_2012_disclosure",
    "Publication_of_award_of_Bids_for_Transport_Sector__August_2016",
    "schools",
    "argentina_diputados_voting_record",
    "spreadsheet_no_bounding_frame",
]
MIN_MEAN = 0.9


@cache
def _tables(path: Path, page_no: int):
    with pymupdf.open(path) as doc:
        return native_tables(doc[page_no - 1])


def _camelot_score(corpus: Path, case) -> float:
    pdf, page_no, var, spans = case
    expected = json.loads((corpus / "camelot/camelot_expected_tables.json").read_text())["expected"][var]
    layout = filled_grid if spans == "filled" else anchor_grid
    return max(
        (cell_match(expected, layout(t)) for t in _tables(corpus / CAMELOT / pdf, page_no)), default=0.0
    )


def _tabula_score(corpus: Path, name: str) -> float:
    with open(corpus / TABULA / "csv" / f"{name}.csv", encoding="utf-8", newline="") as f:
        expected = list(csv.reader(f))
    stacked = [row for t in _tables(corpus / TABULA / f"{name}.pdf", 1) for row in anchor_grid(t)]
    return cell_match(expected, stacked)


def test_ruled_tables_match_the_expected_cells(corpus):
    scores = {f"camelot:{c[0]}:{c[2]}": _camelot_score(corpus, c) for c in CAMELOT_CASES}
    scores |= {f"tabula:{name}": _tabula_score(corpus, name) for name in TABULA_CASES}
    mean = sum(scores.values()) / len(scores)
    report = "\n".join(f"{s:.3f} {k}" for k, s in sorted(scores.items(), key=lambda kv: kv[1]))
    print(f"\nnative table cell match, mean {mean:.3f} over {len(scores)} tables\n{report}")
    assert mean >= MIN_MEAN, report
    assert min(scores.values()) >= 0.7, report  # no table lost outright


def test_native_tables_read_back_from_their_html_unchanged(corpus):
    """A native table is built from its cells, not parsed from its HTML: parsing that HTML gives the same
    table, and the table block's text is what ``html_to_text`` makes of it (every table of the set)."""
    pages = [(CAMELOT + pdf, page_no) for pdf, page_no, _, _ in CAMELOT_CASES]
    tables = [
        t
        for path, n in pages + [(TABULA + f"{name}.pdf", 1) for name in TABULA_CASES]
        for t in _tables(corpus / path, n)
    ]
    assert len(tables) >= 15 and any(c.rowspan > 1 or c.colspan > 1 for t in tables for c in t.cells)
    for t in tables:
        assert table_from_html(t.html, table_no=t.table_no, bbox=t.bbox, source="native") == t
        assert table_text(t) == html_to_text(t.html)


def test_merged_cells_keep_their_spans(corpus):
    """row_span_1.pdf: the plan-type and county cells span several rows (camelot copies them down)."""
    (table,) = _tables(corpus / CAMELOT / "row_span_1.pdf", 1)
    spanning = [c for c in table.cells if c.rowspan > 1]
    assert spanning, "no merged cells found"
    assert all(c.row + c.rowspan <= table.n_rows for c in spanning)
    covered = {(r, c.col) for c in spanning for r in range(c.row + 1, c.row + c.rowspan)}
    assert not covered & {(c.row, c.col) for c in table.cells}  # a covered position holds no cell of its own
    assert table.source == "native" and table.html.startswith("<table>")


def test_outer_frames_are_not_tables(corpus):
    """twotables_2.pdf draws a frame around each of its two tables; only the inner tables come back."""
    tables = _tables(corpus / CAMELOT / "twotables_2.pdf", 1)
    assert len(tables) == 2
    assert [t.table_no for t in tables] == [1, 2]
    assert tables[0].bbox[1] < tables[1].bbox[1]
    assert all(t.n_cols == 8 for t in tables)


def test_table_blocks_replace_the_text_they_cover(corpus):
    path = corpus / CAMELOT / "background_lines_1.pdf"
    with pymupdf.open(path) as doc:
        page = doc[0]
        blocks, tables = page_tables(page, text_blocks(page))
    (table,) = tables
    table_blocks = [b for b in blocks if b.label == "table"]
    assert (
        len(table_blocks) == 1 and table_blocks[0].bbox == table.bbox and table_blocks[0].html == table.html
    )
    box = pymupdf.Rect(table.bbox)
    inside = [b for b in blocks if b.label != "table" and box.contains(pymupdf.Rect(b.bbox).tl)]
    assert not [b.text for b in inside if abs(pymupdf.Rect(b.bbox) & box) > 0.5 * abs(pymupdf.Rect(b.bbox))]
    table_text = norm(table_blocks[0].text)
    assert all(norm(c.text) in table_text for c in table.cells)  # the block carries every cell
    assert [b.block_no for b in blocks] == list(range(len(blocks)))


def test_pages_without_rules_are_not_searched(corpus):
    """A prose page (pypdf's crazyones) has no drawings: no tables, and find_tables is never run."""
    with pymupdf.open(corpus / "pypdf/resources/crazyones.pdf") as doc:
        assert native_tables(doc[0]) == []


def test_native_tables_can_be_switched_off(samples):
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.triage import triage_document

    with_tables = triage_document(str(samples / "report.pdf"), PdfOptions())
    text_only = triage_document(str(samples / "report.pdf"), PdfOptions(native_tables=False))
    assert [t.n_rows for t in with_tables.tables[1]] == [6]
    assert text_only.tables == {}
    assert "table" not in {b.label for b in text_only.text_blocks[1]}
    assert "Millbrook" in " ".join(b.text for b in text_only.text_blocks[1])


def _pages_with_tables(corpus: Path):
    """The ruled-table pages of the accuracy set above."""
    for pdf, page_no, *_ in CAMELOT_CASES:
        yield corpus / CAMELOT / pdf, page_no
    for name in TABULA_CASES:
        yield corpus / TABULA / f"{name}.pdf", 1


def test_grid_gate_passes_every_page_where_a_table_is_found(corpus):
    """The cheap gate must never skip a page that PyMuPDF's find_tables or our ungated finder has a
    2 × 2 table on."""
    from chandra_ocr.tables.ruled_grid import find_grids, has_cells
    from chandra_ocr.tables.rules import drawn_rules, page_words

    for path, page_no in _pages_with_tables(corpus):
        with pymupdf.open(path) as doc:
            page = doc[page_no - 1]
            rules = drawn_rules(page, page.get_cdrawings())
            ours = find_grids(rules, page_words(page))
            theirs = page.find_tables().tables
            if any(t.row_count >= 2 and t.col_count >= 2 for t in [*ours, *theirs]):
                assert has_cells(rules), f"{path.name} page {page_no}"


# Pages with white text boxes in ruled cells: PyMuPDF's finder takes their sides as edges (rows
# splitting the header cells); ours does not (tables/rules.py). The shapes are ours.
WHITE_PAINT = {"twotables_2.pdf": [(4, 3), (13, 8), (16, 11)]}


def test_grids_have_the_shape_pymupdf_finds(corpus):
    """Our ruled-grid reader follows the same method as PyMuPDF's find_tables ("lines"): on the
    accuracy pages, every table it finds has the rows and columns PyMuPDF's has (``WHITE_PAINT``
    aside)."""
    from chandra_ocr.tables.ruled_grid import find_grids
    from chandra_ocr.tables.rules import drawn_rules, page_words

    for path, page_no in _pages_with_tables(corpus):
        with pymupdf.open(path) as doc:
            page = doc[page_no - 1]
            grids = find_grids(drawn_rules(page, page.get_cdrawings()), page_words(page))
            ours = [(g.row_count, g.col_count) for g in grids]
            theirs = [(t.row_count, t.col_count) for t in page.find_tables().tables]
        assert sorted(ours) == sorted(WHITE_PAINT.get(path.name, theirs)), f"{path.name} page {page_no}"


def test_a_second_header_row_under_spanning_cells_is_header(corpus):
    """camelot's foo.pdf: "Percent Fuel Savings" spans four columns over a second header row; the
    column names combine both rows, and the body starts at the first row of numbers."""
    (table,) = _tables(corpus / CAMELOT / "foo.pdf", 1)
    assert table.header[:3] == ("Cycle Name", "KI (1/km)", "Distance (mi)")
    assert table.header[3:] == tuple(
        f"Percent Fuel Savings / {name}"
        for name in ("Improved Speed", "Decreased Accel", "Eliminate Stops", "Decreased Idle")
    )
    assert {c.row for c in table.cells if c.is_header} == {0, 1}


def test_row_rules_stopping_short_of_the_label_column_give_one_label_per_row():
    """A ruled body beside a column of row labels whose row rules stop at the body: the label
    column is not one merged cell but a label per row."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    labels = ["Salaries", "Benefits", "Travel", "Rent", "Supplies", "Printing"]
    top, step = 100, 20
    bottom = top + step * (len(labels) + 1)
    for x in (72, 200, 300, 400):
        page.draw_line((x, top), (x, bottom), width=0.5)
    page.draw_line((72, top), (400, top), width=0.5)
    page.draw_line((72, top + step), (400, top + step), width=0.5)
    page.draw_line((72, bottom), (400, bottom), width=0.5)
    for k in range(2, len(labels) + 1):
        page.draw_line((200, top + k * step), (400, top + k * step), width=0.5)
    for x, text in ((76, "Cost"), (204, "Total"), (304, "Direct")):
        page.insert_text((x, top + 14), text, fontsize=10)
    for i, label in enumerate(labels, start=1):
        page.insert_text((76, top + i * step + 14), label, fontsize=10)
        page.insert_text((204, top + i * step + 14), f"{1000 * i:,}", fontsize=10)
        page.insert_text((304, top + i * step + 14), f"{700 * i:,}", fontsize=10)
    (table,) = native_tables(doc[0])
    rows = [[c for c in row if c] for row in grid(table)]
    assert ["Rent", "4,000", "2,800"] in rows and ["Salaries", "1,000", "700"] in rows


def test_unshaded_rows_of_a_table_shaded_every_other_row_keep_their_columns():
    """Cells shaded every other row draw the grid of those rows only: the rows between them are not
    one cell spanning the table but cells in the same columns."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    xs, top, step = [72, 200, 270, 340, 410], 100, 20
    labels = ["Total", "Charged", "Sentenced", "No prison", "Under a year", "Over a year"]
    for r in range(len(labels) + 1):
        y = top + r * step
        if r % 2 == 0:  # shaded rows: one filled box per cell
            for x0, x1 in zip(xs, xs[1:], strict=False):
                page.draw_rect((x0 + 1, y + 1, x1 - 1, y + step - 1), color=None, fill=(0.8, 0.85, 0.9))
        cells = (
            ["District", "2009", "2010", "2011"]
            if r == 0
            else [labels[r - 1], *(str(97 * r + k) for k in range(3))]
        )
        for x, text in zip(xs, cells, strict=False):
            page.insert_text((x + 4, y + 14), text, fontsize=10)
    page.draw_rect((72, top, 410, top + step * (len(labels) + 1)), color=(0, 0, 0), width=0.5)
    (table,) = native_tables(doc[0])
    rows = [[c for c in row if c] for row in grid(table)]
    assert ["Charged", "194", "195", "196"] in rows and ["Sentenced", "291", "292", "293"] in rows
