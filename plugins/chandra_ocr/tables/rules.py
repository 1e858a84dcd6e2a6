"""A page's drawn rules and words in displayed space: the edges ruled grids and frames are made of.

- Edges: axis-parallel lines, thin rectangles as one rule, other rectangles and quads as their
  four sides, closed paths closed; the sides of filled, unstroked boxes (shading) are kept apart.
- A white box inside a ruled white cell (a text box) is white on white: its sides are no edges
  (``_WhiteBoxes``), so a cell holding a text box per line stays one cell.
- Edges within ``SNAP`` points of each other are moved onto their mean position, collinear
  pieces that touch (``JOIN``) become one, and pieces shorter than ``MIN_EDGE`` are dropped
  (``merge_edges``).
- Coordinates are of the displayed page (rotation applied), so rows and columns are those a
  reader sees; ``page_words`` returns words in the same space.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter

import pymupdf

from chandra_ocr.pdf.text_layer import TEXT_FLAGS

Box = tuple[float, float, float, float]  # x0, y0, x1, y1
Word = tuple  # MuPDF word: (x0, y0, x1, y1, text, block_no, line_no, word_no)
_Edge = tuple[float, float, float]  # (position across, start, end along)
_Segment = tuple[float, float, float, float]  # x0, y0, x1, y1
MAX_ITEMS = 20_000  # more drawing items than this: a chart or map, not searched for tables
SNAP = 3.0  # points: parallel edges this close are snapped onto one position
JOIN = 3.0  # points: collinear edges with a gap this small are joined
MIN_EDGE = 3.0  # points: shorter edges are dropped (after joining)
THIN = 3.0  # points: a rectangle this thin (and longer than thick) is one rule
BAND = 24.0  # points: drawings are indexed by the horizontal bands of this height they reach into
_INSIDE = 0.5  # points: a segment this far from level is no row
_BUCKET = 16.0  # points: white boxes are looked up by bands this wide


def page_words(page: pymupdf.Page, textpage: pymupdf.TextPage | None = None) -> list[Word]:
    """The page's words in MuPDF's order, bboxes in displayed space (for ``find_grids``, ``cell_texts``).

    ``textpage``: the page's text extracted with ``TEXT_FLAGS``, if already at hand.
    """
    words = page.get_text("words", flags=TEXT_FLAGS, textpage=textpage)
    if not page.rotation:
        return words
    m = page.rotation_matrix
    return [(*transformed_box(m, w[:4]), *w[4:]) for w in words]


@dataclass(frozen=True)
class Rules:
    """A page's drawn edges in displayed space, before snapping, and the boxes of its drawings."""

    h: list[_Edge]  # horizontal: (y, x0, x1)
    v: list[_Edge]  # vertical: (x, y0, y1)
    boxes: list[Box]  # each drawing's bounding box (for the outlines of touching drawings)
    area: Box  # the displayed page
    drawn_h: list[_Edge] = field(default_factory=list)  # horizontal rules: ``h`` less shading edges
    drawn_v: list[_Edge] = field(default_factory=list)  # vertical rules: ``v`` less shading edges

    @cached_property
    def groups(self) -> list[Box]:
        """The bounding boxes of the groups of touching drawings (``touching_groups`` of ``boxes``)."""
        return touching_groups(self.boxes, self.area)

    @cached_property
    def _columns(self) -> list[_Edge]:
        """The vertical edges and the vertical sides of ``groups``, by position."""
        return sorted([*self.v, *((x, b[1], b[3]) for b in self.groups for x in (b[0], b[2]))])

    def divided(self, box: Box) -> bool:
        """Whether a vertical edge or a side of a group of touching drawings runs through ``box``
        strictly between its sides: without one, no grid of two columns lies inside it."""
        x0, y0, x1, y1 = box
        columns = self._columns
        first = bisect.bisect_right(columns, (x0, math.inf, math.inf))
        return any(
            e[1] <= y1 and e[2] >= y0
            for e in itertools.takewhile(lambda e: e[0] < x1, itertools.islice(columns, first, None))
        )


