"""Text-layer extraction: one PyMuPDF pass per page → labelled blocks in reading order + quality stats."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pymupdf

from chandra_ocr.document import Block

if TYPE_CHECKING:
    from collections.abc import Iterable

# Clip to the page, expand ligatures (better for search), keep images out of the pass (they would
# be copied into Python); unmapped glyphs come back as U+FFFD instead of their CID.
TEXT_FLAGS = pymupdf.TEXT_MEDIABOX_CLIP | pymupdf.TEXT_PRESERVE_WHITESPACE
_VISIBLE = pymupdf.mupdf.FZ_STEXT_FILLED | pymupdf.mupdf.FZ_STEXT_STROKED
_UNMAPPED = pymupdf.mupdf.FZ_STEXT_UNICODE_IS_CID | pymupdf.mupdf.FZ_STEXT_UNICODE_IS_GID
_BOLD_CHAR = pymupdf.mupdf.FZ_STEXT_BOLD

BAND = 0.06  # share of the page height treated as the header / footer band
HEADING_WORDS = 12  # a longer block with a comma in it is a sentence, not a heading
HEADING_RUN = 3  # this many headings of one level in a row are not headings
CELL_SHARE = 0.3  # a text line narrower than this share of the page width may be a table cell
RUNNING_BAND = 0.15  # a one-line block this close to the edge with a page number is a running header
_PAGE_NUMBER = re.compile(
    r"(?:^|\s)(?:[A-Z]{1,2}-)?(?:\d{1,4}|[ivxlc]{1,6}|[IVXLC]{1,6})$|^(?:\d{1,4}|[ivxlc]{1,6}|[IVXLC]{1,6})(?:\s|$)"
)
_BAD_GLYPH = re.compile("[\ufffd\ue000-\uf8ff\U000f0000-\U0010ffff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LIST_ITEM = re.compile(
    r"^(?:[•◦▪▫●○■□‣⁃∙·➢►▶✓✔\-–—*\ufffd\ue000-\uf8ff]|\(?\d{1,3}[.)]|\(?[a-z][.)]|\((?:[ivx]{1,4})\))\s"
)
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200b\u202f\u205f\u3000]+")
_HYPHEN_END = re.compile(r"[^\W\d_][-\u00ad\u2010]$")


@dataclass(frozen=True)
class TextStats:
    """What triage needs to judge a page's text layer."""

    n_chars: int  # non-space characters, visible or not
    bad_glyph_ratio: float  # share of U+FFFD / private-use / control / unmapped-glyph characters
    invisible_ratio: float  # share drawn invisibly (render mode 3: typically an earlier OCR layer)
    image_cover: float | None = None  # share of the page covered by its largest image; None: not measured
    row_splits: int = (
        0  # short text lines starting right of another line on the same row (cells side by side)
    )


@dataclass(frozen=True)
class PageText:
    """The blocks of one page and the statistics of the same extraction pass."""

    blocks: list[Block]
    stats: TextStats

    @property
    def text(self) -> str:
        """The page text: blocks in reading order, separated by blank lines."""
        return "\n\n".join(b.text for b in self.blocks)


@dataclass
class _Raw:
    """One MuPDF text block before labelling (bbox in displayed page space)."""

    bbox: tuple[float, float, float, float]
    text: str
    n_lines: int
    size: float  # dominant font size (by characters)
    bold: float  # share of bold characters


def read_page(page: pymupdf.Page, textpage: pymupdf.TextPage | None = None) -> PageText:
    """Extract labelled blocks and text statistics from ``page`` in one text pass (images not measured).

    ``textpage``: the page's text, already extracted with ``TEXT_FLAGS`` (made here when None).
    """
    data = page.get_text("dict", flags=TEXT_FLAGS, textpage=textpage)
    raws, tally = _collect(data["blocks"], page.rotation_matrix if page.rotation else None)
    blocks = []
    if raws:
        body, height = _body_size(raws), page.rect.height
        edges = (min(raws, key=lambda r: r.bbox[1]), max(raws, key=lambda r: r.bbox[3]))
        blocks = _demote_runs([_label(raw, body, height, edges) for raw in raws])
    n = tally.chars
    stats = TextStats(
        n,
        tally.bad / n if n else 0.0,
        tally.invisible / n if n else 0.0,
        None,
        _row_splits(tally.lines, page.rect.width),
    )
    return PageText(blocks=reading_order(blocks), stats=stats)


def text_blocks(page: pymupdf.Page) -> list[Block]:
    """Labelled text blocks of ``page`` in reading order; bboxes in points of the displayed page."""
    return read_page(page).blocks


