"""The gate of native table search on drawn pages: which rule patterns enclose two touching cells."""

from __future__ import annotations

import pymupdf
import pytest

from chandra_ocr.tables.ruled_grid import has_cells
from chandra_ocr.tables.rules import drawn_rules


def _page(draw) -> pymupdf.Page:
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=400)
    draw(page)
    return page


def _grid(page, rows: int, cols: int, x0=50, y0=50, w=60, h=20, as_pieces=False):
    for r in range(rows + 1):
        page.draw_line((x0, y0 + r * h), (x0 + cols * w, y0 + r * h))
    for c in range(cols + 1):
        if as_pieces:  # one short stroke per row, as some generators draw them
            for r in range(rows):
                page.draw_line((x0 + c * w, y0 + r * h), (x0 + c * w, y0 + (r + 1) * h))
        else:
            page.draw_line((x0 + c * w, y0), (x0 + c * w, y0 + rows * h))


@pytest.mark.parametrize(
    ("draw", "expected"),
    [
        (lambda p: _grid(p, 2, 2), True),
        (lambda p: _grid(p, 3, 1), True),  # one column, three rows: still two cells
        (lambda p: _grid(p, 4, 3, as_pieces=True), True),  # vertical rules drawn per row, joined
        (lambda p: [p.draw_rect((50 + 60 * c, 50, 110 + 60 * c, 70)) for c in range(3)], True),  # boxed cells
        (lambda p: p.draw_rect((50, 50, 300, 300)), False),  # a frame: one cell
        (lambda p: [p.draw_line((50, y), (350, y)) for y in (50, 100, 150)], False),  # rules, no verticals
        (lambda p: [p.draw_rect((50, 50 + 80 * i, 150, 100 + 80 * i)) for i in range(3)], False),  # apart
        (lambda p: None, False),
    ],
)
def test_grid_gate(draw, expected):
    page = _page(draw)
    assert has_cells(drawn_rules(page, page.get_cdrawings())) is expected
