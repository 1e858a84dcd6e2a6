"""Partly ruled tables: a frame of horizontal rules (perhaps with column rules), the rows from the text.

Tables ruled only in part — a rule every row or every few rows, rules around the header only,
column rules without row rules — whose words no ruled grid took (``tables/native.py``) are
read here, before ``tables/stream.py`` sees the rest:

- Frames, from the drawn rules alone (``tables/frames.py``).
- Frames with words set beside them (within ``BESIDE``) are left to word alignment: the rules
  cover part of a table only (row labels outside a ruled grid).
- A band between two rules holding running text (``PROSE_LINES`` lines or more, more than
  ``stream.MAX_WORDS`` words per segment) is not the table's: it splits the frame (page
  header rules over a page of text and a table at its foot).
- Columns: the column rules where there are (each word in the column holding its centre; a
  segment with a word running over a rule is one cell spanning the columns it covers), else the
  gutters of word alignment (``alignment.gutter_columns``). Column rules with ``BOXED`` of
  their cells holding two gap-separated segments are boxes of a form, not columns: left to word
  alignment.
- Rows are the text's visual lines. A line continues the row above it (a multi-line cell) when
  it fills fewer columns than that row, only columns that row fills, half of them
  at most or no numbers, and either leaves the first column empty, is indented (a hanging
  indent) or is in a band between two rules that holds that one row only. A line filling only
  columns no other line of its band fills holds cells spanning the band's rows: it joins the
  band's first row. Never across a rule.
- Header rows: lines set just above the frame's top rule (a table ruled from below its header),
  else the rows of its first band (``MAX_HEADER`` at most, without numbers in half their cells),
  else ``stream.header_rows``. A label between column rules that cross its line, over columns
  whose rules start below it, spans those columns (``_between_rules``); the header's lines then
  make its levels (``tables/header.py``: a label's wrapped lines joined, a label over a shorter
  rule spanning the columns the rule covers, a label with nothing above it spanning up).
  A leading row of one-segment lines running over column rules, or in a band of such lines only,
  is a title, left as text.
- The guards of ``stream.plausible`` (prose, lists, tables of contents, code).
"""

from __future__ import annotations

import bisect

from chandra_ocr.tables.alignment import (
    Row,
    StreamTable,
    gutter_columns,
    is_number,
    place_cells,
    split_columns,
    visual_rows,
    words_box,
)
from chandra_ocr.tables.frames import SAME, Frame
from chandra_ocr.tables.header import header_levels, spanned_up
from chandra_ocr.tables.rules import Box, Word, merge_edges
from chandra_ocr.tables.stream import MAX_WORDS, header_rows, plausible

PROSE_LINES = 3  # a band with this many lines of long segments holds running text
MAX_LEAD = 2  # header lines kept just above a frame's top rule
MAX_HEADER = 4  # header rows at most in a frame's first band
LEAD_ROOM = 40.0  # points above a frame's top rule searched for its header lines
BESIDE = 72.0  # points: words this close beside a frame's sides, on its lines: it holds part of a table
BOXED = 0.2  # this share of the cells between column rules holding two segments: boxes, not columns
_TOL = 2.0  # points: a word's centre this far outside a frame is still in it

Cell = tuple[int, int, str]  # (first column, colspan, text)


def partly_ruled_tables(words: list[Word], found: list[Frame]) -> list[StreamTable]:
    """The tables of the frames ``found`` among ``words``, top to bottom (``StreamTable.words``
    index ``words``)."""
    order = sorted(range(len(words)), key=lambda i: words[i][1] + words[i][3])
    mids = [(words[i][1] + words[i][3]) / 2 for i in order]
    out = []
    for frame in found:
        x0, top, x1, bottom = frame.box
        near = order[bisect.bisect_left(mids, top - LEAD_ROOM) : bisect.bisect_right(mids, bottom + _TOL)]
        ids = [i for i in near if x0 - _TOL <= (words[i][0] + words[i][2]) / 2 <= x1 + _TOL]
        if len(ids) < 4 or any(_beside(words[i], frame.box) for i in near):
            continue
        lines = [_renumbered(r, ids) for r in visual_rows([words[i] for i in ids])]
        for part in _parts(lines, frame):
            table = _table(part, frame)
            if table is not None:
                out.append(table)
    return out


