"""Tables ruled only in part (``tables/partly_ruled.py``), on corpus pages the issue names.

A rule under every record with multi-line cells (AnimalSounds), a boxed header with column rules
and no row rules (federal register), a rule every five rows with group labels (NICS), a rule every
two rows with cells spanning them (2305.03393v1-pg9), and a boxed form that is not a table
(la-precinct-bulletin). Frames come from the drawn rules alone (shading is no rule); prose pages
have none.
"""

from __future__ import annotations

import pymupdf
import pytest

from chandra_ocr.document import Table
from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
from chandra_ocr.tables.frames import frames
from chandra_ocr.tables.page import page_tables
from chandra_ocr.tables.rules import drawn_rules
from chandra_ocr.testing.cell_match import anchor_grid

TABULA = "tabula-java/src/test/resources/technology/tabula/"
PLUMBER = "pdfplumber/tests/pdfs/"
FEDERAL = PLUMBER + "federal-register-2020-17221.pdf"


def _tables(corpus, path: str, page_no: int = 1) -> list[Table]:
    with pymupdf.open(corpus / path) as doc:
        page = doc[page_no - 1]
        textpage = page.get_textpage(flags=TEXT_FLAGS)
        read = read_page(page, textpage)
        return page_tables(page, read.blocks, textpage, read.stats.row_splits)[1]


def _body(table: Table) -> list[list[str]]:
    header = {c.row for c in table.cells if c.is_header}
    return [row for i, row in enumerate(anchor_grid(table)) if i not in header]


@pytest.mark.corpus
def test_lines_between_two_rules_are_one_record(corpus):
    (table,) = _tables(corpus, TABULA + "AnimalSounds.pdf")
    assert table.header == ("Animal", "Action", "Result")
    body = _body(table)
    assert [row[0] for row in body] == ["Cat", "Parastratiosphecomyiastratiosph ecomyioides", "Fox"]
    assert body[2][2].startswith("Ring- dingding") and body[2][2].endswith("ing-dingdingdingdingeringeding")


@pytest.mark.corpus
def test_column_rules_without_row_rules_give_the_columns_and_the_text_the_rows(corpus):
    """Page 5: a boxed header, column rules down to the page's foot, no bottom rule; a hanging
    indent continues the last action; the header cell's lines set around the others' join."""
    (table,) = _tables(corpus, FEDERAL, 5)
    assert table.header[0] == "Action" and table.header[4] == "Cost on U.S. operators"
    body = _body(table)
    assert len(body) == 3
    assert body[2][0] == "MDS installation and verification, INOP marker removal."
    assert all(row[4] == "$6,205." for row in body)


@pytest.mark.corpus
def test_wrapped_cells_without_row_rules_stay_in_their_row(corpus):
    (table,) = _tables(corpus, FEDERAL, 6)
    body = _body(table)
    assert [row[0].split(" .")[0] for row in body] == ["Stabilizer wiring change", "AOA sensor system test"]
    assert body[0][1] == "Up to 79 work-hours × $85 per hour = Up to $6,715."
    assert body[1][1] == "40 work-hours × $85 per hour = $3,400."


@pytest.mark.corpus
def test_a_rule_every_five_rows_keeps_one_row_per_state(corpus):
    (table,) = _tables(corpus, PLUMBER + "nics-background-checks-2015-11.pdf")
    body = _body(table)
    assert table.n_cols == 25
    assert len(body) == 56 and body[0][0] == "Alabama" and body[-1][0] == "Totals"
    assert body[-1][16:18] == ["0", "0"]  # Rentals: empty column but in the totals
    assert not any("November" in name for name in table.header)  # the title is not a column name
    assert "Return to Seller - Private Sale / Handgun" in table.header
    # narrow group labels boxed by the column rules that cross their line span their three columns
    assert table.header[7:10] == ("Pre-Pawn / Handgun", "Pre-Pawn / Long Gun", "Pre-Pawn / *Other")
    assert table.header[18:21] == (
        "Private Sale / Handgun",
        "Private Sale / Long Gun",
        "Private Sale / *Other",
    )
    assert table.header[1:7] == ("Permit", "Handgun", "Long Gun", "*Other", "**Multiple", "Admin")


@pytest.mark.corpus
def test_a_rule_every_two_rows_with_cells_spanning_them(corpus):
    (table,) = _tables(corpus, "docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf")
    body = _body(table)
    assert [row[2] for row in body] == ["OTSL", "HTML"] * 4
    assert [row[:2] for row in body[::2]] == [["6", "6"], ["4", "4"], ["2", "4"], ["4", "2"]]
    assert body[0][3:] == ["0.965", "0.934", "0.955", "0.88", "2.73"]
    assert table.header[3:6] == ("TEDs / simple", "TEDs / complex", "TEDs / all")
    assert table.header[:2] + table.header[6:] == (
        "# enc-layers",
        "# dec-layers",
        "mAP (0.75)",
        "Inference time (secs)",
    )


@pytest.mark.corpus
def test_a_boxed_form_is_not_a_table(corpus):
    """la-precinct-bulletin: four ruled boxes of contests with their counts. Neither its box rules
    taken for column rules (cells of "YES 90") nor rows across the boxes make a table."""
    assert _tables(corpus, PLUMBER + "la-precinct-bulletin-2014-p1.pdf") == []


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("path", "pages"),
    [
        ("pypdf/resources/crazyones.pdf", 1),
        ("sample-files/026-latex-multicolumn/multicolumn.pdf", 2),  # its third page has a table
        *((f"pdfminer/samples/simple{i}.pdf", 1) for i in range(1, 6)),
    ],
)
def test_prose_pages_have_no_frames(corpus, path, pages):
    with pymupdf.open(corpus / path) as doc:
        ruled = [drawn_rules(doc[i], doc[i].get_cdrawings()) for i in range(pages)]
    assert not any(frames(rules) for rules in ruled if rules is not None)


def test_shading_is_not_a_rule():
    """The sides of a filled box without a stroke are edges of the grid, not drawn rules."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(pymupdf.Rect(72, 100, 540, 120), color=None, fill=(0.85, 0.85, 0.85))
    page.draw_line((72, 200), (540, 200), color=(0, 0, 0))
    rules = drawn_rules(page, page.get_cdrawings())
    assert rules is not None
    assert sorted(round(y) for y, _, _ in rules.h) == [100, 120, 200]
    assert [round(y) for y, _, _ in rules.drawn_h] == [200]
