"""The ruled-grid reader on drawn pages: rotation, side rules left out, text overflowing a cell; the
outlines of touching drawings."""

from __future__ import annotations

import pymupdf
from hypothesis import given, settings
from hypothesis import strategies as st

from chandra_ocr.tables.native import native_tables
from chandra_ocr.tables.ruled_grid import find_grids
from chandra_ocr.tables.rules import Box, drawn_rules, page_words, touching, touching_groups

X0, Y0, W, H = 60, 80, 90, 24  # grid origin, column width, row height (points)


def _table(page: pymupdf.Page, texts: list[list[str]], *, side_rules: bool = True) -> None:
    """Draw a ruled table with ``texts`` (rows of cells) at (X0, Y0)."""
    rows, cols = len(texts), len(texts[0])
    for r in range(rows + 1):
        page.draw_line((X0, Y0 + r * H), (X0 + cols * W, Y0 + r * H))
    for c in range(cols + 1) if side_rules else range(1, cols):
        page.draw_line((X0 + c * W, Y0), (X0 + c * W, Y0 + rows * H))
    for r, row in enumerate(texts):
        for c, text in enumerate(row):
            page.insert_text((X0 + c * W + 4, Y0 + r * H + 16), text, fontsize=10)


def _cells(table) -> list[list[str]]:
    grid = [[""] * table.n_cols for _ in range(table.n_rows)]
    for cell in table.cells:
        grid[cell.row][cell.col] = cell.text
    return grid


TEXTS = [["Name", "Town", "Count"], ["Alder", "Leeds", "12"]]


def test_an_upright_table_reads_row_by_row():
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, TEXTS)
    (table,) = native_tables(page)
    assert _cells(table) == TEXTS
    assert table.bbox == (X0, Y0, X0 + 3 * W, Y0 + 2 * H)


def test_a_rotated_page_gives_the_table_a_reader_sees():
    """A page shown turned by 90°: rows and columns are those of the displayed page, and the
    bbox is in displayed space like every block's."""
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, TEXTS)
    page.set_rotation(90)
    (table,) = native_tables(page)
    assert (table.n_rows, table.n_cols) == (3, 2)  # drawn as 2 × 3, displayed turned
    expected = pymupdf.Rect(X0, Y0, X0 + 3 * W, Y0 + 2 * H) * page.rotation_matrix
    assert pymupdf.Rect(table.bbox) == pymupdf.Rect([round(v, 2) for v in expected])
    assert page.rect.contains(pymupdf.Rect(table.bbox))
    assert sorted(c.text for c in table.cells) == sorted(t for row in TEXTS for t in row)


def test_outer_columns_without_side_rules_are_closed_by_the_drawing_outline():
    """Only inner vertical rules: the outline of the touching rules (which holds text) closes the
    outer columns, as in PyMuPDF's finder."""
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, TEXTS, side_rules=False)
    (table,) = native_tables(page)
    assert _cells(table) == TEXTS


def test_a_word_running_into_the_next_cell_is_split_at_the_rule():
    """Text overflowing its cell, with no space before the next cell's text, is one MuPDF word;
    its characters go to the cell holding their centre."""
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, [["Name", "Number"], ["x", "y"]])
    first, second = "Elizabeth", "2165"
    start = X0 + W - pymupdf.get_text_length(first, fontsize=10)  # second part starts at the rule
    page.insert_text((start, Y0 + 2 * H + 16), first + second, fontsize=10)
    page.draw_line((X0, Y0 + 3 * H), (X0 + 2 * W, Y0 + 3 * H))
    page.draw_line((X0, Y0 + 2 * H), (X0, Y0 + 3 * H))
    page.draw_line((X0 + W, Y0 + 2 * H), (X0 + W, Y0 + 3 * H))
    page.draw_line((X0 + 2 * W, Y0 + 2 * H), (X0 + 2 * W, Y0 + 3 * H))
    assert [w[4] for w in page_words(page) if w[4].startswith(first)] == [first + second]
    (table,) = native_tables(page)
    assert _cells(table)[2] == [first, second]


