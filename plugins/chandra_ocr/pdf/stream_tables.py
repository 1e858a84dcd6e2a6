"""Tables without (all) rules on text-layer pages: rows and columns from the alignment of words.

The "stream" idea (Nurminen; tabula and camelot), written against MuPDF's word list:

- Visual rows: words clustered by their vertical middle (page-wide, so a row runs across cells).
- Segments: within a row, words separated by less than ``GAP`` × the word height belong to one
  segment (a cell candidate); a wider gap separates cells.
- Regions: runs of rows with two or more segments, vertically close (``ROW_GAP`` × the row
  height); up to ``MAX_BRIDGE`` one-segment rows inside a run (section labels, wrapped cells)
  and ``MAX_LEAD`` just above it (header lines) are kept, not below it, nor a last row of text
  set ``APART`` usual row gaps below the others; a leading line with only a
  first-column cell is a label above the table, left as text.
- Columns: x ranges covered by the segments of at most ``SPAN_SHARE`` of the multi-segment rows
  are gutters; the ranges between gutters are columns. A segment covering several columns is one cell
  spanning them (spanning headers). A column most of whose cells have a word gap at the same x is
  two columns set closer than a cell gap (``SPLIT_GAP``, ``SPLIT_SHARE``). A prose column at a
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
- Wrapped cells: a body row set closer to the row above (by ``WRAP_GAP`` × its height) than
  body rows usually are, with fewer cells, no numbers and text only in columns that row fills,
  is joined to it.
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
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from chandra_ocr.pdf.ruled_grid import Box, Word

GAP = 0.5  # × word height: a wider gap between words of a row separates cells
ROW_GAP = 3.0  # × row height: a wider vertical gap ends a table region
MAX_BRIDGE = 2  # one-segment rows kept inside a region
WRAP_GAP = 0.4  # × row height: a body row this much closer to the one above than usual wraps it
SIDE_GAP = 2.5  # a gutter this many times the others' median between equal column groups: two tables
SPLIT_GAP = 0.3  # × word height: a word gap this wide, at one x in most cells of a column, splits it
SPLIT_SHARE = 0.8
APART = 3.0  # a last row this many usual row gaps below the one above is not the table's
PROSE_NEAR = 2  # a short region with lines of prose set in columns this many rows around it needs numbers
MAX_LEAD = 4  # one-segment rows kept just above a region (header lines)
SPAN_SHARE = 0.15  # x ranges covered by at most this share of a region's rows are gutters
MIN_ROWS = 3
MIN_BOXES = 3  # column rules splitting a region into this many boxes of two columns or more: a form
MIN_COLS = 3
MAX_WORDS = 4.0  # mean words per non-empty cell; more: prose set in columns
MIN_FILL = 0.45  # non-empty cells per grid position
MIN_NUMERIC_2COL = 0.5  # a two-column region needs this share of numbers in its second column
CODE_SHARE = 0.5  # this share of the text cells with code punctuation: a listing, not a table
PROSE_WORDS = 7  # a column whose cells have this many words (median) is running text
_AMOUNT = r"[$€£¥]?\s*\d[\d\s,.]*(?:%|[KMBkm]|bn|mn)?"  # "$1.1M", "2.5bn"
_NUMERIC = re.compile(rf"[-+±−–(]?\s*{_AMOUNT}(?:\s*[-–—]\s*{_AMOUNT})?\)?\*?\s*[$€£¥]?")  # a range counts
_MARKER = re.compile(
    r"^(?:[•◦▪▫●○■□‣⁃∙·➢►▶✓✔\-–—*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|\[\d{1,4}\]|\(?[ivx]{1,4}[.)])$"
)
_PAGE_NO = re.compile(r"[.\s…]*(?:\d{1,4}|[ivxlc]{1,6}|[IVXLC]{1,6})")
_DOTS = re.compile(r"[.…·]{1,}$|^[.…·]+$")
_CODE = re.compile(r"[\[\]{};=\"']|\w\(")  # "(95% CI)" or "Asian (non-Hispanic)" is not code, "f(x)" is
_LEADER = re.compile(r"(?:\.\s?){4,}|…{2,}")


@dataclass
class Seg:
    """Words of one row closer together than a cell gap; their extent is measured once, when made."""

    words: list[Word]
    x0: float = field(init=False)
    x1: float = field(init=False)  # the right end of its text, dot leaders not counted (they run on)
    n_words: int = field(init=False)  # words other than dot leaders

    def __post_init__(self) -> None:
        text = [w[2] for w in self.words if not _DOTS.fullmatch(w[4])]
        self.x0 = self.words[0][0]
        self.x1 = max(text, default=self.words[0][2])
        self.n_words = len(text)

    @property
    def text(self) -> str:
        """Its words in reading order: right to left where they are in a right-to-left script."""
        texts = [w[4] for w in self.words]
        rtl = max(texts) >= "\u0590" and any(_rtl(t) for t in texts)  # max: a cheap test first
        return " ".join(texts[::-1] if rtl else texts)


@dataclass
class Row:
    """One visual row of the page: its vertical band and its segments, left to right."""

    y0: float
    y1: float
    words: list[Word] = field(default_factory=list)
    segs: list[Seg] = field(default_factory=list)

    @property
    def height(self) -> float:
        return self.y1 - self.y0


@dataclass(frozen=True)
class StreamTable:
    """A table found from word alignment: cells as (row, col, rowspan, colspan, text), header rows."""

    bbox: Box
    n_rows: int
    n_cols: int
    cells: list[tuple[int, int, int, int, str]]
    n_header: int
    words: frozenset[int]  # indices (into the words given) of the words in the table


def stream_tables(
    words: list[Word],
    h_rules: Sequence[tuple[float, float, float]] = (),
    v_rules: Sequence[tuple[float, float, float]] = (),
) -> list[StreamTable]:
    """The unruled (or partly ruled) tables among ``words``, top to bottom.

    ``h_rules``: horizontal drawn rules (y, x0, x1), used as header hints; ``v_rules``: vertical
    drawn rules (x, y0, y1), for the boxes of forms.
    """
    rows = visual_rows(words)
    out = []
    for region in _regions(rows):
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
        [r for r in _keep(region, lambda seg, a=a, b=b: a < (seg.x0 + seg.x1) / 2 < b) if r.segs]
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
    halves = [_keep(region, lambda seg: seg.x1 < cut), _keep(region, lambda seg: seg.x0 > cut)]
    return [[r for r in half if r.segs] for half in halves]


def _keep(region: list[Row], wanted) -> list[Row]:
    out = []
    for r in region:
        segs = [s for s in r.segs if wanted(s)]
        out.append(Row(r.y0, r.y1, [w for s in segs for w in s.words], segs))
    return out


def visual_rows(words: list[Word]) -> list[Row]:
    """Visual rows top to bottom, with their segments."""
    mids = [(w[1] + w[3]) / 2 for w in words]
    rows: list[Row] = []
    index: list[list[int]] = []
    band = (0.0, -1.0)  # the first word's middle half: a row's words have their middle in it
    for i in sorted(range(len(words)), key=mids.__getitem__):
        w = words[i]
        if not w[4].strip() or w[3] <= w[1]:
            continue
        mid = mids[i]
        if rows and band[0] <= mid <= band[1]:
            row = rows[-1]
            row.y0, row.y1 = min(row.y0, w[1]), max(row.y1, w[3])
            index[-1].append(i)
        else:
            rows.append(Row(w[1], w[3]))
            index.append([i])
            quarter = (w[3] - w[1]) / 4
            band = (mid - quarter, mid + quarter)
    for row, ids in zip(rows, index, strict=True):
        row.words = [(*words[i][:8], i) for i in sorted(ids, key=lambda i: words[i][0])]
        row.segs = _segments(row.words)
    return rows


def _segments(words: list[Word]) -> list[Seg]:
    """Gap-separated runs of words; dot leaders join the text before them, a number after them starts one."""
    heights = sorted(w[3] - w[1] for w in words)
    gap = GAP * heights[len(heights) // 2]
    runs: list[list[Word]] = []
    end = 0.0
    leader = False  # the last word ends in dot leaders
    for w in words:
        text = w[4]
        if runs and (_DOTS.fullmatch(text) or (w[0] - end <= gap and not (leader and is_number(text)))):
            runs[-1].append(w)
            end = max(end, w[2])
        else:
            runs.append([w])
            end = w[2]
        leader = _DOTS.search(text) is not None
    return [Seg(run) for run in runs]


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


def gutter_columns(segs: list[Seg], n_rows: int) -> list[tuple[float, float]]:
    """Column x ranges: between gutters that at most ``SPAN_SHARE`` of the rows cross."""
    x0 = int(min(s.x0 for s in segs))
    x1 = int(max(s.x1 for s in segs)) + 1
    steps = [0] * (x1 - x0 + 2)  # +1 where a segment starts, -1 after it ends
    for s in segs:
        steps[int(s.x0) - x0] += 1
        steps[int(s.x1) - x0 + 1] -= 1
    cover = list(itertools.accumulate(steps[:-1]))
    limit = max(1.0, SPAN_SHARE * n_rows) if n_rows >= 4 else SPAN_SHARE * n_rows  # one stray row may cross
    cols: list[tuple[float, float]] = []
    start = None
    for x, n in enumerate(cover):
        if n > limit and start is None:
            start = x
        elif n <= limit and start is not None:
            cols.append((start + x0, x - 1 + x0))
            start = None
    if start is not None:
        cols.append((start + x0, len(cover) - 1 + x0))
    return cols


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
    if not plausible(grid, len(cols)):
        return None
    box = words_box([w for r in region for s in r.segs for w in s.words])
    used = frozenset(w[8] for r in region for s in r.segs for w in s.words)
    n_header = header_rows(grid, region, h_rules, box)
    grid = _join_wrapped(grid, region, n_header)
    cells = [(i, c, 1, span, text) for i, row in enumerate(grid) for c, span, text in row]
    return StreamTable(box, len(grid), len(cols), cells, n_header, used)


def _join_wrapped(grid: list[list[tuple[int, int, str]]], region: list[Row], n_header: int):
    """Body rows with their wrapped lines joined: a row closer to the row above by ``WRAP_GAP`` × its
    height than body rows usually are, with fewer cells, no numbers, and text only in columns the
    row above fills, continues it."""
    gaps = [b.y0 - a.y1 for a, b in zip(region[n_header:], region[n_header + 1 :], strict=False)]
    if len(gaps) < 2:
        return grid
    usual = statistics.median(gaps)
    out = grid[: n_header + 1]
    for i in range(n_header + 1, len(grid)):
        gap = region[i].y0 - region[i - 1].y1
        above = {c: k for k, (c, _, _) in enumerate(out[-1])}
        continues = len(grid[i]) < len(out[-1]) and all(
            c in above and not is_number(t) for c, _, t in grid[i]
        )
        if gap <= usual - WRAP_GAP * region[i].height and continues:
            row = list(out[-1])
            for c, _, text in grid[i]:
                first, span, prev = row[above[c]]
                row[above[c]] = (first, span, prev + " " + text)
            out[-1] = row
        else:
            out.append(grid[i])
    return out


def split_columns(region: list[Row], cols: list[tuple[float, float]]):
    """The region and its columns with each column split where ``SPLIT_SHARE`` of its cells have a
    word gap (of ``SPLIT_GAP`` × the word height at least) at the same x: two columns set closer
    than a cell gap ("648765 AAA")."""
    cuts: dict[int, float] = {}
    for k, col in enumerate(cols):
        inside = [s for r in region for s in r.segs if col[0] <= s.x0 and s.x1 <= col[1]]
        gaps = [
            [(a[2], b[0]) for a, b in zip(s.words, s.words[1:], strict=False) if _wide(a, b)] for s in inside
        ]
        for lo, hi in sorted({g for seg in gaps for g in seg}):
            x = (lo + hi) / 2
            hits = sum(any(a < x < b for a, b in seg) for seg in gaps)
            if len(inside) >= MIN_ROWS and hits >= SPLIT_SHARE * len(inside) and not _unit(inside, x):
                cuts[k] = x
                break
    if not cuts:
        return region, cols
    out = []
    for r in region:
        segs = []
        for seg in r.segs:
            starts_in = [x for k, x in cuts.items() if cols[k][0] <= seg.x0 <= cols[k][1]]
            x = next((x for x in starts_in if seg.x0 < x < seg.x1), None)
            parts = (
                [[w for w in seg.words if w[2] <= x], [w for w in seg.words if w[2] > x]]
                if x
                else [seg.words]
            )
            segs += [Seg(p) for p in parts if p]
        out.append(Row(r.y0, r.y1, r.words, segs))
    split: list[tuple[float, float]] = []
    for k, (a, b) in enumerate(cols):
        split += [(a, cuts[k] - 1), (cuts[k] + 1, b)] if k in cuts else [(a, b)]
    return out, split


def _wide(a: Word, b: Word) -> bool:
    """Whether words ``a`` and ``b`` of one segment are ``SPLIT_GAP`` × their height apart or more
    (dot leaders not counted)."""
    dots = _DOTS.fullmatch(a[4]) or _DOTS.fullmatch(b[4])
    return not dots and b[0] - a[2] >= SPLIT_GAP * (b[3] - b[1])


def _unit(segs: list[Seg], x: float) -> bool:
    """Whether the text right of ``x`` is the same lower-case word in ``SPLIT_SHARE`` of the cells (a
    unit after each number, "1 years", "10 years"): not a column of its own (a code in capitals
    beside each number, "648765 AAA", is)."""
    right = [" ".join(w[4] for w in s.words if w[0] > x) for s in segs]
    common = max((right.count(t) for t in set(right) if t.isalpha() and t.islower()), default=0)
    return common >= SPLIT_SHARE * len(segs)


def _is_title(row: list[tuple[int, int, str]], n_cols: int) -> bool:
    """A leading row of at most two cells, one spanning most columns: a title or caption, not a header."""
    return len(row) <= 2 and n_cols >= 3 and any(span >= 0.6 * n_cols for _, span, _ in row)


def _prose_side(region: list[Row], cols: list[tuple[float, float]]) -> int | None:
    """The index of the first or last column when it holds running text (another column of the page)."""
    for k in (0, len(cols) - 1):
        counts = [s.n_words for r in region for s in r.segs if _overlaps(s, cols[k])]
        if counts and statistics.median(counts) >= PROSE_WORDS:
            return k
    return None


def _without(region: list[Row], col: tuple[float, float]) -> list[Row]:
    return _keep(region, lambda seg: not _overlaps(seg, col))


def _overlaps(seg: Seg, col: tuple[float, float]) -> bool:
    return seg.x0 <= col[1] and seg.x1 >= col[0]


def place_cells(row: Row, cols: list[tuple[float, float]]) -> list[tuple[int, int, str]]:
    """(first column, colspan, text) of each cell of ``row``; segments sharing a column are joined."""
    cells: list[tuple[int, int, str]] = []
    for s in _numbers_apart(row.segs, cols):
        hit = [k for k, c in enumerate(cols) if _overlaps(s, c)]
        if not hit:  # inside a gutter: the nearest column to its left (or the first)
            hit = [max([k for k, c in enumerate(cols) if c[1] < s.x0] or [0])]
        first, last = hit[0], hit[-1]
        if cells and cells[-1][0] + cells[-1][1] > first:  # shares a column with the previous cell
            prev = cells.pop()
            first = prev[0]
            last = max(last, prev[0] + prev[1] - 1)
            cells.append((first, last - first + 1, prev[2] + " " + s.text))
        else:
            cells.append((first, last - first + 1, s.text))
    return cells


def _numbers_apart(segs: list[Seg], cols: list[tuple[float, float]]) -> list[Seg]:
    """Segments with numbers set closer than a cell gap in two columns ("6,398 29.7") split into one
    segment per number: numbers do not span columns."""
    out = []
    for s in segs:
        numbers = len(s.words) >= 2 and all(is_number(w[4]) for w in s.words)
        if numbers and sum(1 for c in cols if _overlaps(s, c)) >= 2:
            out += [Seg([w]) for w in s.words]
        else:
            out.append(s)
    return out


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


def _rtl(word: str) -> bool:
    """Whether ``word`` starts with a right-to-left letter (Hebrew, Arabic, ...)."""
    return word[0] >= "\u0590" and unicodedata.bidirectional(word[0]) in ("R", "AL")


def is_number(text: str) -> bool:
    return bool(_NUMERIC.fullmatch(text.strip()))


def header_rows(grid, region: list[Row], h_rules, box: Box) -> int:
    """Leading rows above the first body row (a label in the first column and a number; without a label
    column, the first row with a number); bounded by an early drawn rule."""
    numbers = [any(is_number(t) for _, _, t in row) for row in grid]
    labelled = [bool(row) and row[0][0] == 0 for row in grid]
    first_body = next((i for i, row in enumerate(grid) if numbers[i] and labelled[i]), None)
    if first_body is None:  # no label column: the first row with a number
        first_body = next((i for i, n in enumerate(numbers) if n), len(grid))
    if first_body in (0, len(grid)):
        return 0
    width = box[2] - box[0]
    for y, x0, x1 in sorted(h_rules):
        if x1 - x0 < 0.5 * width or x1 < box[0] or x0 > box[2]:
            continue
        above = sum(1 for r in region if (r.y0 + r.y1) / 2 < y)
        if 0 < above <= first_body:
            return above
    return min(first_body, len(grid) - 1)


def words_box(words: list[Word]) -> Box:
    return (
        min(w[0] for w in words),
        min(w[1] for w in words),
        max(w[2] for w in words),
        max(w[3] for w in words),
    )