def drawn_rules(page: pymupdf.Page, paths: list[dict]) -> Rules | None:
    """The edges of ``paths`` (``page.get_cdrawings()``); None past ``MAX_ITEMS`` drawing items."""
    segments: list[_Segment] = []
    shading: list[_Segment] = []  # sides of filled, unstroked boxes
    whites = _WhiteBoxes(page.rect.width * page.rect.height)
    n = 0
    for path in paths:
        items = path["items"]
        n += len(items)
        if n > MAX_ITEMS:
            return None
        if path.get("closePath") and items and items[0][0] == "l" and items[-1][0] == "l":
            items = [*items, ("l", items[-1][2], items[0][1])]
        filled = path.get("type") == "f"
        white = filled and _white(path)
        sides = shading if filled else segments  # where a box's four sides go
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
                elif white:
                    whites.add((x0, y0, x1, y1))
                else:
                    sides += box_sides((x0, y0, x1, y1))
            elif kind == "qu":
                (ax, ay), (bx, by), (cx, cy), (dx, dy) = item[1]  # ul, ur, ll, lr
                segments += [(ax, ay, cx, cy), (cx, cy, dx, dy), (dx, dy, bx, by), (bx, by, ax, ay)]
    shading += [side for box in whites.shown(segments) for side in box_sides(box)]
    m = page.rotation_matrix if page.rotation else None
    if m is not None:
        segments = [(*_point(m, (ax, ay)), *_point(m, (bx, by))) for ax, ay, bx, by in segments]
        shading = [(*_point(m, (ax, ay)), *_point(m, (bx, by))) for ax, ay, bx, by in shading]
    area = tuple(page.rect)
    h, v = axis_parallel(segments, area)
    shade_h, shade_v = axis_parallel(shading, area)
    boxes = sorted({transformed_box(m, p["rect"]) for p in paths}, key=lambda r: (r[3], r[0]))
    return Rules(h + shade_h, v + shade_v, boxes, area, h, v)


