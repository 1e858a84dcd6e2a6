"""Ruled grids: a page's drawn rules → edges → crossings → cells → grids, with each cell's words.

The "lines" method of pdfplumber (and of PyMuPDF's ``find_tables``, which ports it), written
against the page's raw drawing list and MuPDF's word list instead of one Python object per
character: the same edges, tolerances and cell rules, at a fraction of the cost.

- Edges: the page's drawn rules (``tables/rules.py``), plus the outline of each group of
  touching drawings that holds text (so a table without outer side rules still gets its outer
  cells), snapped and joined by ``rules.merge_edges``.
- A crossing is where a vertical and a horizontal edge meet (``CROSS`` tolerance); a cell is
  the smallest rectangle whose four corners are crossings joined by edges; cells sharing a
  corner form one grid. A grid needs two distinct left and right cell edges and some text.
- Coordinates are of the displayed page (rotation applied), as ``rules.page_words`` gives words.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pymupdf

from chandra_ocr.pdf.text_layer import TEXT_FLAGS
from chandra_ocr.tables.rules import (
    Box,
    Rules,
    Word,
    axis_parallel,
    box_sides,
    merge_edges,
    transformed_box,
)

CROSS = 3.0  # points: edges this close to each other cross


@dataclass(frozen=True)
class Grid:
    """One ruled grid: its cells, and the cells by grid position (None where a merged cell covers it)."""

    cells: list[Box]
    bbox: Box
    rows: list[list[Box | None]]  # grid rows top to bottom, one entry per grid column
    row_tops: list[float]  # the top of each grid row
    col_lefts: list[float]  # the left side of each grid column

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def col_count(self) -> int:
        return len(self.col_lefts)


def has_cells(rules: Rules) -> bool:
    """Whether the drawn edges alone enclose at least two touching cells (the test before words are read)."""
    if len(rules.h) < 2 or len(rules.v) < 2 or len(rules.h) + len(rules.v) < 5:  # merging only drops edges
        return False
    h, v = merge_edges(rules.h), merge_edges(rules.v)
    if len(h) < 2 or len(v) < 2 or len(h) + len(v) < 5:  # two cells need 3 + 2 edges at least
        return False
    seen: set[tuple[float, float]] = set()  # the corners of the cells so far: two cells touch at one
    for x0, y0, x1, y1 in _each_cell(_crossings(h, v)):
        corners = ((x0, y0), (x0, y1), (x1, y0), (x1, y1))
        if not seen.isdisjoint(corners):
            return True
        seen.update(corners)
    return False


def find_grids(rules: Rules, words: list[Word], clip: Box | None = None) -> list[Grid]:
    """The ruled grids among ``rules`` (within ``clip``), top to bottom; ``words`` from ``page_words``."""
    area = rules.area if clip is None else clip
    h, v = rules.h, rules.v
    if clip is not None:
        words = [w for w in words if _centre_in(w, area)]
        h, v = axis_parallel([(x0, y, x1, y) for y, x0, x1 in h] + [(x, y0, x, y1) for x, y0, y1 in v], area)
    outline_h, outline_v = axis_parallel(
        [s for box in _outlines(rules.groups, words) for s in box_sides(box)], area
    )
    h, v = merge_edges(h + outline_h), merge_edges(v + outline_v)
    grids = [_grid(cells) for cells in _connected(_cells(_crossings(h, v)))]
    grids = [g for g in grids if _two_columns(g) and _has_text(g.bbox, words)]
    return sorted(grids, key=lambda g: (g.bbox[1], g.bbox[0]))


def cell_texts(grid: Grid, words: list[Word], page: pymupdf.Page) -> list[list[str | None]]:
    """The text of each grid position (None where a merged cell covers it).

    A word belongs to the cell holding its centre; words keep MuPDF's order. A word that runs
    across a cell border (text overflowing into the next cell with no space between) is split
    by its characters' centres, as a character-based reader would.
    """
    found: dict[Box, list[tuple[tuple, str]]] = defaultdict(list)
    crossing = []
    for w in words:
        cell = cell_at(grid, (w[0] + w[2]) / 2, (w[1] + w[3]) / 2)
        if cell is None:
            continue
        if _crosses(w, cell):
            crossing.append(w)
        else:
            found[cell].append((_order(w), w[4]))
    chars = _chars(page, crossing) if crossing else []
    for w in crossing:
        for n, (piece_cell, text) in enumerate(_runs(grid, w, chars)):
            found[piece_cell].append(((*_order(w), n), text))
    return [
        [None if c is None else " ".join(text for _, text in sorted(found.get(c, ()))) for c in row]
        for row in grid.rows
    ]


def _crosses(word: Word, cell: Box) -> bool:
    """Whether ``word`` reaches more than half a character past the left or right side of ``cell``."""
    reach = (word[2] - word[0]) / max(len(word[4]), 1) / 2
    return word[0] < cell[0] - reach or word[2] > cell[2] + reach


def cell_at(grid: Grid, x: float, y: float) -> Box | None:
    """The cell of ``grid`` holding point (x, y), if any."""
    x0, y0, x1, y1 = grid.bbox
    if not (x0 <= x < x1 and y0 <= y < y1):
        return None
    row = bisect.bisect_right(grid.row_tops, y) - 1
    for i in range(row, -1, -1):  # a merged cell starting in an earlier row may hold it
        for c in grid.rows[i]:
            if c and c[0] <= x < c[2] and c[1] <= y < c[3]:
                return c
    return None


def _chars(page: pymupdf.Page, words: list[Word]) -> list[tuple[float, float, str]]:
    """(x, y, character) of the page's characters under ``words``: centres in displayed space, one
    MuPDF pass over the area the words cover."""
    m = page.rotation_matrix if page.rotation else None
    area = pymupdf.Rect(
        min(w[0] for w in words), min(w[1] for w in words), max(w[2] for w in words), max(w[3] for w in words)
    )
    if m is not None:
        area = area * page.derotation_matrix
    out = []
    for block in page.get_text("rawdict", clip=area, flags=TEXT_FLAGS)["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                for char in span["chars"]:
                    if not char["c"].isspace():
                        x0, y0, x1, y1 = transformed_box(m, char["bbox"])
                        out.append(((x0 + x1) / 2, (y0 + y1) / 2, char["c"]))
    return out


def _runs(grid: Grid, word: Word, chars: list[tuple[float, float, str]]) -> list[tuple[Box, str]]:
    """(cell, text) runs of ``word``'s characters, each character in the cell holding its centre."""
    runs: list[tuple[Box, str]] = []
    for cx, cy, c in chars:
        if not (word[0] <= cx <= word[2] and word[1] <= cy <= word[3]):
            continue
        cell = cell_at(grid, cx, cy)
        if cell is None:
            continue
        if runs and runs[-1][0] == cell:
            runs[-1] = (cell, runs[-1][1] + c)
        else:
            runs.append((cell, c))
    return runs


