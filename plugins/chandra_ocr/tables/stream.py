"""Tables without (all) rules on text-layer pages: rows and columns from the alignment of words.

The "stream" idea (Nurminen; tabula and camelot), written against MuPDF's word list; visual
rows, segments, columns and cells come from ``tables/alignment.py``:

- Regions: runs of rows with two or more segments, vertically close (``ROW_GAP`` × the row
  height); up to ``MAX_BRIDGE`` one-segment rows inside a run (section labels, wrapped cells)
  and ``MAX_LEAD`` just above it (header lines) are kept, not below it, nor a last row of text
  set ``APART`` usual row gaps below the others; a leading line with only a
  first-column cell is a label above the table, left as text.
- Columns: the gutters of word alignment (``alignment.gutter_columns``). A prose column at a
  region's side (long segments: another text column of the page) is dropped and the rest
  measured again. Two tables side by side: a
  gutter ``SIDE_GAP`` times wider than the others between two groups of as many columns.
- Precision guards (prose, lists, tables of contents and reference lists are not tables): at
  least ``MIN_ROWS`` rows and ``MIN_COLS`` columns (two only with numbers in the second), short
  cells (``MAX_WORDS`` words on average), ``MIN_FILL`` of the positions filled, no dot leaders
  running to a last column of page numbers,
  no first column made only of list markers or reference numbers, no code (``CODE_SHARE`` of
  the cells other than numbers with brackets, quotes, ``;`` or ``=``), no drawn column rules
  down the region splitting it into ``MIN_BOXES`` boxes or more of two columns each (a form of
  boxed lists).
- Wrapped cells: a body line of text in fewer columns than rows usually fill joins the row above
  or below it, where it continues a cell of that row (``tables/wrapped.py``).
- Header rows: the leading rows above the first body row (a label in the first column and a
  number: years above it stay header) — bounded by a drawn rule in the table's first rows where
  there is one (booktabs ``\\midrule``) — are headers; ``Table.header`` joins them per column.
  A leading row of one or two cells spanning most columns is a title, left as text.
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics
from collections.abc import Sequence

from chandra_ocr.tables.alignment import (
    MIN_ROWS,
    Row,
    StreamTable,
    gutter_columns,
    is_number,
    keep_segments,
    overlaps,
    place_cells,
    split_columns,
    visual_rows,
    words_box,
)
from chandra_ocr.tables.header import header_levels, spanned_up
from chandra_ocr.tables.rules import Box, Word, merge_edges
from chandra_ocr.tables.wrapped import joined_records

ROW_GAP = 3.0  # × row height: a wider vertical gap ends a table region
MAX_BRIDGE = 2  # one-segment rows kept inside a region
SIDE_GAP = 2.5  # a gutter this many times the others' median between equal column groups: two tables
APART = 3.0  # a last row this many usual row gaps below the one above is not the table's
PROSE_NEAR = 2  # a short region with lines of prose set in columns this many rows around it needs numbers
MAX_LEAD = 4  # one-segment rows kept just above a region (header lines)
MIN_BOXES = 3  # column rules splitting a region into this many boxes of two columns or more: a form
MIN_COLS = 3
MAX_HEADER = 5  # header rows at most where a drawn rule under them ends the header
TOP_RULE = 0.9  # share of a table's width a rule over it covers: one-cell rows above it are a title
MAX_WORDS = 4.0  # mean words per non-empty cell; more: prose set in columns
MIN_FILL = 0.45  # non-empty cells per grid position
MIN_NUMERIC_2COL = 0.5  # a two-column region needs this share of numbers in its second column
CODE_SHARE = 0.5  # this share of the text cells with code punctuation: a listing, not a table
PROSE_WORDS = 7  # a column whose cells have this many words (median) is running text
_MARKER = re.compile(
    r"^(?:[•◦▪▫●○■□‣⁃∙·➢►▶✓✔\-–—*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|\[\d{1,4}\]|\(?[ivx]{1,4}[.)])$"
)
_PAGE_NO = re.compile(r"[.\s…]*(?:\d{1,4}|[ivxlc]{1,6}|[IVXLC]{1,6})")
_CODE = re.compile(r"[\[\]{};=\"']|\w\(")  # "(95% CI)" or "Asian (non-Hispanic)" is not code, "f(x)" is
_LEADER = re.compile(r"(?:\.\s?){4,}|…{2,}")


def stream_tables(
    words: list[Word],
    h_rules: Sequence[tuple[float, float, float]] = (),
    v_rules: Sequence[tuple[float, float, float]] = (),
) -> list[StreamTable]:
    """The unruled (or partly ruled) tables among ``words``, top to bottom.

    ``h_rules``: horizontal drawn rules (y, x0, x1), used as header hints; ``v_rules``: vertical
    drawn rules (x, y0, y1), for the boxes of forms.
    """
    regions = _regions(visual_rows(words))
    h_rules = merge_edges(list(h_rules)) if regions and h_rules else []  # a rule's touching pieces made one
    out = []
    for region in regions:
        parts = [box for half in _side_by_side(region) for box in _repeated_boxes(half, v_rules)]
        out += [t for part in parts if (t := _table(part, h_rules, v_rules, words)) is not None]
    return out


def _repeated_boxes(region: list[Row], v_rules) -> list[list[Row]]:
    """The region, or its boxes when drawn vertical rules down it split it into boxes that start with
    the same header row (one table wrapped into side-by-side parts: each part is read as a table)."""
    top, bottom = region[0].y0, region[-1].y1
    x0, x1 = min(r.segs[0].x0 for r in region), max(r.segs[-1].x1 for r in region)
    xs = sorted(
        x for x, y0, y1 in v_rules if x0 < x < x1 and min(y1, bottom) - max(y0, top) >= 0.8 * (bottom - top)
    )
    if not xs:
        return [region]
    bounds = [x0 - 1, *xs, x1 + 1]
    boxes = [
        [r for r in keep_segments(region, lambda seg, a=a, b=b: a < (seg.x0 + seg.x1) / 2 < b) if r.segs]
        for a, b in itertools.pairwise(bounds)
    ]
    heads = [next((tuple(s.text for s in r.segs) for r in box if len(r.segs) >= 2), None) for box in boxes]
    return boxes if heads[0] is not None and all(h == heads[0] for h in heads) else [region]


def _boxed(region: list[Row], cols: list[tuple[float, float]], v_rules) -> bool:
    """Whether drawn vertical rules running down most of the region split its columns into
    ``MIN_BOXES`` boxes or more of two columns or more each: a form of boxed lists, not one table."""
    top, bottom = region[0].y0, region[-1].y1
    xs = sorted(
        x
        for x, y0, y1 in v_rules
        if cols[0][0] < x < cols[-1][1] and min(y1, bottom) - max(y0, top) >= 0.8 * (bottom - top)
    )
    if len(xs) < MIN_BOXES - 1:
        return False
    per_box = [0] * (len(xs) + 1)
    for lo, hi in cols:
        per_box[bisect.bisect_left(xs, (lo + hi) / 2)] += 1
    return all(n >= 2 for n in per_box)


def _side_by_side(region: list[Row]) -> list[list[Row]]:
    """The region, or its two halves when a gutter ``SIDE_GAP`` times wider than the others splits
    its columns into two groups of the same number (two tables set side by side)."""
    multi = [r for r in region if len(r.segs) >= 2]
    cols = gutter_columns([s for r in multi for s in r.segs], len(multi)) if multi else []
    if len(cols) < 4:
        return [region]
    gutters = [b[0] - a[1] for a, b in zip(cols, cols[1:], strict=False)]
    k = max(range(len(gutters)), key=gutters.__getitem__)
    others = gutters[:k] + gutters[k + 1 :]
    if k + 1 != len(cols) - k - 1 or gutters[k] < SIDE_GAP * statistics.median(others):
        return [region]
    cut = (cols[k][1] + cols[k + 1][0]) / 2
    halves = [
        keep_segments(region, lambda seg: seg.x1 < cut),
        keep_segments(region, lambda seg: seg.x0 > cut),
    ]
    return [[r for r in half if r.segs] for half in halves]


def _regions(rows: list[Row]) -> list[list[Row]]:
    """Runs of multi-segment rows, close together, with up to ``MAX_BRIDGE`` one-segment rows inside
    them and ``MAX_LEAD`` just above them (header lines); the run's last rows are multi-segment."""
    out: list[list[Row]] = []
    run: list[Row] = []
    bridge = 0
    for n, row in enumerate(rows):
        close = bool(run) and _close(run[-1], row)
        if _multi(row):
            if run and close:
                run.append(row)
            else:
                if run:
                    out.append(run)
                run = _lead(rows, n) + [row]
            bridge = 0
        elif run and close and bridge < MAX_BRIDGE:
            run.append(row)
            bridge += 1
        else:
            if run:
                out.append(run)
            run, bridge = [], 0
    if run:
        out.append(run)
    at = {id(row): n for n, row in enumerate(rows)}
    prose = [len(row.segs) >= 2 and not _multi(row) for row in rows]
    kept = []
    for r in out:
        r = _trim(r)
        multi = [x for x in r if _multi(x)]
        if len(multi) < MIN_ROWS:
            continue
        near = range(max(at[id(r[0])] - PROSE_NEAR, 0), min(at[id(r[-1])] + PROSE_NEAR + 1, len(rows)))
        numeric = sum(any(is_number(s.text) for s in x.segs) for x in multi)
        if any(prose[k] for k in near) and 2 * numeric < len(multi) and len(multi) < 2 * MIN_ROWS:
            continue  # a few lines of text between lines of prose set in columns: not a table
        kept.append(r)
    return kept