def largest_image_share(page: pymupdf.Page) -> float:
    """Share of the page area covered by its largest image (0.0 without images; cheap then)."""
    if not page.get_images(full=True):
        return 0.0
    page_rect = page.rect * page.derotation_matrix if page.rotation else page.rect
    area = abs(page_rect)
    if not area:
        return 0.0
    best = 0.0
    for info in page.get_image_info():
        best = max(best, abs(pymupdf.Rect(info["bbox"]) & page_rect) / area)
    return min(best, 1.0)


@dataclass
class _Tally:
    """Character counts over one page."""

    chars: int = 0  # non-space
    bad: int = 0
    invisible: int = 0
    lines: list[tuple[float, float, float, float]] = field(default_factory=list)  # line bboxes (unrotated)


def _collect(blocks: Iterable[dict], rotate: pymupdf.Matrix | None) -> tuple[list[_Raw], _Tally]:
    """Raw text blocks (bbox in displayed space) and the page's character tally."""
    raws: list[_Raw] = []
    tally = _Tally()
    for block in blocks:
        if block["type"] == 0 and (raw := _read_block(block, rotate, tally)) is not None:
            raws.append(raw)
    return raws, tally


def _read_block(block: dict, rotate: pymupdf.Matrix | None, tally: _Tally) -> _Raw | None:
    """One MuPDF text block as a ``_Raw`` (None when it holds no text); counts go into ``tally``."""
    lines: list[str] = []
    sizes: Counter[float] = Counter()
    n_bold = n_block = 0
    row = (0.0, 0.0, 0.0)  # (y0, y1, x1) of the current visual line
    for line in block["lines"]:
        for span in line["spans"]:
            n, bold = _count_span(span, tally)
            n_block += n
            n_bold += n if bold else 0
            if n:
                sizes[round(span["size"] * 2) / 2] += n
        joined = "".join(span["text"] for span in line["spans"])
        if not joined:
            continue
        x0, y0, x1, y1 = line["bbox"]
        tally.lines.append((x0, y0, x1, y1))
        if lines and row[0] <= (y0 + y1) / 2 <= row[1] and x0 >= row[2] - 1:
            lines[-1] += " " + joined  # same visual line, split by MuPDF at a gap
        else:
            lines.append(joined)
        row = (y0, y1, x1)
    text = join_lines(lines)
    if not text or not n_block:
        return None
    tally.chars += n_block
    bbox = pymupdf.Rect(block["bbox"])
    if rotate is not None:
        bbox = bbox * rotate
    size = sizes.most_common(1)[0][0]
    return _Raw((bbox.x0, bbox.y0, bbox.x1, bbox.y1), text, len(lines), size, n_bold / n_block)


def _row_splits(lines: list[tuple[float, float, float, float]], width: float) -> int:
    """How many short lines (under ``CELL_SHARE`` of the page width: cells, not columns of prose)
    start to the right of the line before them on the same row (by middles)."""
    n = 0
    prev = None
    short = CELL_SHARE * width
    for x0, y0, x1, y1 in sorted(lines, key=lambda b: (round((b[1] + b[3]) / 2), b[0])):
        mid = (y0 + y1) / 2
        if prev is not None and prev[1] <= mid <= prev[3] and x0 > prev[2] and x1 - x0 < short:
            n += 1
        prev = (x0, y0, x1, y1)
    return n


def _count_span(span: dict, tally: _Tally) -> tuple[int, bool]:
    """(non-space characters, bold?) of a span; its bad and invisible characters go into ``tally``."""
    text = span["text"]
    n = len(text) - text.count(" ")
    if not n:
        return 0, False
    flags = span["char_flags"]
    if not flags & _VISIBLE:
        tally.invisible += n
    tally.bad += n if flags & _UNMAPPED else len(_BAD_GLYPH.findall(text))
    return n, bool(span["flags"] & pymupdf.TEXT_FONT_BOLD or flags & _BOLD_CHAR)


def join_lines(lines: list[str]) -> str:
    """Lines of one block as text: hyphenation undone, whitespace collapsed, list items on new lines."""
    out = ""
    for raw in lines:
        line = _SPACES.sub(" ", raw).strip()
        if not line:
            continue
        if not out:
            out = line
        elif _LIST_ITEM.match(line):
            out += "\n" + line
        elif _HYPHEN_END.match(out, max(len(out) - 2, 0)) and line[0].islower():  # the last two characters
            out = out[:-1] + line
        else:
            out += " " + line
    return out