def touching_groups(boxes: list[Box], area: Box) -> list[Box]:
    """Bounding boxes of groups of ``boxes`` that touch, a group's box growing as it takes boxes in.

    A group starts at the first box left and takes in, last box first, each box left that touches
    the group's box (``touching``); passes repeat until one takes in none. Only the boxes reaching
    into the horizontal bands of the page (``BAND`` high, within ``area``; boxes off it in the end
    bands) that the group's box covers are looked at, the others being too far to touch it: the
    groups are those of looking at every box, at a cost that grows with the boxes near a group.
    """
    top, bottom = area[1], area[3]
    last = max(1, math.ceil((bottom - top) / BAND)) - 1

    def band(y: float, nan: int) -> int:
        if top <= y < bottom:
            return min(int((y - top) // BAND), last)
        if y < top:
            return 0
        return last if y >= bottom else nan

    height = bottom - top
    spans = [  # the bands each box reaches into; the arithmetic of ``band`` for a box on the page
        range(int(lo // BAND), min(int(hi // BAND), last) + 1)
        if (lo := b[1] - SNAP - top) >= 0 and (hi := b[3] + SNAP - top) < height
        else range(band(b[1] - SNAP, 0), band(b[3] + SNAP, last) + 1)
        for b in boxes
    ]
    near: list[set[int]] = [set() for _ in range(last + 1)]  # band → boxes left reaching into it
    for i, span in enumerate(spans):
        for k in span:
            near[k].add(i)
    left = [True] * len(boxes)

    def take(i: int) -> None:
        left[i] = False
        for k in spans[i]:
            near[k].discard(i)

    out = []
    for seed, box in enumerate(boxes):
        if not left[seed]:
            continue
        take(seed)
        grown = True
        while grown:  # one pass: the boxes left, last first, against the growing box
            grown = False
            end, reach, todo, at = len(boxes), (0, -1), [], 0
            while True:
                if (now := (band(box[1], 0), band(box[3], last))) != reach:  # the box reaches new bands
                    reach, at = now, 0
                    todo = sorted(
                        {i for k in range(now[0], now[1] + 1) for i in near[k] if i < end}, reverse=True
                    )
                while at < len(todo) and not touching(box, boxes[todo[at]]):
                    at += 1
                if at == len(todo):
                    break
                end = todo[at]
                take(end)
                at += 1
                r = boxes[end]
                box = (min(box[0], r[0]), min(box[1], r[1]), max(box[2], r[2]), max(box[3], r[3]))
                grown = True
        out.append(box)
    return out


def touching(a: Box, b: Box) -> bool:
    """Whether a corner of one box lies within the other (widened by ``SNAP``)."""
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    return (
        (b0 - SNAP <= a0 <= b2 + SNAP or b0 - SNAP <= a2 <= b2 + SNAP)
        and (b1 - SNAP <= a1 <= b3 + SNAP or b1 - SNAP <= a3 <= b3 + SNAP)
    ) or (
        (a0 - SNAP <= b0 <= a2 + SNAP or a0 - SNAP <= b2 <= a2 + SNAP)
        and (a1 - SNAP <= b1 <= a3 + SNAP or a1 - SNAP <= b3 <= a3 + SNAP)
    )


def _white(path: dict) -> bool:
    """Whether ``path`` is filled with opaque white."""
    fill = path.get("fill") or ()
    opaque = path.get("fill_opacity") is None or path["fill_opacity"] >= 0.99
    return len(fill) == 3 and min(fill) >= 0.99 and opaque


class _WhiteBoxes:
    """The white boxes of a page (filled opaque white, unstroked; not thin: those are rules).

    Their sides are shading edges like any filled box's (the cells of a table shaded in white and
    colour), but a white box inside a white box drawn before it that is a ruled cell (``_cell``: a
    text box in a ruled cell) is white on white: nothing shows, its sides are no edges.
    Boxes over half the page are backgrounds, holding none.
    """

    def __init__(self, page_area: float) -> None:
        self.page_area = page_area
        self.boxes: list[Box] = []
        self.nested: dict[int, Box] = {}  # boxes inside an earlier white box: that box
        self.bands: dict[int, list[Box]] = {}  # the boxes by ``_BUCKET``-point bands of their height

    def add(self, box: Box) -> None:
        x0, y0, x1, y1 = box
        if (x1 - x0) * (y1 - y0) <= 0.5 * self.page_area:
            lo, hi = int(y0 // _BUCKET), int(y1 // _BUCKET)
            outer = next(
                (
                    o
                    for o in self.bands.get(lo, ())
                    if o[0] <= x0 and o[1] <= y0 and x1 <= o[2] and y1 <= o[3]
                ),
                None,
            )
            if outer is not None:
                self.nested[len(self.boxes)] = outer
            for k in range(lo, hi + 1):
                self.bands.setdefault(k, []).append(box)
        self.boxes.append(box)

    def shown(self, rules: list[_Segment]) -> list[Box]:
        """The boxes whose sides show, ``rules`` being the page's drawn rules."""
        if not self.nested:
            return self.boxes
        bands: tuple[dict[int, list[_Segment]], dict[int, list[_Segment]]] = (
            {},
            {},
        )  # rows by y, columns by x
        for e in rules:
            if abs(e[1] - e[3]) <= _INSIDE:
                bands[0].setdefault(int(e[1] // _BUCKET), []).append(e)
            elif abs(e[0] - e[2]) <= _INSIDE:
                for b in range(int(min(e[1], e[3]) // _BUCKET), int(max(e[1], e[3]) // _BUCKET) + 1):
                    bands[1].setdefault(b, []).append(e)
        hidden = {k for k, cell in self.nested.items() if _cell(cell, *bands)}
        return [box for k, box in enumerate(self.boxes) if k not in hidden]


def _cell(box: Box, rows: dict[int, list[_Segment]], columns: dict[int, list[_Segment]]) -> bool:
    """Whether ``box`` is a ruled cell: rules (``rows``: horizontal ones by ``_BUCKET`` bands of y;
    ``columns``: vertical ones by the bands they cross) along most of its top and bottom (within
    ``SNAP``), none through its inside."""
    x0, y0, x1, y1 = box
    for y in (y0, y1):
        near = {e for b in (int((y - SNAP) // _BUCKET), int((y + SNAP) // _BUCKET)) for e in rows.get(b, ())}
        along = sum(
            max(0.0, min(x1, max(e[0], e[2])) - max(x0, min(e[0], e[2])))
            for e in near
            if abs((e[1] + e[3]) / 2 - y) <= SNAP
        )
        if along < 0.5 * (x1 - x0):
            return False
    spanned = range(int(y0 // _BUCKET), int(y1 // _BUCKET) + 1)
    across = any(
        y0 + SNAP < e[1] < y1 - SNAP and min(x1, max(e[0], e[2])) - max(x0, min(e[0], e[2])) > SNAP
        for b in spanned
        for e in rows.get(b, ())
    )
    down = any(
        x0 + SNAP < e[0] < x1 - SNAP and min(y1, max(e[1], e[3])) - max(y0, min(e[1], e[3])) > SNAP
        for b in spanned
        for e in columns.get(b, ())
    )
    return not across and not down


def transformed_box(m: pymupdf.Matrix | None, r) -> Box:
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


def axis_parallel(
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


def box_sides(box: Box) -> list[tuple[float, float, float, float]]:
    """The four sides of a box as segments."""
    x0, y0, x1, y1 = box
    return [(x0, y0, x0, y1), (x0, y1, x1, y1), (x1, y1, x1, y0), (x1, y0, x0, y0)]


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