def _multi(row: Row) -> bool:
    """Whether ``row`` may be a table row: two segments or more, not lines of prose set in columns
    (every segment of ``PROSE_WORDS`` words or more)."""
    return len(row.segs) >= 2 and any(s.n_words < PROSE_WORDS for s in row.segs)


def _close(above: Row, below: Row) -> bool:
    return below.y0 - above.y1 <= ROW_GAP * max(above.height, below.height)


def _lead(rows: list[Row], n: int) -> list[Row]:
    """The one-segment rows directly above row ``n`` (at most ``MAX_LEAD``, each close to the next)."""
    lead: list[Row] = []
    k = n - 1
    while k >= 0 and len(lead) < MAX_LEAD and len(rows[k].segs) == 1 and _close(rows[k], rows[k + 1]):
        lead.insert(0, rows[k])
        k -= 1
    return lead


def _trim(run: list[Row]) -> list[Row]:
    """The run without trailing one-segment rows, nor a last row of text (no numbers) set apart
    (``APART`` × the usual row gap)."""
    while run and not _multi(run[-1]):
        run = run[:-1]
    gaps = [b.y0 - a.y1 for a, b in zip(run, run[1:], strict=False)]
    apart = len(gaps) >= MIN_ROWS and gaps[-1] > APART * max(statistics.median(gaps), 1.0)
    if apart and not any(is_number(seg.text) for seg in run[-1].segs):
        return _trim(run[:-1])  # a line below the table (a paragraph of the next column set)
    return run


