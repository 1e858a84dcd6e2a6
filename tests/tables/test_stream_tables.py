"""Tables without rules (word alignment, ``tables/stream.py``) and the page's blocks around tables.

Pages made here (no corpus): an unruled table, two-column prose, a numbered list, a table of
contents. On the corpus: camelot's stream expectations (cell match, chandra_ocr.testing.cell_match),
no tables on born-digital pages whose ground truth has none, and every word of a page in exactly
one block (``tables/page.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pymupdf
import pytest

from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
from chandra_ocr.tables.alignment import split_columns, visual_rows
from chandra_ocr.tables.page import page_tables
from chandra_ocr.testing.cell_match import anchor_grid, cell_match

CAMELOT = "camelot/tests/files/"
PROSE = (
    "the committee reviewed every proposal submitted during the spring term and agreed that the "
    "results should be published together with the data behind them so that others can check"
)
PROSE_WORDS = PROSE.split(" ")


def _tables(page: pymupdf.Page):
    textpage = page.get_textpage(flags=TEXT_FLAGS)
    read = read_page(page, textpage)
    return page_tables(page, read.blocks, textpage, read.stats.row_splits)


def _page(lines: list[list[tuple[float, str]]], top: float = 100, step: float = 14) -> pymupdf.Document:
    """A one-page PDF with each line's (x, text) pieces written at their x positions."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for n, pieces in enumerate(lines):
        for x, text in pieces:
            page.insert_text((x, top + n * step), text, fontsize=10)
    return doc


def _table_lines() -> list[list[tuple[float, str]]]:
    head = [
        [(72, "Region"), (255, "Annual fuel savings (litres)"), (410, "Change")],  # over two columns
        [(250, "2004"), (330, "2005"), (410, "(%)")],
    ]
    body = [
        [(72, name), (250, f"{1000 + 37 * i:,}"), (330, f"{1200 + 41 * i:,}"), (410, f"{3 + i}.5%")]
        for i, name in enumerate(["North", "South East", "West", "Central", "Islands", "Overseas"])
    ]
    return head + body


def test_an_unruled_table_is_found_with_its_header():
    doc = _page([[(72, "Quarterly report on regional fuel use")], [], *_table_lines()])
    blocks, tables = _tables(doc[0])
    (table,) = tables
    assert table.n_cols == 4 and table.n_rows == 8
    rows = anchor_grid(table)
    assert rows[-1] == ["Overseas", "1,185", "1,405", "8.5%"]
    # a group label over two columns, then "/"; two lines of one column's label read as one
    assert table.header == (
        "Region",
        "Annual fuel savings (litres) / 2004",
        "Annual fuel savings (litres) / 2005",
        "Change (%)",
    )
    assert [c.is_header for c in table.cells if c.row == 2] == [False] * 4
    assert [b.label for b in blocks].count("table") == 1
    assert "Quarterly report" in " ".join(b.text for b in blocks if b.label != "table")


def test_two_column_prose_is_not_a_table():
    left = [" ".join(PROSE_WORDS[i : i + 7]) for i in range(0, 28, 3)]
    right = [" ".join(PROSE_WORDS[i + 1 : i + 8]) for i in range(0, 28, 3)]
    doc = _page([[(72, a), (330, b)] for a, b in zip(left, right, strict=True)])
    assert _tables(doc[0])[1] == []


def test_lists_and_tables_of_contents_are_not_tables():
    items = [[(72, f"{n}."), (100, " ".join(PROSE_WORDS[n : n + 3]))] for n in range(1, 9)]
    assert _tables(_page(items)[0])[1] == []
    toc = [[(72, " ".join(PROSE_WORDS[n : n + 2]) + " " + "." * 30), (400, str(3 * n))] for n in range(1, 9)]
    assert _tables(_page(toc)[0])[1] == []