def _order(word: Word) -> tuple[int, int, int]:
    return word[5], word[6], word[7]


def _centre_in(word: Word, box: Box) -> bool:
    cx, cy = (word[0] + word[2]) / 2, (word[1] + word[3]) / 2
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]


def _outlines(groups: list[Box], words: list[Word]) -> list[Box]:
    """The boxes of ``groups`` (``Rules.groups``: touching drawings) that hold a word."""
    by_middle = sorted(((w[1] + w[3]) / 2, i) for i, w in enumerate(words))
    middles = [y for y, _ in by_middle]
    out = []
    for box in groups:
        lo, hi = bisect.bisect_left(middles, box[1]), bisect.bisect_right(middles, box[3])
        if any(_holds_a_character(box, words[i]) for _, i in by_middle[lo:hi]):
            out.append(box)
    return out


def _holds_a_character(box, word: Word) -> bool:
    """Whether ``box`` holds at least one character's width of ``word`` (its middle is within its height)."""
    overlap = min(box[2], word[2]) - max(box[0], word[0])
    return overlap >= (word[2] - word[0]) / max(len(word[4]), 1)


_Corners = dict[tuple[float, float], tuple[set[int], set[int]]]  # (x, y) → (vertical ids, horizontal ids)


def _crossings(h: list[tuple], v: list[tuple]) -> _Corners:
    """Every point where a vertical edge meets a horizontal one, with the edges through it."""
    corners: _Corners = {}
    by_y = sorted(range(len(h)), key=lambda i: h[i][0])
    ys = [h[i][0] for i in by_y]
    for j, (x, y0, y1) in enumerate(v):
        for k in range(bisect.bisect_left(ys, y0 - CROSS), bisect.bisect_right(ys, y1 + CROSS)):
            i = by_y[k]
            y, hx0, hx1 = h[i]
            if hx0 - CROSS <= x <= hx1 + CROSS:
                vs, hs = corners.setdefault((x, y), (set(), set()))
                vs.add(j)
                hs.add(i)
    return corners


