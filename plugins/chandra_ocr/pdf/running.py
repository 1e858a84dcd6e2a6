"""Running headers and footers across a document's pages: the same short line near the same edge.

A block in the top or bottom ``text_layer.RUNNING_BAND`` of its page, of at most two lines and
``MAX_CHARS`` characters, whose text with digits masked (page numbers, dates) recurs near the same
edge on at least ``MIN_SHARE`` of the pages (two at least), is a ``page_header``/``page_footer``
there, never a heading; blocks are put back in reading order (headers first, footers last).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from chandra_ocr.document import Block
from chandra_ocr.pdf.text_layer import RUNNING_BAND, reading_order

MAX_CHARS = 120
MIN_SHARE = 0.5  # of the document's pages (with text blocks)
_DIGITS = re.compile(r"\d+")
_EDGE_LABELS = ("page_header", "page_footer")


def label_running(pages: dict[int, list[Block]], heights: dict[int, float]) -> dict[int, list[Block]]:
    """``pages`` (page_no → blocks) with recurring edge lines labelled; ``heights``: page heights (pt)."""
    if len(pages) < 2:
        return pages
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for page_no, blocks in pages.items():
        for b in blocks:
            if (key := _key(b, heights.get(page_no, 0.0))) is not None:
                seen[key].add(page_no)
    need = max(2, MIN_SHARE * len(pages))
    running = {key for key, on in seen.items() if len(on) >= need}
    if not running:
        return pages
    out = {}
    for page_no, blocks in pages.items():
        changed, relabelled = list(blocks), False  # (blocks compared field by field cost as much as the rest)
        for i, b in enumerate(blocks):
            key = _key(b, heights.get(page_no, 0.0))
            if key is not None and key in running and (b.label, b.level) != (key[0], None):
                changed[i], relabelled = dataclasses.replace(b, label=key[0], level=None), True
        out[page_no] = reading_order(changed) if relabelled else blocks
    return out


def _key(block: Block, height: float) -> tuple[str, str] | None:
    """(edge label, masked text) of a block that may be a running line, else None."""
    if block.bbox is None or not height or block.label in ("table", "caption") or len(block.text) > MAX_CHARS:
        return None
    if block.text.count("\n") > 1:
        return None
    if block.bbox[3] <= height * RUNNING_BAND:
        edge = _EDGE_LABELS[0]
    elif block.bbox[1] >= height * (1 - RUNNING_BAND):
        edge = _EDGE_LABELS[1]
    else:
        return None
    return edge, " ".join(_DIGITS.sub("#", block.text.casefold()).split())