STREAM_CASES = [
    ("health.pdf", "hand:health", 0.95),  # camelot's expectation has a row per header line: corrected
    ("tabula/12s0324.pdf", "data_stream_two_tables_1", 0.75),
    ("tabula/12s0324.pdf", "data_stream_two_tables_2", 0.75),
    ("stream_inner_outer_columns.pdf", "data_stream_inner_outer_columns", 0.95),
    ("mexican_towns.pdf", "data_stream_columns", 0.9),
    ("tabula/m27.pdf", "hand:m27", 0.9),  # two columns closer than a cell gap; a record per licence
]
HAND = Path(__file__).resolve().parents[2] / "bench" / "tables_hand.json"


@pytest.mark.corpus
@pytest.mark.parametrize(("pdf", "var", "least"), STREAM_CASES)
def test_unruled_tables_match_camelots_expected_cells(corpus, pdf, var, least):
    """camelot's expected cells, or the hand-checked table (``bench/tables_hand.json``) that corrects
    them where camelot's expectation keeps a cell's lines as rows of their own."""
    if var.startswith("hand:"):
        hand = json.loads(HAND.read_text(encoding="utf-8"))["tables"]
        expected = next(t["expected"] for t in hand if t["name"] == var.removeprefix("hand:"))
    else:
        expected = json.loads((corpus / "camelot/camelot_expected_tables.json").read_text())["expected"][var]
    with pymupdf.open(corpus / CAMELOT / pdf) as doc:
        _, tables = _tables(doc[0])
    assert max(cell_match(expected, anchor_grid(t)) for t in tables) >= least


@pytest.mark.corpus
def test_born_digital_pages_without_tables_get_none(corpus):
    """Docling's pages whose ground truth has no table, and pypdf's and pdfminer's prose samples."""
    root = corpus / "docling/tests/data/pdf"
    found, pages = [], 0
    for truth in sorted((root / "groundtruth").glob("*.json")):
        pdf = root / "sources" / f"{truth.stem}.pdf"
        if not pdf.exists():
            continue
        with_tables = {t["prov"][0]["page_no"] for t in json.loads(truth.read_text()).get("tables", [])}
        with pymupdf.open(pdf) as doc:
            for n, page in enumerate(doc, start=1):
                if n not in with_tables:
                    pages += 1
                    found += [f"{pdf.name}:{n}"] * len(_tables(page)[1])
    for name in ["pypdf/resources/crazyones.pdf", *(f"pdfminer/samples/simple{i}.pdf" for i in range(1, 6))]:
        with pymupdf.open(corpus / name) as doc:
            for page in doc:
                pages += 1
                found += [name] * len(_tables(page)[1])
    assert pages >= 30
    assert len(found) <= 2, found


def _chars(text: str) -> Counter[str]:
    """Characters without whitespace or hyphens (joining lines undoes hyphenation)."""
    return Counter(c for c in text if not c.isspace() and c not in "-\u00ad\u2010")


WORD_PAGES = [
    (CAMELOT + "health.pdf", 1),
    (CAMELOT + "tabula/12s0324.pdf", 1),
    (CAMELOT + "foo.pdf", 1),
    (CAMELOT + "row_span_1.pdf", 1),
    ("tabula-java/src/test/resources/technology/tabula/spanning_cells.pdf", 1),
    ("pdfplumber/tests/pdfs/nics-background-checks-2015-11.pdf", 1),
    ("pdfplumber/tests/pdfs/senate-expenditures.pdf", 1),
    ("docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf", 1),
    ("docling/tests/data/pdf/sources/redp5110_sampled.pdf", 8),
    ("tabula-java/src/test/resources/technology/tabula/AnimalSounds.pdf", 1),
    ("pdfplumber/tests/pdfs/federal-register-2020-17221.pdf", 5),
    ("pdfplumber/tests/pdfs/federal-register-2020-17221.pdf", 6),
]


