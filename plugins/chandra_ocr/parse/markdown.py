"""Markdown page output (LightOnOCR) and plain text → blocks and tables, without bboxes.

One left-to-right pass over the lines: fenced code, ``$$``/``\\[`` display math, embedded HTML
tables, pipe tables, ATX and setext headings, lists, images and paragraphs. Any text parses
(an empty page gives no blocks); the parser never raises on ``str`` input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from chandra_ocr.document import Block, ParsedPage, Table
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.html_text import html_to_text
from chandra_ocr.tables.markup import table_from_html, table_from_markdown

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*)|[ \t]*$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_DELIMITER = re.compile(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?")
_RULE = re.compile(r" {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})")
_IMAGE_LINE = re.compile(r"\s*!\[([^\]]*)\]\([^)]*\)\s*")
_TABLE_OPEN = re.compile(r"<table\b", re.IGNORECASE)
_TABLE_CLOSE = re.compile(r"</table\s*>", re.IGNORECASE)


@dataclass
class _Page:
    """Blocks and tables collected so far."""

    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    table_blocks: int = 0  # table blocks with text so far: the next Table's number

    def add(self, label: str, text: str, *, html: str | None = None, level: int | None = None) -> None:
        if text.strip() or label == "figure":
            self.blocks.append(Block(len(self.blocks), label, None, text.strip(), html=html, level=level))

    def add_table(self, text: str, build: Callable[[int], Table], html: str | None = None) -> None:
        """A table block; ``build(table_no)`` makes its Table (a ParseError leaves the text only)."""
        self.add("table", text, html=html)
        if not text.strip():
            return
        self.table_blocks += 1
        with contextlib.suppress(ParseError):  # a table without cells keeps its text only
            self.tables.append(build(self.table_blocks))
            self.blocks[-1] = dataclasses.replace(self.blocks[-1], table_no=self.table_blocks)


def parse_markdown(md: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Parse one page of Markdown into blocks (``bbox`` None) and tables.

    Headings → ``section_header`` with their level, paragraphs → ``text``, list runs → ``list``,
    pipe tables → ``table`` + ``Table`` (source "markdown"), embedded ``<table>`` HTML →
    ``table`` + ``Table`` (source "html"), ``$$…$$`` / ``\\[…\\]`` → ``formula``, code fences →
    ``code``, a line holding only an image → ``figure`` (its alt text). ``width_pt`` and
    ``height_pt`` are accepted for the common parser signature; Markdown carries no positions.
    """
    page = _Page()
    lines = md.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    para: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if para and _SETEXT.fullmatch(line):
            page.add("section_header", " ".join(para), level=1 if stripped[0] == "=" else 2)
            para, i = [], i + 1
            continue
        nxt = _block_end(lines, i, page)
        if nxt is not None:
            _flush(page, para)
            para, i = [], nxt
            continue
        if not stripped:
            _flush(page, para)
            para = []
        else:
            para.append(line)
        i += 1
    _flush(page, para)
    return ParsedPage(blocks=page.blocks, tables=page.tables)


def _flush(page: _Page, para: list[str]) -> None:
    if para:
        page.add("text", "\n".join(ln.strip() for ln in para))


def _block_end(lines: list[str], i: int, page: _Page) -> int | None:
    """If a non-paragraph block starts at line ``i``, add it and return the next line index."""
    line = lines[i]
    stripped = line.strip()
    if m := _FENCE.match(line):
        fence = m.group(1)
        end = _find(lines, i + 1, lambda s: s.strip().startswith(fence))
        page.add("code", "\n".join(lines[i + 1 : end]))
        return end + 1
    if stripped.startswith("$$") or stripped.startswith("\\["):
        return _math(lines, i, page)
    if _TABLE_OPEN.match(stripped):
        return _html_table(lines, i, page)
    if "|" in stripped and i + 1 < len(lines) and _DELIMITER.fullmatch(lines[i + 1].strip()):
        end = _find(lines, i + 2, lambda s: "|" not in s or not s.strip())
        text = "\n".join(ln.strip() for ln in lines[i:end])
        page.add_table(text, lambda n: table_from_markdown(text, table_no=n))
        return end
    if m := _ATX.match(line):
        page.add("section_header", _strip_closing_hashes(m.group(2) or ""), level=len(m.group(1)))
        return i + 1
    if _LIST_ITEM.match(line):
        end = _find(lines, i + 1, lambda s: not s.strip() or not (s[:1] in " \t" or _LIST_ITEM.match(s)))
        page.add("list", "\n".join(ln.rstrip() for ln in lines[i:end]))
        return end
    if m := _IMAGE_LINE.fullmatch(line):
        page.add("figure", m.group(1))
        return i + 1
    if _RULE.fullmatch(line):
        return i + 1
    return None


def _strip_closing_hashes(text: str) -> str:
    """``Title ##`` → ``Title`` (an optional closing sequence of an ATX heading)."""
    text = text.rstrip()
    bare = text.rstrip("#")
    return bare.rstrip() if bare != text and (not bare or bare[-1] in " \t") else text


def _find(lines: list[str], start: int, stop: Callable[[str], bool]) -> int:
    """Index of the first line from ``start`` where ``stop`` holds, else ``len(lines)``."""
    for j in range(start, len(lines)):
        if stop(lines[j]):
            return j
    return len(lines)


def _math(lines: list[str], i: int, page: _Page) -> int:
    stripped = lines[i].strip()
    opener, closer = ("$$", "$$") if stripped.startswith("$$") else ("\\[", "\\]")
    body = stripped[len(opener) :]
    if closer in body:  # one-line display math
        page.add("formula", f"$${body[: body.index(closer)].strip()}$$")
        return i + 1
    end = _find(lines, i + 1, lambda s: closer in s)
    inner = [body, *lines[i + 1 : end]]
    if end < len(lines):
        inner.append(lines[end][: lines[end].index(closer)])
    page.add("formula", "$$" + "\n".join(s.strip() for s in inner if s.strip()) + "$$")
    return end + 1


def _html_table(lines: list[str], i: int, page: _Page) -> int:
    """An embedded HTML table: lines up to the one closing the outermost ``<table>``."""
    depth = 0
    end = len(lines) - 1
    for j in range(i, len(lines)):
        depth += len(_TABLE_OPEN.findall(lines[j])) - len(_TABLE_CLOSE.findall(lines[j]))
        if depth <= 0:
            end = j
            break
    html = "\n".join(lines[i : end + 1])
    page.add_table(html_to_text(html), lambda n: table_from_html(html, table_no=n, bbox=None), html=html)
    return end + 1
