"""Header rows set in bold, for text-layer tables the text rules found no header for.

The text rules (``tables/markup.py``, ``stream.header_rows``) need a number in the body;
tables of names, places or marks have none. Their header is often set apart by weight only: the
table's leading visual lines all bold (MuPDF's bold flag or a bold font name), the lines below
mostly not (at most ``BODY_BOLD`` of their spans). The leading rows whose words all lie on those
bold lines — ``MAX_ROWS`` at most, two body rows left — become the header. The page's spans are
read once, from its TextPage, and only when one of its tables has no header.
"""

from __future__ import annotations

import pymupdf

from chandra_ocr.document import BBoxPt, Table
from chandra_ocr.pdf.text_layer import TEXT_FLAGS
from chandra_ocr.tables.markup import grid, with_header_rows

MAX_ROWS = 4  # header rows at most
BODY_BOLD = 0.25  # the body's share of bold spans at most: more, and weight sets nothing apart
SAME_LINE = 2.0  # points: lines whose tops are this close are one visual line

_Span = tuple[float, dict]  # (its line's top, the span)


def bold_headers(
    page: pymupdf.Page, tables: list[Table], textpage: pymupdf.TextPage | None = None
) -> list[Table]:
    """``tables`` of ``page`` with their bold leading rows as the header where they have none and
    their body is not bold. ``textpage``: the page's text extracted with ``TEXT_FLAGS``, if at hand."""
    if not any(_bare(t) for t in tables):
        return tables
    spans = _page_spans(page, textpage)
    return [_bold_header(t, spans) if _bare(t) else t for t in tables]


def _bare(table: Table) -> bool:
    return table.bbox is not None and table.n_rows >= 3 and not any(c.is_header for c in table.cells)


def _bold_header(table: Table, spans: list[_Span]) -> Table:
    assert table.bbox is not None  # _bare
    lines = _visual_lines([s for s in spans if _inside(s[1]["bbox"], table.bbox)])
    lead = 0
    while lead < len(lines) and all(map(_bold, lines[lead])):
        lead += 1
    body = [span for line in lines[lead:] for span in line]
    if not lead or not body or sum(map(_bold, body)) > BODY_BOLD * len(body):
        return table
    bold_words = {w for line in lines[:lead] for span in line for w in span["text"].split()}
    rows = grid(table)
    n = 0
    while (
        n < min(MAX_ROWS, table.n_rows - 2) and any(rows[n]) and set(" ".join(rows[n]).split()) <= bold_words
    ):
        n += 1
    return with_header_rows(table, n) if n else table


def _page_spans(page: pymupdf.Page, textpage: pymupdf.TextPage | None) -> list[_Span]:
    """The page's non-blank spans with their lines' tops."""
    text = page.get_text("dict", flags=TEXT_FLAGS, textpage=textpage)
    return [
        (line["bbox"][1], span)
        for block in text["blocks"]
        for line in block.get("lines", ())
        for span in line["spans"]
        if span["text"].strip()
    ]


def _inside(bbox: tuple[float, float, float, float], box: BBoxPt) -> bool:
    """Whether the centre of ``bbox`` lies in ``box``."""
    x, y = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _visual_lines(spans: list[_Span]) -> list[list[dict]]:
    """``spans`` grouped into visual lines, top to bottom."""
    lines: list[list[dict]] = []
    top = None
    for y, span in sorted(spans, key=lambda s: s[0]):
        if top is None or y - top > SAME_LINE:
            lines.append([])
            top = y
        lines[-1].append(span)
    return lines


def _bold(span: dict) -> bool:
    return bool(span["flags"] & pymupdf.TEXT_FONT_BOLD) or "bold" in span["font"].lower()