@pytest.mark.corpus
@pytest.mark.parametrize(("path", "page_no"), WORD_PAGES)
def test_every_word_is_in_exactly_one_block(corpus, path, page_no):
    """Table pages: the characters of the page's words are those of its blocks (a table block's
    through its cells), each once: nothing dropped, nothing repeated after a table."""
    with pymupdf.open(corpus / path) as doc:
        page = doc[page_no - 1]
        blocks, tables = _tables(page)
        words = page.get_text("words", flags=TEXT_FLAGS)
    assert tables, "the page has a table"
    got = Counter()
    for b in blocks:
        if b.label != "table":
            got += _chars(b.text)
    for t in tables:
        got += _chars(" ".join(c.text for c in t.cells))
    assert got == _chars(" ".join(w[4] for w in words))


@pytest.mark.corpus
def test_a_table_box_running_over_the_next_paragraph_keeps_it_as_text(corpus):
    """tabula's spanning_cells: the first table's ruling runs on over a paragraph into the second
    table; the paragraph stays text, both two-line captions are found, the footer is a footer."""
    with pymupdf.open(corpus / "tabula-java/src/test/resources/technology/tabula/spanning_cells.pdf") as doc:
        blocks, tables = _tables(doc[0])
    assert [t.caption.split(".")[0] for t in tables] == ["Table A4-12", "Table A4-13"]
    assert all(t.caption.endswith("2007 to 2011") for t in tables)
    assert not any("summarizes" in c.text for t in tables for c in t.cells)
    assert any(b.label == "text" and "summarizes the projections" in b.text for b in blocks)
    assert tables[0].header[1:] == ("2007", "2008", "2009", "2010", "2011")  # not the title row
    (footer,) = [b for b in blocks if "A-42" in b.text]
    assert footer.label == "page_footer"


def test_two_tables_side_by_side_are_two_tables():
    lines = [
        [
            (72, str(n)),
            (110, str(100 + n)),
            (150, str(200 + n)),
            (330, str(30 + n)),
            (370, str(130 + n)),
            (410, "x"),
        ]
        for n in range(1, 9)
    ]
    _, tables = _tables(_page(lines)[0])
    assert [(t.n_rows, t.n_cols) for t in tables] == [(8, 3), (8, 3)]
    assert anchor_grid(tables[0])[0] == ["1", "101", "201"] and anchor_grid(tables[1])[-1] == [
        "38",
        "138",
        "x",
    ]


@pytest.mark.corpus
def test_right_to_left_cells_read_in_reading_order(corpus):
    """indictb1h_14: Hebrew row labels read as the text layer (and tabula's expected CSV) reads them."""
    with pymupdf.open(corpus / "tabula-java/src/test/resources/technology/tabula/indictb1h_14.pdf") as doc:
        tables = _tables(doc[0])[1]
    texts = {c.text for t in tables for c in t.cells}
    assert {"סך הכל", "סך הכל - לנפש", "הסקטור העסקי"} <= texts


def _texts(table) -> list[str]:
    return [c.text for c in table.cells if c.text]


def test_a_table_of_rates_with_confidence_intervals_is_a_table():
    """Cells like "(95% CI)" and "(41.1-43.9)" are ranges and units, not program code."""
    head = [(72, "Group")] + [
        (x + dx, t) for x in (180, 380) for dx, t in ((0, "no."), (50, "Rate"), (100, "(95% CI)"))
    ]
    lines = [head]
    for i, name in enumerate(["Female", "Male", "Hispanic", "Non-Hispanic", "Total"]):
        cells = (f"{900 + 13 * i:,}", f"{40 + i}.5", f"({39 + i}.1-{41 + i}.9)")
        lines.append(
            [(72, name)]
            + [(x + dx, t) for x in (180, 380) for dx, t in zip((0, 50, 100), cells, strict=True)]
        )
    (table,) = _tables(_page(lines)[0])[1]
    assert "(95% CI)" in _texts(table) and "(41.1-43.9)" in _texts(table)
    assert table.n_cols == 7


