"""Frames: horizontal rules of one extent (perhaps with column rules), found from the drawn rules alone.

The cheap test before partly ruled tables (``tables/partly_ruled.py``) look at words: most pages
have no frame, and no word is read then. Three or more horizontal rules at least ``MIN_WIDTH``
long with the same ends (within ``SAME`` points), or two with column rules. Column rules inside
them that start or end on one of them stretch the frame to their ends (a table ruled only under
its header, the columns ruled down). Rules more than ``MAX_BAND`` apart with no column rule
between them frame running text, not a table; the sides of filled boxes (shading) are not rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from chandra_ocr.tables.rules import Box, Rules, merge_edges

MIN_WIDTH = 72.0  # points: shorter horizontal rules do not frame a table
SAME = 4.0  # points: rule ends this close are the same
MAX_BAND = 200.0  # points: rules further apart, with no column rule between, frame running text
MIN_HEIGHT = 6.0  # points: a lower frame holds no line (a double rule)


@dataclass(frozen=True)
class Frame:
    """Horizontal rules of one extent and the column rules inside them."""

    box: Box
    ys: list[float]  # the horizontal rules, top to bottom
    xs: list[float]  # column rules running through most of the frame, left to right
    partial: list[tuple[float, float, float]]  # shorter horizontal rules inside it (y, x0, x1)
    columns: list[tuple[float, float, float]]  # the column rules at ``xs`` with their extents (x, y0, y1)


def frames(rules: Rules) -> list[Frame]:
    """The frames among the page's drawn rules, top to bottom (module docstring); no word is read."""
    long = [e for e in rules.drawn_h if e[2] - e[1] >= MIN_WIDTH]
    if len(long) < 2:
        return []
    groups: list[list[tuple[float, float, float]]] = []
    for e in merge_edges(long):
        group = next((g for g in groups if abs(g[0][1] - e[1]) <= SAME and abs(g[0][2] - e[2]) <= SAME), None)
        if group is None:
            groups.append([e])
        else:
            group.append(e)
    groups = [g for g in groups if len(g) >= 2]
    if not groups:
        return []
    vertical = merge_edges(rules.drawn_v) if rules.drawn_v else []
    out = []
    drawn = merge_edges(rules.drawn_h)
    for g in groups:
        x0, x1 = min(e[1] for e in g), max(e[2] for e in g)
        inside = [v for v in vertical if x0 + SAME < v[0] < x1 - SAME]
        for ys in _stacks(sorted(e[0] for e in g), inside):
            touching = [v for v in inside if _touches(v, ys)]
            top = min([ys[0], *(v[1] for v in touching)])
            bottom = max([ys[-1], *(v[2] for v in touching)])
            if bottom - top >= MIN_HEIGHT and (len(ys) >= 3 or touching):
                long_v = [v for v in touching if v[2] - v[1] >= 0.5 * (bottom - top)]
                xs = sorted({round(v[0], 1) for v in long_v})
                partial = [
                    e for e in drawn if top < e[0] < bottom and x0 - SAME <= e[1] and e[2] <= x1 + SAME
                ]
                shorter = [e for e in partial if e[2] - e[1] < x1 - x0 - SAME]
                out.append(Frame((x0, top, x1, bottom), ys, xs, shorter, long_v))
    return sorted(out, key=lambda f: f.box[1])


def _stacks(ys: list[float], vertical: list[tuple[float, float, float]]) -> list[list[float]]:
    """Rule positions ``ys`` split where two are more than ``MAX_BAND`` apart with no column rule
    between them (running text between rules: a page's header and footer rules); runs of two or more."""
    out, run = [], ys[:1]
    for y in ys[1:]:
        if y - run[-1] > MAX_BAND and not any(v[1] <= run[-1] + SAME and v[2] >= y - SAME for v in vertical):
            out.append(run)
            run = []
        run.append(y)
    out.append(run)
    return [r for r in out if len(r) >= 2]


def _touches(v: tuple[float, float, float], ys: list[float]) -> bool:
    """Whether vertical rule ``v`` starts or ends on one of the rules at ``ys``, or runs between them."""
    return any(abs(v[1] - y) <= SAME or abs(v[2] - y) <= SAME for y in ys) or ys[0] <= v[1] < v[2] <= ys[-1]
