"""Ruled grids: a page's drawn rules → edges → crossings → cells → grids, with each cell's words.

The "lines" method of pdfplumber (and of PyMuPDF's ``find_tables``, which ports it), written
against the page's raw drawing list and MuPDF's word list instead of one Python object per
character: the same edges, tolerances and cell rules, at a fraction of the cost.

- Edges: axis-parallel lines, thin rectangles as one rule, other rectangles and quads as their
  four sides, closed paths closed; plus the outline of each group of touching drawings that
  holds text (so a table without outer side rules still gets its outer cells).
- Edges within ``SNAP`` points of each other are moved onto their mean position, collinear
  pieces that touch (``JOIN``) become one, and pieces shorter than ``MIN_EDGE`` are dropped.
- A crossing is where a vertical and a horizontal edge meet (``CROSS`` tolerance); a cell is
  the smallest rectangle whose four corners are crossings joined by edges; cells sharing a
  corner form one grid. A grid needs two distinct left and right cell edges and some text.
- Coordinates are of the displayed page (rotation applied), so rows and columns are those a
  reader sees; ``page_words`` returns words in the same space.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from operator import itemgetter

import pymupdf

from chandra_ocr.pdf.text_layer import TEXT_FLAGS

Box = tuple[float, float, float, float]  # x0, y0, x1, y1
Word = tuple  # MuPDF word: (x0, y0, x1, y1, text, block_no, line_no, word_no)
_Edge = tuple[float, float, float]  # (position across, start, end along)

MAX_ITEMS = 20_000  # more drawing items than this: a chart or map, not searched for tables
SNAP = 3.0  # points: parallel edges this close are snapped onto one position
JOIN = 3.0  # points: collinear edges with a gap this small are joined
MIN_EDGE = 3.0  # points: shorter edges are dropped (after joining)
CROSS = 3.0  # points: edges this close to each other cross
THIN = 3.0  # points: a rectangle this thin (and longer than thick) is one rule


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


def page_words(page: pymupdf.Page, textpage: pymupdf.TextPage | None = None) -> list[Word]:
    """The page's words in MuPDF's order, bboxes in displayed space (for ``find_grids``, ``cell_texts``).

    ``textpage``: the page's text extracted with ``TEXT_FLAGS``, if already at hand.
    """
    words = page.get_text("words", flags=TEXT_FLAGS, textpage=textpage)
    if not page.rotation:
        return words
    m = page.rotation_matrix
    return [(*_box(m, w[:4]), *w[4:]) for w in words]


@dataclass(frozen=True)
class Rules:
    """A page's drawn edges in displayed space, before snapping, and the boxes of its drawings."""

    h: list[_Edge]  # horizontal: (y, x0, x1)
    v: list[_Edge]  # vertical: (x, y0, y1)
    boxes: list[Box]  # each drawing's bounding box (for the outlines of touching drawings)
    area: Box  # the displayed page
    drawn_h: list[_Edge] = field(default_factory=list)  # horizontal rules: ``h`` less shading edges
    drawn_v: list[_Edge] = field(default_factory=list)  # vertical rules: ``v`` less shading edges