def _beside(w: Word, box: Box) -> bool:
    """Whether ``w`` is set beside ``box``, within ``BESIDE`` of its left or right side (the frame
    holds part of a table only)."""
    x, y = (w[0] + w[2]) / 2, (w[1] + w[3]) / 2
    if not box[1] < y < box[3]:
        return False
    return box[0] - BESIDE < x < box[0] - _TOL or box[2] + _TOL < x < box[2] + BESIDE


def _renumbered(row: Row, ids: list[int]) -> Row:
    """``row`` with its words' last field an index into the page's words again."""
    back = {w[8]: (*w[:8], ids[w[8]]) for w in row.words}
    for seg in row.segs:
        seg.words = [back[w[8]] for w in seg.words]
    row.words = list(back.values())
    return row


def _parts(lines: list[Row], frame: Frame) -> list[list[Row]]:
    """Runs of the frame's lines between bands of running text, each with the header lines set
    just above its top rule."""
    top = frame.box[1]
    body = [r for r in lines if _mid(r) >= top - _TOL]
    lead = [r for r in lines if _mid(r) < top - _TOL]
    kept: list[Row] = []
    for r in reversed(lead):  # header lines just above the top rule, each close to the next
        below = kept[0] if kept else None
        near = (below.y0 if below else top) - r.y1 <= 1.5 * r.height
        if len(kept) == MAX_LEAD or len(r.segs) < 2 or not near:
            break
        kept.insert(0, r)
    bands: dict[int, list[Row]] = {}
    for r in body:
        bands.setdefault(_band(frame, r), []).append(r)
    parts, run = [], list(kept)
    for n in sorted(bands):
        if _prose(bands[n]):
            parts.append(run)
            run = []
        else:
            run += bands[n]
    parts.append(run)
    return [p for p in parts if len(p) >= 2]


def _mid(r: Row) -> float:
    return (r.y0 + r.y1) / 2


def _band(frame: Frame, r: Row) -> int:
    """The number of the frame's rules above the middle of line ``r``."""
    return bisect.bisect_left(frame.ys, _mid(r))


def _prose(band: list[Row]) -> bool:
    segs = [s for r in band for s in r.segs]
    return len(band) >= PROSE_LINES and sum(s.n_words for s in segs) > MAX_WORDS * len(segs)


def _table(lines: list[Row], frame: Frame) -> StreamTable | None:
    """The lines of one frame as a table, or None when they fail a guard."""
    x0, _, x1, _ = frame.box
    if frame.xs:
        bounds = [x0, *frame.xs, x1]
        cols = list(zip(bounds, bounds[1:], strict=False))
        cells = [_by_rules(r, frame.xs) for r in lines]
        if _boxes(lines, frame.xs):
            return None
    else:
        multi = [r for r in lines if len(r.segs) >= 2]
        cols = gutter_columns([s for r in multi for s in r.segs], len(multi)) if multi else []
        lines, cols = split_columns(lines, cols) if cols else (lines, cols)
        cells = [place_cells(r, cols) for r in lines]
    if len(cols) < 2:
        return None
    lead = sum(1 for r in lines if _mid(r) < frame.box[1] - _TOL)
    rows, spans = _records(lines, cells, frame, lead)
    while rows and _is_title(rows, spans, lines, frame, len(cols)):  # left as text
        rows, spans, lead = rows[1:], spans[1:], max(lead - 1, 0)
    if len(rows) < 3 or not plausible(rows, len(cols)):
        return None
    h_rules = [(y, x0, x1) for y in frame.ys]
    bands = [Row(lines[a].y0, lines[b - 1].y1) for a, b in spans]
    box = words_box([w for a, b in spans for r in lines[a:b] for w in r.words])
    n_header = lead or _first_band(rows, spans, lines, frame) or header_rows(rows, bands, h_rules, box)
    head = range(spans[0][0], spans[n_header - 1][1] if n_header else 0)
    boxed = _between_rules([cells[i] for i in head], [_mid(lines[i]) for i in head], frame)
    bands_of = [(lines[i].y0, lines[i].y1) for i in head]
    levels, _ = header_levels(boxed, bands_of, merge_edges(h_rules + frame.partial), cols)
    used = frozenset(w[8] for a, b in spans for r in lines[a:b] for w in r.words)
    body = [
        (len(levels) + i, c, 1, span, text) for i, row in enumerate(rows[n_header:]) for c, span, text in row
    ]
    return StreamTable(
        box, len(levels) + len(rows) - n_header, len(cols), spanned_up(levels) + body, len(levels), used
    )


