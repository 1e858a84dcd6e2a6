"""Word alignment on text-layer pages: words → visual rows → segments → columns → cells.

The building blocks of the tables found without (all) rules (``tables/stream.py``,
``tables/partly_ruled.py``), written against MuPDF's word list:

- Visual rows: words clustered by their vertical middle (page-wide, so a row runs across cells).
- Segments: within a row, words separated by less than ``GAP`` × the word height belong to one
  segment (a cell candidate); a wider gap separates cells. Dot leaders join the text before
  them; a number after them starts a segment.
- Columns: x ranges covered by the segments of at most ``SPAN_SHARE`` of the multi-segment rows
  are gutters; the ranges between gutters are columns. A segment covering several columns is one
  cell spanning them (spanning headers), unless it is numbers set close (numbers do not span
  columns). A column most of whose cells have a word gap at the same x is two columns set closer
  than a cell gap (``SPLIT_GAP``, ``SPLIT_SHARE``), unless the text right of the gap is a unit.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass, field

from chandra_ocr.tables.rules import Box, Word

GAP = 0.5  # × word height: a wider gap between words of a row separates cells
SPLIT_GAP = 0.3  # × word height: a word gap this wide, at one x in most cells of a column, splits it
SPLIT_SHARE = 0.8
SPAN_SHARE = 0.15  # x ranges covered by at most this share of a region's rows are gutters
MIN_ROWS = 3
_AMOUNT = r"[$€£¥]?\s*\d[\d\s,.]*(?:%|[KMBkm]|bn|mn)?"  # "$1.1M", "2.5bn"
_NUMERIC = re.compile(rf"[-+±−–(]?\s*{_AMOUNT}(?:\s*[-–—]\s*{_AMOUNT})?\)?\*?\s*[$€£¥]?")  # a range counts
_DOTS = re.compile(r"[.…·]{1,}$|^[.…·]+$")


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


def keep_segments(region: list[Row], wanted) -> list[Row]:
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


def overlaps(seg: Seg, col: tuple[float, float]) -> bool:
    return seg.x0 <= col[1] and seg.x1 >= col[0]


def place_cells(row: Row, cols: list[tuple[float, float]]) -> list[tuple[int, int, str]]:
    """(first column, colspan, text) of each cell of ``row``; segments sharing a column are joined."""
    cells: list[tuple[int, int, str]] = []
    for s in _numbers_apart(row.segs, cols):
        hit = [k for k, c in enumerate(cols) if overlaps(s, c)]
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
        if numbers and sum(1 for c in cols if overlaps(s, c)) >= 2:
            out += [Seg([w]) for w in s.words]
        else:
            out.append(s)
    return out


def _rtl(word: str) -> bool:
    """Whether ``word`` starts with a right-to-left letter (Hebrew, Arabic, ...)."""
    return word[0] >= "\u0590" and unicodedata.bidirectional(word[0]) in ("R", "AL")


def joined_lines(first: str, second: str) -> str:
    """The text of a cell's two lines: joined by a space, but none after a word broken at a hyphen
    ("Non-" + "Negligent")."""
    if len(first) >= 2 and first[-1] == "-" and first[-2].isalpha():
        return first + second
    return f"{first} {second}"


def is_number(text: str) -> bool:
    return bool(_NUMERIC.fullmatch(text.strip()))


def words_box(words: list[Word]) -> Box:
    return (
        min(w[0] for w in words),
        min(w[1] for w in words),
        max(w[2] for w in words),
        max(w[3] for w in words),
    )