def test_a_grid_without_text_is_no_table():
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, [["", ""], ["", ""]])
    assert find_grids(drawn_rules(page, page.get_cdrawings()), page_words(page)) == []


def _groups_looking_at_every_box(boxes: list[Box]) -> list[Box]:
    """The groups of ``touching_groups`` by its definition: every box left looked at in each pass."""
    left, out = list(boxes), []
    while left:
        box = left.pop(0)
        grown = True
        while grown:
            grown = False
            for i in range(len(left) - 1, -1, -1):
                if touching(box, left[i]):
                    r = left.pop(i)
                    box = (min(box[0], r[0]), min(box[1], r[1]), max(box[2], r[2]), max(box[3], r[3]))
                    grown = True
        out.append(box)
    return out


_coord = st.floats(-50, 650, allow_nan=False).map(lambda v: round(v, 1))
_box = st.tuples(_coord, _coord, st.floats(0, 120), st.floats(0, 120)).map(
    lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3])
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_box, max_size=40))
def test_touching_groups_are_those_of_looking_at_every_box(boxes):
    # Bands only skip boxes too far to touch: boxes off the page (-50…770 against 0…600) included.
    assert touching_groups(boxes, (0.0, 0.0, 600.0, 600.0)) == _groups_looking_at_every_box(boxes)


def test_touching_drawings_make_one_outline_per_group():
    shading = [(60.0, 80.0 + 12 * r, 300.0, 92.0 + 12 * r) for r in range(30)]  # rows drawn edge to edge
    apart = (400.0, 600.0, 450.0, 650.0)
    assert touching_groups([*shading, apart], (0.0, 0.0, 612.0, 792.0)) == [(60.0, 80.0, 300.0, 440.0), apart]


def test_white_text_boxes_in_a_ruled_cell_draw_no_rules():
    """A header cell filled white with a white text box per line in it (a word processor's text
    boxes): white on white, the boxes' sides are no rules, so the cell keeps both lines."""
    page = pymupdf.open().new_page(width=400, height=300)
    _table(page, [["Name", ""], ["Alder", "12"]])
    top = Y0 + 1
    page.draw_rect((X0 + W + 1, top, X0 + 2 * W - 1, Y0 + H - 1), color=None, fill=(1, 1, 1))
    for n, line in enumerate(["Read &", "Write"]):
        page.draw_rect(
            (X0 + W + 3, top + 1 + 11 * n, X0 + 2 * W - 3, top + 11 + 11 * n), color=None, fill=(1, 1, 1)
        )
        page.insert_text((X0 + W + 4, top + 9 + 11 * n), line, fontsize=8)
    (table,) = native_tables(page)
    assert _cells(table) == [["Name", "Read & Write"], ["Alder", "12"]]


def test_a_frame_is_searched_inside_only_where_a_column_edge_runs_through_it():
    """A grid row whose wide label cell frames nothing (one shaded row of a filing's table) is not
    searched inside; a frame around a ruled table is, and its table comes back."""
    page = pymupdf.open().new_page(width=612, height=792)
    for x0, x1 in [(40, 400), (400, 480), (480, 560)]:  # one shaded row: a wide label cell, two value cells
        page.draw_rect((x0, 600, x1, 614), color=None, fill=(0.9, 0.9, 0.9))
    page.insert_text((44, 611), "Net revenue", fontsize=9)
    page.insert_text((404, 611), "1,204", fontsize=9)
    page.insert_text((484, 611), "1,105", fontsize=9)
    page.draw_rect((X0 - 20, Y0 - 20, X0 + 2 * W + 20, Y0 + 2 * H + 20))  # a frame around a ruled table
    _table(page, [["Name", "Count"], ["Alder", "12"]])
    rules = drawn_rules(page, page.get_cdrawings())
    assert not rules.divided((40.0, 600.0, 400.0, 614.0))
    assert rules.divided((X0 - 20, Y0 - 20, X0 + 2 * W + 20, Y0 + 2 * H + 20))
    (table,) = native_tables(page)
    assert _cells(table) == [["Name", "Count"], ["Alder", "12"]]