def drawn_rules(page: pymupdf.Page, paths: list[dict]) -> Rules | None:
    """The edges of ``paths`` (``page.get_cdrawings()``); None past ``MAX_ITEMS`` drawing items."""
    segments: list[tuple[float, float, float, float]] = []
    shading: list[tuple[float, float, float, float]] = []  # sides of filled, unstroked boxes
    n = 0
    for path in paths:
        items = path["items"]
        n += len(items)
        if n > MAX_ITEMS:
            return None
        if path.get("closePath") and items and items[0][0] == "l" and items[-1][0] == "l":
            items = [*items, ("l", items[-1][2], items[0][1])]
        sides = shading if path.get("type") == "f" else segments  # where a box's four sides go
        for item in items:
            kind = item[0]
            if kind == "l":
                segments.append((*item[1], *item[2]))
            elif kind == "re":
                x0, y0, x1, y1 = item[1]
                x0, x1 = (x0, x1) if x0 <= x1 else (x1, x0)
                y0, y1 = (y0, y1) if y0 <= y1 else (y1, y0)
                if x1 - x0 <= THIN and x1 - x0 < y1 - y0:  # a rule drawn as a thin rectangle
                    segments.append(((x0 + x1) / 2, y0, (x0 + x1) / 2, y1))
                elif y1 - y0 <= THIN and y1 - y0 < x1 - x0:
                    segments.append((x0, (y0 + y1) / 2, x1, (y0 + y1) / 2))
                else:
                    sides += _sides((x0, y0, x1, y1))
            elif kind == "qu":
                (ax, ay), (bx, by), (cx, cy), (dx, dy) = item[1]  # ul, ur, ll, lr
                segments += [(ax, ay, cx, cy), (cx, cy, dx, dy), (dx, dy, bx, by), (bx, by, ax, ay)]
    m = page.rotation_matrix if page.rotation else None
    if m is not None:
        segments = [(*_point(m, (ax, ay)), *_point(m, (bx, by))) for ax, ay, bx, by in segments]
        shading = [(*_point(m, (ax, ay)), *_point(m, (bx, by))) for ax, ay, bx, by in shading]
    area = tuple(page.rect)
    h, v = _axis_parallel(segments, area)
    shade_h, shade_v = _axis_parallel(shading, area)
    boxes = sorted({_box(m, p["rect"]) for p in paths}, key=lambda r: (r[3], r[0]))
    return Rules(h + shade_h, v + shade_v, boxes, area, h, v)


def has_cells(rules: Rules) -> bool:
    """Whether the drawn edges alone enclose at least two touching cells (the test before words are read)."""
    if len(rules.h) < 2 or len(rules.v) < 2 or len(rules.h) + len(rules.v) < 5:  # merging only drops edges
        return False
    h, v = merge_edges(rules.h), merge_edges(rules.v)
    if len(h) < 2 or len(v) < 2 or len(h) + len(v) < 5:  # two cells need 3 + 2 edges at least
        return False
    return any(len(cells) >= 2 for cells in _connected(_cells(_crossings(h, v))))