def _cells(corners: _Corners) -> list[Box]:
    """For each crossing, the smallest cell with it as top-left corner (others linked by edges)."""
    return list(_each_cell(corners))


def _each_cell(corners: _Corners) -> Iterator[Box]:
    """The cells of ``_cells`` one by one, in the order of their top-left corners."""
    below: dict[float, list[float]] = defaultdict(list)  # x → ys of crossings, ascending
    right: dict[float, list[float]] = defaultdict(list)  # y → xs of crossings, ascending
    order = sorted(corners)
    for x, y in order:
        below[x].append(y)
        right[y].append(x)
    for x, y in order:
        vs, hs = corners[(x, y)]
        cell = None
        for y2 in below[x][bisect.bisect_right(below[x], y) :]:
            if not vs & corners[(x, y2)][0]:
                continue
            for x2 in right[y][bisect.bisect_right(right[y], x) :]:
                if not hs & corners[(x2, y)][1]:
                    continue
                br = corners.get((x2, y2))
                if br is not None and br[0] & corners[(x2, y)][0] and br[1] & corners[(x, y2)][1]:
                    cell = (x, y, x2, y2)
                    break
            if cell:
                break
        if cell:
            yield cell


def _connected(cells: list[Box]) -> list[list[Box]]:
    """Cells grouped by shared corners."""
    parent = list(range(len(cells)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[float, float], int] = {}
    for i, (x0, y0, x1, y1) in enumerate(cells):
        for corner in ((x0, y0), (x0, y1), (x1, y0), (x1, y1)):
            j = owner.setdefault(corner, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[Box]] = defaultdict(list)
    for i, cell in enumerate(cells):
        groups[find(i)].append(cell)
    return list(groups.values())


def _grid(cells: list[Box]) -> Grid:
    """A grid from its cells: rows by top edge, columns by left edge."""
    cells = sorted(cells, key=lambda c: (c[1], c[0]))
    xs = sorted({c[0] for c in cells})
    rows: list[list[Box | None]] = []
    tops: list[float] = []
    for c in cells:
        if not tops or c[1] != tops[-1]:
            tops.append(c[1])
            rows.append([None] * len(xs))
        rows[-1][bisect.bisect_left(xs, c[0])] = c
    bbox = (min(c[0] for c in cells), cells[0][1], max(c[2] for c in cells), max(c[3] for c in cells))
    return Grid(cells, bbox, rows, tops, xs)


def _two_columns(grid: Grid) -> bool:
    return len({c[0] for c in grid.cells}) >= 2 and len({c[2] for c in grid.cells}) >= 2


def _has_text(box: Box, words: list[Word]) -> bool:
    x0, y0, x1, y1 = box
    return any(w[0] < x1 and w[2] > x0 and w[1] < y1 and w[3] > y0 for w in words)