def _table(region: list[Row], h_rules, v_rules, words: list[Word]) -> StreamTable | None:
    """A region as a table, or None when it fails a guard."""
    for _ in range(3):
        multi = [r for r in region if len(r.segs) >= 2]  # one-segment rows (titles, labels) set no gutters
        cols = gutter_columns([s for r in multi for s in r.segs], len(multi)) if multi else []
        if len(cols) < 2:
            return None
        prose = _prose_side(region, cols)
        if prose is None:
            break
        region = _without(region, cols[prose])
        region = _trim([r for r in region if r.segs])
        if sum(len(r.segs) >= 2 for r in region) < MIN_ROWS:
            return None
    else:
        return None
    region, cols = split_columns(region, cols)
    if _boxed(region, cols, v_rules):
        return None
    grid = [place_cells(r, cols) for r in region]
    while grid and (_is_title(grid[0], len(cols)) or (len(grid[0]) < 2 and grid[0][0][0] == 0)):
        grid, region = grid[1:], region[1:]  # a title, or a label line above the table
    grid, region = _under_top_rule(grid, region, h_rules)
    if not plausible(grid, len(cols)):
        return None
    box = words_box([w for r in region for s in r.segs for w in s.words])
    used = frozenset(w[8] for r in region for s in r.segs for w in s.words)
    n_header = header_rows(grid, region, h_rules, box)
    body = joined_records(grid[n_header:], region[n_header:], cols)
    bands = [(r.y0, r.y1) for r in region[:n_header]]
    levels, _ = header_levels(grid[:n_header], bands, h_rules, cols)
    cells = spanned_up(levels) + [
        (len(levels) + i, c, 1, span, t) for i, row in enumerate(body) for c, span, t in row
    ]
    return StreamTable(box, len(levels) + len(body), len(cols), cells, len(levels), used)


def _under_top_rule(grid: list[list[tuple[int, int, str]]], region: list[Row], rules):
    """The rows from the table's top rule down: leading one-cell rows (a title, a note on units) above
    the first drawn rule across the table (``TOP_RULE`` of its width) that lies above its first row of
    several cells."""
    first = next((i for i, row in enumerate(grid) if len(row) >= 2), 0)
    if not first:
        return grid, region
    x0, x1 = min(s.x0 for r in region for s in r.segs), max(s.x1 for r in region for s in r.segs)
    tops = [
        y
        for y, a, b in rules
        if min(b, x1) - max(a, x0) >= TOP_RULE * (x1 - x0) and region[0].y1 <= y <= region[first].y0 + 1
    ]
    if not tops:
        return grid, region
    k = sum(1 for r in region[:first] if (r.y0 + r.y1) / 2 < min(tops))
    return grid[k:], region[k:]


