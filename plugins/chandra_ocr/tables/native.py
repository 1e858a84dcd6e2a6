"""Ruled tables of born-digital pages (``tables/ruled_grid.py``) → ``Table``s (placed by ``tables/page.py``).

Tables drawn with lines (the "lines" method); tables without all rules: ``tables/stream.py``.

- A page is only searched when its drawn edges alone enclose two touching cells
  (``ruled_grid.has_cells``, before any word is read); pages with more than
  ``rules.MAX_ITEMS`` drawing items (charts, maps) are not searched.
- Cells are read from MuPDF's words (logical order, so right-to-left text reads as in the text
  layer); a word running across a cell border is split by its characters.
- Frames are not tables: a table whose area holds another table is dropped, and a table with
  one cell covering most of it (a frame around a ruled table) is replaced by the tables found
  inside that cell.
- Grids the text disagrees with are not tables (their words are left to ``tables/stream.py``):
  a drawn column no cell of which holds text (the boxes of a form), a grid of one or two rows
  with a cell of more than ``MAX_CELL_WORDS`` words, or any with a cell of twice that (a frame
  around running text, or boxes around many rows), and two cells
  of a grid row holding numbers on ``STACKED`` lines or more (or ``PAIRED`` cells, half of the
  row's, on two lines), or a cell with two lines ending in dot leaders (rules only every few
  rows: the rows are the text's).
- Sparse grids are not tables: fewer than ``MIN_FILL`` cells with text per grid position is
  the boxes of a diagram (callouts with arrows), kept as text.
- Merged cells keep their spans: a cell's ``rowspan``/``colspan`` are the grid rows and columns
  its rectangle covers. ``markup.table_from_rows`` builds the table (and its HTML) with the
  header rules and limits of model output; ``source`` is "native".
- Bboxes are in points of the displayed page (rotation applied), like every block; rows and
  columns are those of the displayed page.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import defaultdict

import pymupdf

from chandra_ocr.document import BBoxPt, Table
from chandra_ocr.errors import ParseError
from chandra_ocr.tables.markup import table_from_rows
from chandra_ocr.tables.ruled_grid import Grid, cell_at, cell_texts, find_grids, has_cells
from chandra_ocr.tables.rules import Box, Rules, Word, drawn_rules, page_words

FRAME_SHARE = 0.5  # one cell covering more than this share of its table: a frame around other content
MIN_FILL = 0.3  # fewer cells with text per grid position: boxes of a diagram, not a table
STACKED = 3  # numbers on this many lines of one cell, in two cells of a grid row: rows the rules miss
PAIRED = 3  # cells of a grid row, half of its filled cells at least, with numbers on two lines: rows
MAX_CELL_WORDS = 40  # a grid of one or two rows with a cell this long frames running text
_LEADER_END = re.compile(r"(?:\.\s?){4,}$|…{2,}$")
_NUMBER = re.compile(r"[-+±−–(]?\s*[$€£¥]?\s*\d[\d\s,.]*%?\)?\*?")
UNMERGE_ROWS = 4  # a one-column cell spanning this many grid rows with one text line per row is split
UNMERGE_COLS = 3  # a one-row cell spanning this many grid columns with words in each, apart, is split
_TOL = 1.0  # points: cell edges this close to a grid line are on it


def native_tables(page: pymupdf.Page, textpage: pymupdf.TextPage | None = None) -> list[Table]:
    """The ruled tables of ``page`` in reading order (top to bottom), numbered from 1; [] when none.

    ``textpage``: the page's text extracted with ``text_layer.TEXT_FLAGS``, if already at hand.
    """
    rules = drawn_rules(page, page.get_cdrawings())
    if rules is None or not has_cells(rules):
        return []
    return [t for t, _ in ruled_tables(page, rules, page_words(page, textpage))]


def ruled_tables(page: pymupdf.Page, rules: Rules, words: list[Word]) -> list[tuple[Table, frozenset[int]]]:
    """(table, indices of the ``words`` in its cells) for each ruled table, top to bottom, numbered from 1.

    ``rules``: the page's ``drawn_rules`` (with cells: ``has_cells``); ``words``: its ``page_words``.
    """
    found = [
        (g, texts)
        for g in (_unmerged(g, words) for g in _grids_in(rules, words, None))
        if g.row_count >= 2 and g.col_count >= 2  # 2 × 2 at least (most grids of shaded rows are one row)
        if _filled(texts := _texts(g, words, page)) and _agrees(g, texts, words)
    ]
    tables: list[tuple[Table, frozenset[int]]] = []
    for g, texts, n_rows in sorted(_untangle(found), key=lambda f: (round(f[0].bbox[1]), f[0].bbox[0])):
        try:
            table = _to_table(g, texts[:n_rows], len(tables) + 1)
        except ParseError:
            continue  # no cell text at all
        if sum(1 for c in table.cells if c.text) >= MIN_FILL * table.n_rows * table.n_cols:
            tables.append((table, _words_in(g, n_rows, words)))
    return tables


def _words_in(g: Grid, n_rows: int, words: list[Word]) -> frozenset[int]:
    """Indices of the words whose centre is in one of the first ``n_rows`` rows' cells."""
    bottom = g.row_tops[n_rows] if n_rows < g.row_count else g.bbox[3]
    inner = Grid(g.cells, (*g.bbox[:3], bottom), g.rows[:n_rows], g.row_tops[:n_rows], g.col_lefts)
    return frozenset(
        i for i, w in enumerate(words) if cell_at(inner, (w[0] + w[2]) / 2, (w[1] + w[3]) / 2) is not None
    )