def find_grids(rules: Rules, words: list[Word], clip: Box | None = None) -> list[Grid]:
    """The ruled grids among ``rules`` (within ``clip``), top to bottom; ``words`` from ``page_words``."""
    area = rules.area if clip is None else clip
    h, v = rules.h, rules.v
    if clip is not None:
        words = [w for w in words if _centre_in(w, area)]
        h, v = _axis_parallel([(x0, y, x1, y) for y, x0, x1 in h] + [(x, y0, x, y1) for x, y0, y1 in v], area)
    outline_h, outline_v = _axis_parallel(
        [s for box in _outlines(rules.boxes, words) for s in _sides(box)], area
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
                        x0, y0, x1, y1 = _box(m, char["bbox"])
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


def _box(m: pymupdf.Matrix | None, r) -> Box:
    """Rectangle ``r`` (x0, y0, x1, y1) through ``m``, normalised."""
    if m is None:
        x0, y0, x1, y1 = r
    else:
        (x0, y0), (x1, y1) = _point(m, r[:2]), _point(m, r[2:])
    # min and max of two, without the calls (a hot loop); the same values, ties and NaNs included
    return (x1 if x1 < x0 else x0), (y1 if y1 < y0 else y0), (x1 if x1 > x0 else x0), (y1 if y1 > y0 else y0)


def _point(m: pymupdf.Matrix, p) -> tuple[float, float]:
    x, y = p
    return m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f


def _axis_parallel(
    segments: list[tuple[float, float, float, float]], area: Box
) -> tuple[list[_Edge], list[_Edge]]:
    """(horizontal, vertical) edges of the axis-parallel segments (within ``SNAP``), cut to ``area``."""
    ax0, ay0, ax1, ay1 = area
    h: list[_Edge] = []
    v: list[_Edge] = []
    for x0, y0, x1, y1 in segments:
        if x0 > x1:
            x0, x1 = x1, x0
        if y0 > y1:
            y0, y1 = y1, y0
        if (x1 - x0 > SNAP and y1 - y0 > SNAP) or x0 > ax1 or x1 < ax0 or y0 > ay1 or y1 < ay0:
            continue  # slanted, or outside
        x0, x1 = (x0 if x0 > ax0 else ax0), (x1 if x1 < ax1 else ax1)  # not max/min: hot loop
        y0, y1 = (y0 if y0 > ay0 else ay0), (y1 if y1 < ay1 else ay1)
        if y0 == y1:
            if x0 != x1:
                h.append((y0, x0, x1))
        else:
            v.append((x0, y0, y1))
    return h, v


def _sides(box: Box) -> list[tuple[float, float, float, float]]:
    """The four sides of a box as segments."""
    x0, y0, x1, y1 = box
    return [(x0, y0, x0, y1), (x0, y1, x1, y1), (x1, y1, x1, y0), (x1, y0, x0, y0)]


def _outlines(boxes: list[Box], words: list[Word]) -> list[Box]:
    """Bounding boxes of groups of drawings that touch (within ``SNAP``), where a group holds a word."""
    rects = list(boxes)
    out = []
    while rects:
        box = rects.pop(0)
        grown = True
        while grown:  # absorb every rectangle touching the growing box, until none is left
            grown = False
            for i in range(len(rects) - 1, -1, -1):
                if _neighbours(box, rects[i]):
                    r = rects.pop(i)
                    box = (min(box[0], r[0]), min(box[1], r[1]), max(box[2], r[2]), max(box[3], r[3]))
                    grown = True
        if any(_holds_a_character(box, w) for w in words):
            out.append(box)
    return out


def _holds_a_character(box, word: Word) -> bool:
    """Whether ``box`` holds at least one character's width of ``word`` (and its middle line)."""
    if not box[1] <= (word[1] + word[3]) / 2 <= box[3]:
        return False
    overlap = min(box[2], word[2]) - max(box[0], word[0])
    return overlap >= (word[2] - word[0]) / max(len(word[4]), 1)


def _neighbours(a, b) -> bool:
    """Whether a corner coordinate pair of one box lies within the other (widened by ``SNAP``)."""
    return _corner_in(a, b) or _corner_in(b, a)


def _corner_in(a, b) -> bool:
    in_x = b[0] - SNAP <= a[0] <= b[2] + SNAP or b[0] - SNAP <= a[2] <= b[2] + SNAP
    return in_x and (b[1] - SNAP <= a[1] <= b[3] + SNAP or b[1] - SNAP <= a[3] <= b[3] + SNAP)


def merge_edges(edges: list[_Edge]) -> list[_Edge]:
    """Edges snapped to shared positions, touching collinear pieces joined, short ones dropped."""
    if not edges:
        return []
    edges = sorted(edges)
    groups, group = [], [edges[0]]
    for e in edges[1:]:
        if e[0] <= group[-1][0] + SNAP:
            group.append(e)
        else:
            groups.append(group)
            group = [e]
    groups.append(group)
    out = []
    for group in groups:
        if len(group) == 1:  # most edges: nothing to snap or join
            at, start, end = group[0]
            if end - start >= MIN_EDGE:
                out.append((at, start, end))
            continue
        at = sum(e[0] for e in group) / len(group)
        along = sorted(group, key=itemgetter(1))
        _, start, end = along[0]
        for _, s, t in along[1:]:
            if s <= end + JOIN:
                end = max(end, t)
                continue
            if end - start >= MIN_EDGE:
                out.append((at, start, end))
            start, end = s, t
        if end - start >= MIN_EDGE:
            out.append((at, start, end))
    return out


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
    below: dict[float, list[float]] = defaultdict(list)  # x → ys of crossings, ascending
    right: dict[float, list[float]] = defaultdict(list)  # y → xs of crossings, ascending
    for x, y in sorted(corners):
        below[x].append(y)
        right[y].append(x)
    cells = []
    for x, y in sorted(corners):
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
            cells.append(cell)
    return cells


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