def _body_size(raws: list[_Raw]) -> float:
    """The font size carrying most characters on the page (the body text)."""
    weights: Counter[float] = Counter()
    for raw in raws:
        weights[raw.size] += len(raw.text)
    return weights.most_common(1)[0][0] if weights else 0.0


def _label(raw: _Raw, body: float, height: float, edges: tuple[_Raw, _Raw]) -> Block:
    """Label a raw block: page header/footer by position, heading by size/weight, list by its marker."""
    level = _heading_level(raw, body)
    label = _band_label(raw, height, edges) if level is None or raw.n_lines == 1 else None
    if label is not None:
        level = None
    elif level is not None:
        label = "section_header"
    elif _LIST_ITEM.match(raw.text):
        label = "list"
    else:
        label = "text"
    return Block(block_no=0, label=label, bbox=raw.bbox, text=raw.text, level=level)


def _band_label(raw: _Raw, height: float, edges: tuple[_Raw, _Raw]) -> str | None:
    """``page_header``/``page_footer`` for a short block in the edge band, or a running header/footer
    (the top- or bottom-most line, a little further in, carrying a page number); else None."""
    if not height or raw.n_lines > 2 or len(raw.text) > 120:
        return None
    y0, y1 = raw.bbox[1], raw.bbox[3]
    if y0 <= height * BAND:
        return "page_header"
    if y1 >= height * (1 - BAND):
        return "page_footer"
    if raw.n_lines == 1 and _PAGE_NUMBER.search(raw.text):
        if raw is edges[0] and y1 <= height * RUNNING_BAND:
            return "page_header"
        if raw is edges[1] and y0 >= height * (1 - RUNNING_BAND):
            return "page_footer"
    return None


def _heading_level(raw: _Raw, body: float) -> int | None:
    """Heading level 1–4 for a short block clearly larger or bolder than the body text that is not a
    paragraph fragment (``_fragment``), else None."""
    if not body or raw.n_lines > 3 or len(raw.text) > 200 or not any(c.isalpha() for c in raw.text):
        return None
    if _fragment(raw.text) or _not_a_title(raw.text):
        return None
    ratio = raw.size / body
    if ratio >= 1.6:
        return 1
    if ratio >= 1.3:
        return 2
    if ratio >= 1.12:
        return 3
    if raw.bold >= 0.9 and ratio >= 0.95 and raw.n_lines <= 2 and not raw.text.endswith((".", ":", ",")):
        return 4
    return None


def _fragment(text: str) -> bool:
    """Whether a short block reads as a piece of a paragraph, not a heading: it starts in lower case
    (a continued sentence), ends in a comma, semicolon or hyphen, or runs past ``HEADING_WORDS``
    words with a comma inside (a sentence)."""
    first = next((c for c in text if c.isalpha()), "")
    if first.islower() or text.rstrip().endswith((",", ";", "-")):
        return True
    return len(text.split()) > HEADING_WORDS and "," in text


def _not_a_title(text: str) -> bool:
    """Whether a short block cannot be a heading: mostly digits and signs ("Minnesota 41-0907483"), or
    a sentence of several words ending in a full stop ("See accompanying notes to … statements.")."""
    chars = text.replace(" ", "")
    if sum(c.isalpha() for c in chars) * 2 < len(chars):
        return True
    return text.rstrip().endswith(".") and len(text.split()) > 4


def _demote_runs(blocks: list[Block]) -> list[Block]:
    """Headings of one level ``HEADING_RUN`` or more times in a row, nothing between them, are set
    text (code, a list in a larger font, bold table cells): a heading stands over body text."""
    out = list(blocks)
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and out[j].label == "section_header" and out[j].level == out[i].level:
            j += 1
        if j - i >= HEADING_RUN:
            out[i:j] = [replace(b, label="text", level=None) for b in out[i:j]]
        i = max(j, i + 1)
    return out


def reading_order(blocks: list[Block]) -> list[Block]:
    """A page's blocks in reading order: page headers, the body in content-stream order (MuPDF's),
    page footers; renumbered."""
    heads = sorted((b for b in blocks if b.label == "page_header"), key=_top_left)
    feet = sorted((b for b in blocks if b.label == "page_footer"), key=_top_left)
    body = [b for b in blocks if b.label not in ("page_header", "page_footer")]
    return [replace(b, block_no=i) for i, b in enumerate(heads + body + feet)]


def _top_left(block: Block) -> tuple[float, float]:
    # Text-layer blocks all have a box, and running lines are labelled by it (``running._key``).
    assert block.bbox is not None, "a page header or footer without a box"
    return block.bbox[1], block.bbox[0]
