"""Header rows of tables read from text lines (``stream.py``, ``partly_ruled.py``): lines → levels.

A header set in text is a stack of visual lines; its structure is a few levels of labels:

- Group labels: a label with a drawn rule right under it spans the columns the rule covers (some,
  not all), when it is the only label of its line over them ("Total" over "PK–12", "PK–8",
  "9–12").
- Cells: in each column, the header's lines set close together (a gap under ``WRAP_GAP`` × the
  line height, the other columns' lines not counted) with no drawn rule between them there, and
  as wide in columns, are the wrapped lines of one label: one cell, its lines joined ("Percentage
  of" / "international" / "coverage"; a stub head's "Age" / "group" / "(yrs)" set between two
  levels of column labels). A wider gap, a rule, or a label over more columns starts the next cell.
- Levels: each column's cells are its levels, bottom-aligned (the column with most cells sets how
  many); a cell over several columns takes its highest level among them.
- Labels span up: a label with no label above it in its columns spans the levels above up to the
  next label, or to the top (``spanned_up``): the stub head (the row-label column's header, set
  beside the lowest header line) and bottom-aligned column labels stand in the first row they
  span, as a cell spanning header rows does in a ruled table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from chandra_ocr.tables.alignment import joined_lines

Cell = tuple[int, int, str]  # (first column, colspan, text)
Placed = tuple[int, int, int, int, str]  # (row, column, rowspan, colspan, text)

WRAP_GAP = 0.5  # × line height: header lines closer than this are wrapped lines of one level
_TOL = 1.0  # points: a rule this far into a line's box is still between the lines
_SAME = 4.0  # points: a rule end this close to a column's side covers it


def header_levels(
    rows: list[list[Cell]],
    bands: list[tuple[float, float]],
    h_rules: Sequence[tuple[float, float, float]],
    cols: list[tuple[float, float]],
) -> tuple[list[list[Cell]], list[tuple[float, float]]]:
    """The header ``rows`` (text lines, each with its vertical ``bands`` (y0, y1)) as levels: one row of
    cells per level, top to bottom (module docstring), and each level's vertical band.

    ``h_rules``: horizontal drawn rules (y, x0, x1); ``cols``: the table's column x ranges.
    """
    lines = [_underlined(row, _rules_under(h_rules, bands, i), cols) for i, row in enumerate(rows)]
    pieces = [(i, cell) for i, line in enumerate(lines) for cell in line if cell[2]]
    cells: list[list[tuple[int, Cell]]] = []  # each header cell: its pieces, top to bottom
    column_cells: list[list[int]] = []  # each column: its header cells, top to bottom
    for c, (x0, x1) in enumerate(cols):
        mine: list[int] = []
        for i, cell in pieces:
            if not _covers(cell, c, 1):
                continue
            k = mine[-1] if mine else None
            if k is not None and _continues(cells[k][-1], (i, cell), bands, h_rules, x0, x1):
                if (i, cell) not in cells[k]:
                    cells[k].append((i, cell))
                continue
            k = next((n for n, other in enumerate(cells) if other[0] == (i, cell)), None)
            if k is None:
                cells.append([(i, cell)])
                k = len(cells) - 1
            mine.append(k)
        column_cells.append(mine)
    depth = max((len(m) for m in column_cells), default=0)
    level = [depth] * len(cells)
    for mine in column_cells:  # bottom-aligned; a cell over several columns takes its highest level
        for n, k in enumerate(mine):
            level[k] = min(level[k], depth - len(mine) + n)
    out: list[list[Cell]] = [[] for _ in range(depth)]
    spread: list[list[float]] = [[] for _ in range(depth)]
    for k, parts in enumerate(cells):
        first = min(cell[0] for _, cell in parts)
        end = max(cell[0] + cell[1] for _, cell in parts)
        out[level[k]].append((first, end - first, functools.reduce(joined_lines, [c[2] for _, c in parts])))
        spread[level[k]] += [y for i, _ in parts for y in bands[i]]
    return [sorted(row) for row in out], [(min(ys), max(ys)) for ys in spread]


def _rules_under(h_rules, bands: list[tuple[float, float]], i: int):
    """The rules between line ``i`` and the line below it (or a line's height below it)."""
    top = bands[i][1]
    bottom = bands[i + 1][0] if i + 1 < len(bands) else top + (bands[i][1] - bands[i][0])
    return [r for r in h_rules if top - _TOL <= r[0] <= max(bottom, top) + _TOL]


def _continues(
    above: tuple[int, Cell], below: tuple[int, Cell], bands, h_rules, x0: float, x1: float
) -> bool:
    """Whether piece ``below`` is the next line of the label ending with piece ``above`` in a column
    (``x0``–``x1``): as wide in columns, close below it, no rule between them there."""
    (i, a), (j, b) = above, below
    if a[:2] != b[:2]:
        return False
    gap = bands[j][0] - bands[i][1]
    height = min(bands[i][1] - bands[i][0], bands[j][1] - bands[j][0])
    return gap <= WRAP_GAP * height and not _ruled_between(h_rules, bands[i][1], bands[j][0], x0, x1)


def spanned_up(rows: list[list[Cell]]) -> list[Placed]:
    """The cells of header ``rows`` placed with their row spans: a label with no label above it in its
    columns spans the rows above, up to the next label or the top (module docstring)."""
    out: list[Placed] = []
    for r, row in enumerate(rows):
        for c, span, text in row:
            top = r
            while top > 0 and not any(_covers(cell, c, span) for cell in rows[top - 1] if cell[2]):
                top -= 1
            out.append((top, c, r - top + 1, span, text) if text else (r, c, 1, span, text))
    taken = {(r + k, c + j) for r, c, rs, cs, text in out if text for k in range(rs) for j in range(cs)}
    return sorted(cell for cell in out if cell[4] or (cell[0], cell[1]) not in taken)


def _covers(cell: Cell, c: int, span: int) -> bool:
    return cell[0] < c + span and c < cell[0] + cell[1]


def _ruled_between(h_rules, top: float, bottom: float, x0: float, x1: float) -> bool:
    """Whether a drawn rule lies between two lines (``top``: the upper line's bottom, ``bottom``: the
    lower line's top) within the table's x range."""
    return any(top - _TOL <= y <= bottom + _TOL and a < x1 and b > x0 for y, a, b in h_rules)


def _underlined(level: list[Cell], rules, cols: list[tuple[float, float]]) -> list[Cell]:
    """``level`` with each label that is alone over a rule under it spanning the columns the rule
    covers."""
    out = list(level)
    for _, x0, x1 in rules:
        covered = [k for k, (a, b) in enumerate(cols) if x0 - _SAME <= a and b <= x1 + _SAME]
        if not 2 <= len(covered) < len(cols):
            continue  # a rule across the table ends the header (or a level), it groups nothing
        first, last = covered[0], covered[-1]
        inside = [cell for cell in out if first <= cell[0] and cell[0] + cell[1] - 1 <= last]
        if len(inside) == 1 and not any(
            _covers(cell, first, last - first + 1) for cell in out if cell not in inside
        ):
            out = sorted(
                [cell for cell in out if cell not in inside] + [(first, last - first + 1, inside[0][2])]
            )
    return out