def _grids_in(rules: Rules, words: list[Word], clip: Box | None, depth: int = 0) -> list[Grid]:
    """Ruled grids (within ``clip``), frames replaced by the grids inside them (a frame no column edge
    runs through holds none: ``Rules.divided``)."""
    out = []
    for g in find_grids(rules, words, clip):
        frame = _frame_cell(g)
        searched = frame is not None and depth < 2 and rules.divided(frame)
        inner = _grids_in(rules, words, frame, depth + 1) if searched else []
        out.extend(inner or [g])
    return out


def _unmerged(g: Grid, words: list[Word]) -> Grid:
    """``g`` with cells that are not merged split by the grid (the rules stop short of them):

    - a one-column cell spanning ``UNMERGE_ROWS`` grid rows or more whose text lines stand one per
      grid row in most of them (a stub column of row labels beside a ruled body);
    - a one-row cell spanning ``UNMERGE_COLS`` grid columns or more whose words stand in most of
      its columns, a cell gap apart (the unshaded rows of a table shaded every other row).
    """
    split: dict[Box, tuple[int, int, list[Box], bool]] = {}  # (row, column, parts, split into rows)
    for i, row in enumerate(g.rows):
        for j, cell in enumerate(row):
            if cell is None:
                continue
            n_rows, n_cols = _covered(g.row_tops, i, cell[3]), _covered(g.col_lefts, j, cell[2])
            if n_cols == 1 and n_rows >= UNMERGE_ROWS:
                inside = _words_of(g, cell, words)
                lines = {round((w[1] + w[3]) / 2) for w in inside}
                hit = {bisect.bisect_right(g.row_tops, y) - 1 for y in lines}
                if len(hit) == len(_merged_lines(lines)) >= 0.8 * n_rows:
                    tops = g.row_tops[i : i + n_rows]
                    ends = [*tops[1:], cell[3]]
                    parts = [(cell[0], t, cell[2], e) for t, e in zip(tops, ends, strict=True)]
                    split[cell] = (i, j, parts, True)
            elif n_rows == 1 and n_cols >= UNMERGE_COLS and _one_per_column(g, j, n_cols, cell, words):
                lefts = g.col_lefts[j : j + n_cols]
                rights = [*lefts[1:], cell[2]]
                parts = [(x0, cell[1], x1, cell[3]) for x0, x1 in zip(lefts, rights, strict=True)]
                split[cell] = (i, j, parts, False)
    if not split:
        return g
    rows = [list(r) for r in g.rows]
    for i, j, parts, by_rows in split.values():
        for k, part in enumerate(parts):
            rows[i + k if by_rows else i][j if by_rows else j + k] = part
    cells = [c for c in g.cells if c not in split] + [p for _, _, parts, _ in split.values() for p in parts]
    return dataclasses.replace(g, cells=cells, rows=rows)


