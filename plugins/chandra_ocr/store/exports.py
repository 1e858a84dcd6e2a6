"""Pages of blocks → page Markdown, document Markdown and the JSON export."""

from __future__ import annotations

import json

from chandra_ocr.document import Block, Document, Page

_SKIP_IN_MARKDOWN = {"page_header", "page_footer"}


def block_markdown(block: Block) -> str:
    """One block as Markdown (tables as their HTML, which Markdown renders)."""
    text = block.text.strip()
    if not text and not block.html:
        return ""
    if block.label in ("section_header", "title"):
        level = block.level or (1 if block.label == "title" else 2)
        return f"{'#' * max(1, min(level, 6))} {' '.join(text.split())}"
    if block.label == "table" and block.html:
        return block.html.strip()
    if block.label == "formula":
        return f"$$\n{text}\n$$"
    if block.label == "code":
        return f"```\n{text}\n```"
    return text


def page_markdown(page: Page) -> str:
    """The page's content blocks as Markdown, running headers and footers left out."""
    parts = (block_markdown(b) for b in page.blocks if b.label not in _SKIP_IN_MARKDOWN)
    return "\n\n".join(p for p in parts if p)


def document_markdown(doc: Document) -> str:
    """All pages' Markdown, each page preceded by an HTML comment naming it."""
    return "\n\n".join(f"<!-- page {p.page_no} -->\n\n{page_markdown(p)}".rstrip() for p in doc.pages) + "\n"


def document_json(doc: Document) -> str:
    """The document model as JSON (stable key order; one line: the C encoder is several times faster)."""
    return json.dumps(doc.to_dict(), ensure_ascii=False, sort_keys=True)