def _is_title(row: list[tuple[int, int, str]], n_cols: int) -> bool:
    """A leading row of at most two cells, one spanning most columns: a title or caption, not a header."""
    return len(row) <= 2 and n_cols >= 3 and any(span >= 0.6 * n_cols for _, span, _ in row)


def _prose_side(region: list[Row], cols: list[tuple[float, float]]) -> int | None:
    """The index of the first or last column when it holds running text (another column of the page)."""
    for k in (0, len(cols) - 1):
        counts = [s.n_words for r in region for s in r.segs if overlaps(s, cols[k])]
        if counts and statistics.median(counts) >= PROSE_WORDS:
            return k
    return None


def _without(region: list[Row], col: tuple[float, float]) -> list[Row]:
    return keep_segments(region, lambda seg: not overlaps(seg, col))


def plausible(grid: list[list[tuple[int, int, str]]], n_cols: int) -> bool:
    """The precision guards of the module docstring."""
    texts = [t for row in grid for _, _, t in row]
    multi = sum(1 for row in grid if len(row) >= 2)
    if multi < MIN_ROWS or not texts:
        return False
    if sum(len(_LEADER.sub(" ", t).split()) for t in texts) / len(texts) > MAX_WORDS:
        return False
    if sum(len(row) for row in grid) < MIN_FILL * len(grid) * n_cols:
        return False
    by_col: dict[int, list[str]] = {}
    for row in grid:
        for c, span, t in row:
            if span == 1:
                by_col.setdefault(c, []).append(t)
    last = by_col.get(n_cols - 1, [])
    pages = bool(last) and sum(1 for t in last if _PAGE_NO.fullmatch(t)) >= 0.8 * len(last)
    if sum(1 for t in texts if _LEADER.search(t)) >= 2 and pages:
        return False  # a table of contents: dot leaders to a column of page numbers
    first = by_col.get(0, [])
    if len(first) >= 2 and sum(1 for t in first if _MARKER.match(t)) >= 0.8 * len(first):
        return False  # a list or a reference list
    words = [t for t in texts if not is_number(t)]
    if words and sum(1 for t in words if _CODE.search(t)) >= CODE_SHARE * len(words):
        return False  # program code set in columns
    if n_cols < MIN_COLS:
        if n_cols < 2:
            return False
        second = by_col.get(1, [])
        return bool(second) and sum(1 for t in second if is_number(t)) >= MIN_NUMERIC_2COL * len(second)
    return True


def header_rows(grid, region: list[Row], h_rules, box: Box) -> int:
    """Leading rows above the first body row (a label in the first column and a number; without a label
    column, the first row with a number); bounded by an early drawn rule, which also ends a header whose
    lines hold numbers in fewer than half their cells ("PK–12", "9–12" under "Year"); a line of a
    first-column label only, right above the body, is a section label (body)."""
    numbers = [any(is_number(t) for _, _, t in row) for row in grid]
    labelled = [bool(row) and row[0][0] == 0 for row in grid]
    first_body = next((i for i, row in enumerate(grid) if numbers[i] and labelled[i]), None)
    if first_body is None:  # no label column: the first row with a number
        first_body = next((i for i, n in enumerate(numbers) if n), len(grid))
    if first_body in (0, len(grid)):
        return 0
    width = box[2] - box[0]
    for y, x0, x1 in sorted(h_rules):
        if min(x1, box[2]) - max(x0, box[0]) < TOP_RULE * width:
            continue
        above = sum(1 for r in region if (r.y0 + r.y1) / 2 < y)
        if 0 < above <= first_body:
            return above
        if first_body < above <= MAX_HEADER < len(grid) - above and all(map(_labels, grid[:above])):
            return above
        if above:
            break
    n = min(first_body, len(grid) - 1)
    while n > 1 and len(grid[n - 1]) == 1 and grid[n - 1][0][:2] == (0, 1):
        n -= 1  # a section label over the first body rows
    return n


def _labels(row: list[tuple[int, int, str]]) -> bool:
    """Whether fewer than half the cells of ``row`` after its first column hold numbers."""
    rest = [t for c, _, t in row if c > 0]
    return 2 * sum(1 for t in rest if is_number(t)) < len(rest)