def _words_of(g: Grid, cell: Box, words: list[Word]) -> list[Word]:
    """The words whose centre is in ``cell`` (the box test first: most words are far from it)."""
    x0, y0, x1, y1 = cell
    near = [w for w in words if x0 <= (w[0] + w[2]) / 2 < x1 and y0 <= (w[1] + w[3]) / 2 < y1]
    return [w for w in near if cell_at(g, (w[0] + w[2]) / 2, (w[1] + w[3]) / 2) == cell]


def _one_per_column(g: Grid, j: int, n: int, cell: Box, words: list[Word]) -> bool:
    """Whether the words of ``cell`` (grid columns ``j`` to ``j + n``) each lie inside one column, in
    most of its columns, words in different columns a cell gap (their height) apart."""
    inside = sorted(_words_of(g, cell, words), key=lambda w: w[0])
    if not inside:
        return False
    edges = [*g.col_lefts[j : j + n], cell[2]]
    cols = []
    for w in inside:
        k = bisect.bisect_right(edges, (w[0] + w[2]) / 2) - 1
        if not (edges[k] - _TOL <= w[0] and w[2] <= edges[k + 1] + _TOL):
            return False
        cols.append(k)
    for a, b, ka, kb in zip(inside, inside[1:], cols, cols[1:], strict=False):
        if ka != kb and b[0] - a[2] < b[3] - b[1]:
            return False
    return len(set(cols)) >= 0.8 * n


def _merged_lines(ys: set[int]) -> list[int]:
    """Line middles (rounded) with those within two points of the one before counted once."""
    out: list[int] = []
    for y in sorted(ys):
        if not out or y - out[-1] > 2:
            out.append(y)
    return out


def _frame_cell(g: Grid) -> Box | None:
    """The one cell covering most of grid ``g`` (a frame around other content), else None."""
    area = _area(g.bbox)
    for cell in g.cells:
        if area and _area(cell) > FRAME_SHARE * area:
            return cell
    return None


def _area(box: Box) -> float:
    """The area of ``box`` (0 when empty), as ``abs(pymupdf.Rect(box))`` gives it for a box on the page,
    without making a ``Rect`` (a grid's every cell is measured)."""
    x0, y0, x1, y1 = box
    return 0.0 if x0 >= x1 or y0 >= y1 else (x1 - x0) * (y1 - y0)


def _texts(g: Grid, words: list[Word], page: pymupdf.Page) -> list[list[str]]:
    """Each grid position's text, whitespace collapsed ("" where a merged cell covers it).

    MuPDF's words are in logical order, so right-to-left cells read like the text layer's blocks.
    """
    return [[" ".join((text or "").split()) for text in row] for row in cell_texts(g, words, page)]


def _filled(texts: list[list[str]]) -> bool:
    """Two cells holding text at least."""
    return sum(1 for row in texts for text in row if text) >= 2


