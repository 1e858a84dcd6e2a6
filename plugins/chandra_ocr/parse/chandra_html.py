"""Chandra's layout HTML (top-level ``<div data-bbox data-label>`` blocks) → blocks and tables.

Coordinates: ``data-bbox="x0 y0 x1 y1"`` is normalised 0–1000 relative to the image the model
saw. Engines render the page *as displayed* (``/Rotate`` applied), so the normalised box maps
onto the displayed page size: x by ``width_pt / 1000``, y by ``height_pt / 1000``. For a page
with ``/Rotate 90`` the caller therefore passes the displayed (swapped) width and height — the
parser itself never looks at rotation.
"""

from __future__ import annotations

import dataclasses
import math
import re

from chandra_ocr.document import BBoxPt, Block, ParsedPage, Table
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.html_text import Tag, first_heading_level, html_to_text, iter_tokens
from chandra_ocr.tables.markup import table_from_html

BBOX_SCALE = 1000.0

# Chandra's labels (lower-cased) → the normalised set in document.LABELS; unknown → "other".
LABEL_MAP: dict[str, str] = {
    "text": "text",
    "title": "title",
    "section-header": "section_header",
    "page-header": "page_header",
    "page-footer": "page_footer",
    "table": "table",
    "figure": "figure",
    "image": "figure",
    "diagram": "figure",
    "caption": "caption",
    "footnote": "footnote",
    "equation-block": "formula",
    "chemical-block": "formula",
    "code-block": "code",
    "list-group": "list",
    "form": "form",
    "complex-block": "text",
    "table-of-contents": "text",
    "bibliography": "text",
}
_SKIPPED = frozenset({"blank-page"})
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _label_key(label: str | None) -> str:
    return "-".join((label or "").lower().replace("_", "-").split())


def normalise_label(label: str | None) -> str:
    """A Chandra ``data-label`` (any case, ``_`` or space for ``-``) → a label of document.LABELS."""
    return LABEL_MAP.get(_label_key(label), "other")


def scale_bbox(raw: str | None, width_pt: float, height_pt: float) -> BBoxPt | None:
    """``"x0 y0 x1 y1"`` (0–1000) → points on the displayed page, ordered and clamped; None if invalid."""
    values = [float(v) for v in _NUMBER.findall(raw or "")[:5]]
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        return None
    x0, x1 = sorted(min(max(v, 0.0), BBOX_SCALE) * width_pt / BBOX_SCALE for v in values[0::2])
    y0, y1 = sorted(min(max(v, 0.0), BBOX_SCALE) * height_pt / BBOX_SCALE for v in values[1::2])
    return (x0, y0, x1, y1)


def _top_level_divs(html: str) -> list[tuple[dict[str, str] | None, str]]:
    """(attributes, inner HTML) of each top-level div; stray top-level content gets ``None`` attributes.

    A div left open by truncated output runs to the end of the input.
    """
    pieces: list[tuple[dict[str, str] | None, str]] = []
    depth = 0
    start = 0  # where the current top-level piece's content starts
    attrs: dict[str, str] = {}
    for tok in iter_tokens(html):
        if not isinstance(tok, Tag) or tok.name != "div" or tok.self_closing:
            continue
        if not tok.closing:
            if depth == 0:
                if html[start : tok.start].strip():
                    pieces.append((None, html[start : tok.start]))
                attrs, start = tok.attrs, tok.end
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                pieces.append((attrs, html[start : tok.start]))
                start = tok.end
    rest = html[start:]
    if depth:
        pieces.append((attrs, rest))
    elif rest.strip():
        pieces.append((None, rest))
    return pieces


def parse_chandra_html(html: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Parse one page of Chandra layout HTML into blocks (bboxes in points) and tables.

    ``width_pt`` / ``height_pt`` are the displayed page size (rotation applied). Blocks keep
    their inner HTML; ``Blank-Page`` blocks are dropped; stray content outside the layout divs
    becomes ``text`` blocks without a bbox. Each Table block with text gets a ``Table``
    (numbered 1, 2, … in page order) with the block's bbox and its ``<caption>``, else the text
    of an adjacent Caption block (the one before preferred). Raises ParseError when the output
    has no layout div at all (truncated or garbage output).
    """
    pieces = _top_level_divs(html)
    if not any(a is not None and ("data-bbox" in a or "data-label" in a) for a, _ in pieces):
        raise ParseError("not Chandra layout HTML: no top-level <div> with data-bbox/data-label")
    blocks: list[Block] = []
    for attrs, inner in pieces:
        if attrs is not None and _label_key(attrs.get("data-label")) in _SKIPPED:
            continue
        label = normalise_label(attrs.get("data-label")) if attrs is not None else "text"
        text = html_to_text(inner)
        if attrs is None and not text:
            continue
        level = first_heading_level(inner) if label in ("section_header", "title") else None
        bbox = scale_bbox(attrs.get("data-bbox"), width_pt, height_pt) if attrs is not None else None
        blocks.append(Block(len(blocks), label, bbox, text, html=inner.strip(), level=level))
    tables = _tables(blocks)
    return ParsedPage(blocks=blocks, tables=tables)


def _tables(blocks: list[Block]) -> list[Table]:
    """The tables of the table blocks, each block given its table's number."""
    tables: list[Table] = []
    table_no = 0
    for i, block in enumerate(blocks):
        if block.label != "table" or not block.text.strip():
            continue
        table_no += 1
        try:
            table = table_from_html(block.html or "", table_no=table_no, bbox=block.bbox)
        except ParseError:
            continue  # a Table block without cells keeps its text only
        if table.caption is None:
            table = dataclasses.replace(table, caption=_adjacent_caption(blocks, i))
        tables.append(table)
        blocks[i] = dataclasses.replace(block, table_no=table_no)
    return tables


def _adjacent_caption(blocks: list[Block], i: int) -> str | None:
    for j in (i - 1, i + 1):
        if 0 <= j < len(blocks) and blocks[j].label == "caption" and blocks[j].text:
            return blocks[j].text
    return None
