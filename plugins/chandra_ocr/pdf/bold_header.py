"""Header rows set in bold, for text-layer tables the text rules found no header for.

The text rules (``parse/tables.py``, ``stream_tables.header_rows``) need a number in the body;
tables of names, places or marks have none. Their header is often set apart by weight only: the
table's leading visual lines all bold (MuPDF's bold flag or a bold font name), the lines below
mostly not (at most ``BODY_BOLD`` of their spans). The leading rows whose words all lie on those
bold lines — ``MAX_ROWS`` at most, two body rows left — become the header. The spans are read
only for tables without a header, clipped to the table.
"""

from __future__ import annotations

import pymupdf

from chandra_ocr.document import Table
from chandra_ocr.parse.tables import with_header_rows
from chandra_ocr.pdf.text_layer import TEXT_FLAGS

MAX_ROWS = 4  # header rows at most
BODY_BOLD = 0.25  # the body's share of bold spans at most: more, and weight sets nothing apart
SAME_LINE = 2.0  # points: lines whose tops are this close are one visual line


def bold_header(page: pymupdf.Page, table: Table) -> Table:
    """``table`` with its bold leading rows as the header, when it has none and its body is not bold."""
    if table.bbox is None or table.n_rows < 3 or any(c.is_header for c in table.cells):
        return table
    lines = _visual_lines(page, pymupdf.Rect(table.bbox))
    lead = 0
    while lead < len(lines) and all(map(_bold, lines[lead])):
        lead += 1
    body = [span for line in lines[lead:] for span in line]
    if not lead or not body or sum(map(_bold, body)) > BODY_BOLD * len(body):
        return table
    bold_words = {w for line in lines[:lead] for span in line for w in span["text"].split()}
    rows: dict[int, list[str]] = {}
    for cell in table.cells:
        rows.setdefault(cell.row, []).extend(cell.text.split())
    n = 0
    while n < min(MAX_ROWS, table.n_rows - 2) and rows.get(n) and set(rows[n]) <= bold_words:
        n += 1
    return with_header_rows(table, n) if n else table


def _visual_lines(page: pymupdf.Page, clip: pymupdf.Rect) -> list[list[dict]]:
    """The non-blank spans inside ``clip``, grouped into visual lines, top to bottom."""
    spans = [
        (line["bbox"][1], span)
        for block in page.get_text("dict", clip=clip, flags=TEXT_FLAGS)["blocks"]
        for line in block.get("lines", ())
        for span in line["spans"]
        if span["text"].strip()
    ]
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