def _agrees(g: Grid, texts: list[list[str]], words: list[Word]) -> bool:
    """Whether a grid is a table the text agrees with (module docstring: forms, boxes, missing row rules)."""
    for j in range(g.col_count):
        starts = [texts[i][j] for i, row in enumerate(g.rows) if row[j] is not None]
        if len(starts) >= 2 and not any(starts):
            return False  # a drawn column never filled: the boxes of a form
    longest = max(len(t.split()) for row in texts for t in row)
    if longest > 2 * MAX_CELL_WORDS or (g.row_count < 3 and longest > MAX_CELL_WORDS):
        return False  # a frame around running text, or boxes around many rows
    lines: dict[Box, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for w in words:
        y = (w[1] + w[3]) / 2
        cell = cell_at(g, (w[0] + w[2]) / 2, y)
        if cell is not None:
            lines[cell][round(y / max(w[3] - w[1], 1.0) * 2)].append(w[4])
    stacked: dict[float, int] = defaultdict(int)  # grid row top → cells with numbers stacked in them
    paired: dict[float, int] = defaultdict(int)  # grid row top → cells with numbers on two lines or more
    filled: dict[float, int] = defaultdict(int)  # grid row top → cells with words
    for cell, by_line in lines.items():
        filled[cell[1]] += 1
        texts_of = [" ".join(ws) for ws in by_line.values()]
        if sum(1 for t in texts_of if _LEADER_END.search(t)) >= 2:
            return False  # items with dot leaders on two lines of one cell: rows without rules
        numbers = sum(1 for t in texts_of if _NUMBER.fullmatch(t))
        stacked[cell[1]] += numbers >= STACKED
        paired[cell[1]] += numbers >= 2
    if any(n >= PAIRED and 2 * n >= filled[top] for top, n in paired.items()):
        return False  # most cells of a grid row hold numbers on two lines: a rule every two rows
    return max(stacked.values(), default=0) < 2  # else: rows without rules between them


def _untangle(found: list[tuple[Grid, list[list[str]]]]) -> list[tuple[Grid, list[list[str]], int]]:
    """(grid, texts, rows to keep) with nesting resolved.

    A grid holding another one is a frame when the inner grid fills most of it (dropped);
    otherwise it is a table whose ruling ran on into the next table: it keeps its rows ending
    above the inner grid's top (a row reaching down to it framed the text between the tables).
    """
    boxes = [pymupdf.Rect(g.bbox) for g, _ in found]
    out = []
    for i, (g, texts) in enumerate(found):
        inner = [b for j, b in enumerate(boxes) if j != i and _holds(boxes[i], b)]
        if any(abs(b) > FRAME_SHARE * abs(boxes[i]) for b in inner):
            continue
        top = min((b.y0 for b in inner), default=float("inf"))
        n_rows = 0  # the rows ending above the inner grid (a row running over it holds the text between)
        while n_rows < g.row_count and _bottom(g, n_rows) <= top + _TOL:
            n_rows += 1
        if n_rows >= 2:
            out.append((g, texts, n_rows))
    return out


def _bottom(g: Grid, row: int) -> float:
    """The lowest bottom of the cells starting in grid row ``row``."""
    return max((c[3] for c in g.rows[row] if c), default=g.row_tops[row])


def _holds(outer: pymupdf.Rect, inner: pymupdf.Rect) -> bool:
    """Whether ``outer`` (give or take a point) holds ``inner`` and is larger."""
    return (outer + (-_TOL, -_TOL, _TOL, _TOL)).contains(inner) and abs(inner) < abs(outer)


def _to_table(g: Grid, texts: list[list[str]], table_no: int) -> Table:
    """One grid → ``Table`` with spans (source "native", bbox in displayed space)."""
    rows = [
        [
            (texts[i][j], _covered(g.row_tops, i, rect[3]), _covered(g.col_lefts, j, rect[2]))
            for j, rect in enumerate(row)
            if rect is not None
        ]
        for i, row in enumerate(g.rows[: len(texts)])
    ]
    bottom = max(_bottom(g, i) for i in range(len(texts)))  # rows cut above a table inside it
    return table_from_rows(rows, table_no=table_no, bbox=_rounded((*g.bbox[:3], bottom)))


def _covered(starts: list[float], first: int, end: float) -> int:
    """Grid rows/columns from index ``first`` that start before ``end`` (the span of a cell)."""
    n = 1
    while first + n < len(starts) and starts[first + n] < end - _TOL:
        n += 1
    return n


def _rounded(bbox: Box) -> BBoxPt:
    x0, y0, x1, y1 = bbox
    return (round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2))
