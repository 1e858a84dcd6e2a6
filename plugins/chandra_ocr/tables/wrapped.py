"""Body rows of tables read from text lines (``stream.py``): a cell's wrapped lines joined into its row.

A body line is a *part line* when it holds no number and fills fewer columns than the table's
rows usually do. It belongs to the row above or below it when every cell of it lies in a column
that row fills, and:

- it is set closer to that row (by ``CLOSE`` × its height) than that row is to the line on its
  other side, and than rows usually are, or
- its text is the continuation of a wrapped cell: the row above's text in that column would not
  have room for its first word (the row above is full to the column's edge), or its own text
  would not have room for the first word of the row below's (it is the first line of a cell
  whose last line stands in the row below, the record's other cells set at its foot); not for a
  line of the row-label column only (a section label as wide as the row labels; the label column
  is the first, or the last in a right-to-left table).

A part line whose cells lie in columns the row leaves empty belongs to it when it overlaps the
row's line (a cell of two lines set beside a one-line row, that row's text at its middle).

A column's edge is where the next column's text starts (less a cell gap), the last column's the
right end of its widest text. When both neighbours qualify, the nearer one wins; if equally near
(``SAME``), the way most part lines of the table with one neighbour qualifying go (above, if as
many go each way: cells top-aligned). A part line qualifying for neither stays a row (a section
label, a note).
"""

from __future__ import annotations

import functools
import statistics

from chandra_ocr.tables.alignment import GAP, Row, is_number, joined_lines

Cell = tuple[int, int, str]  # (first column, colspan, text)
_Extent = tuple[float, float, float]  # (x1 of its text, width of its first word, height)

CLOSE = 0.4  # × line height: a part line this much closer to a row than rows usually are is part of it
SAME = 0.25  # × line height: gaps this close are as near


def joined_records(
    rows: list[list[Cell]], lines: list[Row], cols: list[tuple[float, float]]
) -> list[list[Cell]]:
    """Body ``rows`` (each read from the visual line in ``lines`` at its index) with part lines joined to
    the row they belong to (module docstring)."""
    if len(rows) < 3:
        return rows
    extents = [_extents(line, cols) for line in lines]
    edges = _edges(extents, cols)
    fills = sorted(len(r) for r in rows)
    typical = fills[len(fills) // 2]
    label = _label_column(rows, len(cols))
    usual = statistics.median([b.y0 - a.y1 for a, b in zip(lines, lines[1:], strict=False)])
    options = [
        _options(rows, lines, extents, edges, label, usual, i) if _part(rows[i], typical) else []
        for i in range(len(rows))
    ]
    decided = [o[0][1] for o in options if len(o) == 1]
    usual_way = 1 if 2 * sum(1 for k in decided if k > 0) > len(decided) else -1
    way = [
        0 if not o else o[0][1] if len(o) == 1 or o[1][0] - o[0][0] > SAME * lines[i].height else usual_way
        for i, o in enumerate(options)
    ]
    out: list[list[Cell]] = []
    for i, row in enumerate(rows):
        if out and (way[i] < 0 or way[i - 1] > 0):
            out[-1] = _joined(out[-1], row)
        else:
            out.append(list(row))
    return out


def _label_column(rows: list[list[Cell]], n_cols: int) -> int:
    """The column of row labels: the first, or the last where it holds more text than numbers and the
    first does not (a right-to-left table)."""

    def words(c: int) -> int:
        return sum(1 for row in rows for d, _, t in row if d == c and not is_number(t)) - sum(
            1 for row in rows for d, _, t in row if d == c and is_number(t)
        )

    return n_cols - 1 if words(0) <= 0 < words(n_cols - 1) else 0


def _part(row: list[Cell], typical: int) -> bool:
    return len(row) < typical and not any(is_number(t) for _, _, t in row)


def _options(rows, lines, extents, edges, label: int, usual: float, i: int) -> list[tuple[float, int]]:
    """(gap, way) for each row line ``i`` may belong to, nearer first (way -1: the row above, 1: below)."""
    mine = {c for c, _, _ in rows[i]}
    near = []
    for k in (-1, 1):
        j = i + k
        if not 0 <= j < len(rows):
            continue
        theirs = {c + n for c, span, _ in rows[j] for n in range(span)}
        gap = lines[i].y0 - lines[j].y1 if k < 0 else lines[j].y0 - lines[i].y1
        if mine <= theirs:
            top, bottom = (j, i) if k < 0 else (i, j)
            wraps = mine != {label} and all(
                _full(extents[top].get(c), extents[bottom].get(c), edges[c]) for c in mine
            )
            beyond = j + k  # the line on the row's other side: how far apart rows are set there
            apart = usual
            if 0 <= beyond < len(rows):
                apart = min(
                    apart, lines[beyond].y0 - lines[j].y1 if k > 0 else lines[j].y0 - lines[beyond].y1
                )
            wraps = wraps or gap <= apart - CLOSE * lines[i].height
            if wraps:
                near.append((gap, k))
        elif not mine & theirs and gap < 0:  # set beside the row's line, between two lines
            near.append((gap, k))
    return sorted(near)


def _full(upper: _Extent | None, lower: _Extent | None, edge: float) -> bool:
    """Whether the upper line's text in a column leaves no room for the lower line's first word."""
    if upper is None or lower is None:
        return False
    x1, _, height = upper
    return x1 + GAP * height + lower[1] > edge


def _extents(line: Row, cols: list[tuple[float, float]]) -> dict[int, _Extent]:
    """Each column's (right end of the text, width of the first word, height) on ``line``."""
    out: dict[int, _Extent] = {}
    for seg in line.segs:
        hit = next((k for k, (a, b) in enumerate(cols) if seg.x0 <= b and seg.x1 >= a), None)
        if hit is None:
            continue
        first = seg.words[0]
        if hit in out:
            out[hit] = (max(out[hit][0], seg.x1), out[hit][1], out[hit][2])
        else:
            out[hit] = (seg.x1, first[2] - first[0], first[3] - first[1])
    return out


def _edges(extents: list[dict[int, _Extent]], cols: list[tuple[float, float]]) -> list[float]:
    """Where each column's text must end: before the next column's text (a cell gap apart), or the
    right end of the last column's widest text."""
    starts = [col[0] for col in cols]
    ends = [max((e[c][0] for e in extents if c in e), default=cols[c][1]) for c in range(len(cols))]
    heights = sorted(h for e in extents for _, _, h in e.values()) or [0.0]
    gap = GAP * heights[len(heights) // 2]
    return [starts[c + 1] - gap if c + 1 < len(cols) else ends[c] for c in range(len(cols))]


def _joined(row: list[Cell], line: list[Cell]) -> list[Cell]:
    """``row`` with the cells of ``line`` appended to the cells they overlap (one cell over the columns
    of all), or added in columns it leaves empty."""
    cells = list(row)
    for c, span, text in line:
        hit = [cell for cell in cells if cell[0] < c + span and c < cell[0] + cell[1]]
        if hit:
            first = min(c, *(d for d, _, _ in hit))
            end = max(c + span, *(d + s for d, s, _ in hit))
            cells = [cell for cell in cells if cell not in hit]
            text = functools.reduce(joined_lines, [*(t for _, _, t in sorted(hit)), text])
            c, span = first, end - first
        cells.append((c, span, text))
    return sorted(cells)