def _between_rules(rows: list[list[Cell]], mids: list[float], frame: Frame) -> list[list[Cell]]:
    """Labels of the header rows above the last one (each row's middle at ``mids``) made one cell
    spanning the columns between the column rules that cross their line, when the rules between
    those columns start below it (a group label boxed over its columns: "Pre-Pawn" over "Handgun",
    "Long Gun" and "*Other")."""
    out = list(rows)
    for i in range(len(rows) - 1):
        crossing = [n for n, x in enumerate(frame.xs) if any(_crosses(v, x, mids[i]) for v in frame.columns)]
        for c, span, text in rows[i]:  # rule n separates columns n and n + 1
            first = max((n + 1 for n in crossing if n < c), default=0)
            last = min((n for n in crossing if n >= c + span - 1), default=len(frame.xs))
            alone = all(other == c or not first <= other <= last for other, _, _ in out[i])
            if last - first + 1 > span and alone:
                out[i] = sorted([*(cell for cell in out[i] if cell[0] != c), (first, last - first + 1, text)])
    return out


def _crosses(rule: tuple[float, float, float], x: float, y: float) -> bool:
    return abs(rule[0] - x) <= SAME and rule[1] <= y <= rule[2]


def _first_band(rows: list[list[Cell]], spans: list[tuple[int, int]], lines: list[Row], frame: Frame) -> int:
    """The rows of the first band between two rules when they read as a header: ``MAX_HEADER`` rows
    at most, two rows or more below them, none with numbers in half its cells; else 0."""
    band = _band(frame, lines[spans[0][0]])
    n = sum(1 for a, _ in spans if _band(frame, lines[a]) == band)
    if band == 0 or n > MAX_HEADER or len(rows) - n < 2:
        return 0
    if any(2 * sum(is_number(t) for _, _, t in row) >= len(row) for row in rows[:n]):
        return 0
    return n


def _is_title(
    rows: list[list[Cell]], spans: list[tuple[int, int]], lines: list[Row], frame: Frame, n_cols: int
) -> bool:
    """Whether the first row is a title: lines of one segment, running over column rules, or with no
    line of more segments in their band."""
    if any(len(lines[k].segs) != 1 for k in range(*spans[0])) or n_cols < 3:
        return False
    if len(rows[0]) >= 2 or rows[0][0][1] >= 2:
        return True
    band = _band(frame, lines[spans[0][0]])
    return all(len(r.segs) == 1 for r in lines[spans[0][0] :] if _band(frame, r) == band)


def _boxes(lines: list[Row], xs: list[float]) -> bool:
    """Whether the column rules at ``xs`` frame boxes of columns rather than columns: ``BOXED`` of
    the cells or more hold two segments set a cell gap apart ("YES … 90" in each box of a form)."""
    filled: dict[tuple[int, int], int] = {}
    for n, r in enumerate(lines):
        for seg in r.segs:
            key = (n, bisect.bisect_left(xs, (seg.x0 + seg.x1) / 2))
            filled[key] = filled.get(key, 0) + 1
    return sum(1 for k in filled.values() if k >= 2) >= BOXED * len(filled)