def test_a_table_above_two_column_prose_ends_where_the_prose_starts():
    """Lines of prose set in two columns right below a table are not rows of it."""
    prose = [" ".join(PROSE_WORDS[i : i + 7]) for i in (0, 7, 14, 21)]
    lines = _table_lines() + [[(72, prose[k]), (360, prose[k + 1])] for k in (0, 2, 1, 0, 2)]
    (table,) = _tables(_page(lines)[0])[1]
    assert table.n_cols == 4 and not any(PROSE_WORDS[0] in t for t in _texts(table))


def test_a_two_column_table_of_amounts_with_magnitudes_is_a_table():
    """ "$1.1M" is a number: a label column beside amounts is a two-column table."""
    names = ["Performance portal", "Risk program", "Cloud consolidation", "Dashboard", "Data catalogue"]
    lines = [[(72, "Program"), (400, "Budget")]]
    lines += [[(72, name), (400, f"${i}.{i + 1}M")] for i, name in enumerate(names, start=1)]
    (table,) = _tables(_page(lines)[0])[1]
    assert table.n_cols == 2 and "$2.3M" in _texts(table)


def _boxed_page(headers: list[tuple[str, str]]) -> pymupdf.Document:
    """Three boxes side by side between full-height column rules, each with a header and 8 rows."""
    starts = (72, 252, 432)
    lines = [
        [
            (x + dx, text)
            for x, head in zip(starts, headers, strict=True)
            for dx, text in zip((0, 80), head, strict=True)
        ]
    ]
    for i in range(8):
        lines.append(
            [
                (x + dx, t)
                for x, j in ((72, i), (252, i + 8), (432, i + 16))
                for dx, t in ((0, f"{j} years"), (80, f"{3000 - 37 * j:,}"))
            ]
        )
    doc = _page(lines)
    page = doc[0]
    for x in (240, 420):
        page.draw_line((x, 85), (x, 100 + 9 * 14), width=0.5)
    return doc


def test_a_table_wrapped_into_ruled_boxes_is_read_box_by_box():
    """Column rules splitting a region into boxes that repeat one header: one table per box."""
    _, tables = _tables(_boxed_page([("Age", "Total")] * 3)[0])
    assert len(tables) == 3 and all(_texts(t)[:2] == ["Age", "Total"] for t in tables)
    assert "19 years" in _texts(tables[2])


def test_ruled_boxes_with_different_headers_are_not_read_box_by_box():
    """Boxes that do not repeat a header (a form of boxed lists) are not split into tables."""
    _, tables = _tables(_boxed_page([("Age", "Total"), ("Town", "Votes"), ("Item", "Count")])[0])
    assert len(tables) != 3


def test_numbers_set_close_in_two_columns_stay_two_cells():
    """A row whose number runs up to the next column's ("1,234 12.5" with a gap narrower than a cell
    gap) keeps one number per column: numbers do not span columns."""
    names = ["North", "South", "East", "West", "Centre", "Islands"]
    lines = [[(72, "Region"), (200, "Count"), (250, "Rate"), (320, "Note")]]
    lines += [[(72, n), (200, f"{100 + i}"), (250, f"{10 + i}.5"), (320, "ok")] for i, n in enumerate(names)]
    lines[3][1] = (222, "1,234")  # ends about 3 pt before the rate column
    (table,) = _tables(_page(lines)[0])[1]
    assert "1,234" in _texts(table) and "12.5" in _texts(table)
    assert not any(" " in t for t in _texts(table) if t[0].isdigit())


def test_a_number_and_its_unit_stay_one_cell():
    """Right-aligned numbers before the same lower-case unit ("1 years", "10 years") are one column;
    a code in capitals beside each number ("648765 AAA") still splits off."""

    def columns(right: str) -> list[tuple[float, float]]:
        words = []
        for i, a in enumerate([1, 5, 10, 15, 20, 40]):
            y = 100 + 14 * i
            words += [
                (90 - 5.56 * len(str(a)), y, 90.0, y + 12, str(a), 0, i, 0),
                (95.6, y, 120.0, y + 12, right, 0, i, 1),
            ]
        return split_columns(visual_rows(words), [(78, 120)])[1]

    assert columns("years") == [(78, 120)]
    assert len(columns("AAA")) == 2