def _by_rules(r: Row, xs: list[float]) -> list[Cell]:
    """The cells of line ``r`` between column rules at ``xs``: each word in the column of its centre,
    but a segment with a word running over a rule is one cell spanning the columns it covers (a
    group label centred over its columns)."""
    cells: dict[int, tuple[int, list[str]]] = {}
    for seg in r.segs:
        if any(w[0] < x < w[2] for w in seg.words for x in xs):
            first = bisect.bisect_left(xs, seg.x0)
            span = bisect.bisect_left(xs, seg.x1) - first + 1
            parts = [(first, span, seg.text)]
        else:
            parts = [(bisect.bisect_left(xs, (w[0] + w[2]) / 2), 1, w[4]) for w in seg.words]
        for c, span, text in parts:
            prev = cells.get(c)
            cells[c] = (max(span, prev[0]), [*prev[1], text]) if prev else (span, [text])
    return [(c, span, " ".join(texts)) for c, (span, texts) in sorted(cells.items())]


def _records(
    lines: list[Row], cells: list[list[Cell]], frame: Frame, lead: int
) -> tuple[list[list[Cell]], list[tuple[int, int]]]:
    """Rows of cells with multi-line and row-spanning cells joined (module docstring), and the lines
    each row spans."""
    band = [-1 if i < lead else _band(frame, r) for i, r in enumerate(lines)]
    single = {b: _one_record(cells, band, b) for b in set(band)}
    left = min(r.segs[0].x0 for r in lines)
    rows: list[list[Cell]] = []
    spans: list[tuple[int, int]] = []
    starts: dict[int, int] = {}  # band → its first row
    for i, line in enumerate(cells):
        if rows and band[spans[-1][0]] == band[i] and band[i] >= 0:
            indented = lines[i].segs[0].x0 - left >= lines[i].height  # a hanging indent
            if _continues(line, rows[-1]) and (line[0][0] != 0 or indented or single[band[i]]):
                rows[-1] = _joined(rows[-1], line)
                spans[-1] = (spans[-1][0], i + 1)
                continue
            if _spanning(cells, band, i):
                n = starts[band[i]]
                rows[n] = _joined(rows[n], line)
                spans[n] = (spans[n][0], max(spans[n][1], i + 1))
                continue
        starts.setdefault(band[i], len(rows))
        rows.append(list(line))
        spans.append((i, i + 1))
    return rows, spans


def _spanning(cells: list[list[Cell]], band: list[int], i: int) -> bool:
    """Whether line ``i`` fills only columns no other line of its band fills: cells spanning the
    band's rows, set at their middle ("6" beside the "OTSL" and "HTML" rows)."""
    mine = {c for c, _, _ in cells[i]}
    others = {c for j, line in enumerate(cells) if j != i and band[j] == band[i] for c, _, _ in line}
    return bool(others) and not mine & others


def _one_record(cells: list[list[Cell]], band: list[int], b: int) -> bool:
    """Whether every line of band ``b`` after its first continues that first line."""
    mine = [cells[i] for i, n in enumerate(band) if n == b]
    return len(mine) >= 2 and all(_continues(line, mine[0]) for line in mine[1:])


def _continues(line: list[Cell], first: list[Cell]) -> bool:
    """Whether ``line`` fills fewer columns than ``first`` (a row), only columns it fills, and half of them at
    most or no numbers."""
    mine, theirs = {c for c, _, _ in line}, {c for c, _, _ in first}
    if not mine < theirs:
        return False
    return 2 * len(mine) <= len(theirs) or not any(is_number(t) for _, _, t in line)


def _joined(row: list[Cell], line: list[Cell]) -> list[Cell]:
    """``row`` with the cells of ``line`` appended to its cells (or added, in columns it leaves empty)."""
    by_col = {c: (c, span, text) for c, span, text in row}
    for c, span, text in line:
        prev = by_col.get(c)
        by_col[c] = (c, prev[1], f"{prev[2]} {text}") if prev else (c, span, text)
    return [by_col[c] for c in sorted(by_col)]
