"""Triage: open a PDF, reject what cannot be ingested, and route every page to the text layer or OCR."""

from __future__ import annotations

import logging
import os
import unicodedata
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import pymupdf

from chandra_ocr.config import PdfOptions
from chandra_ocr.document import Block, PageTriage, Table
from chandra_ocr.errors import BadDocumentError, ConfigError
from chandra_ocr.pdf.running import label_running
from chandra_ocr.pdf.text_layer import TEXT_FLAGS, TextStats, largest_image_share, read_page
from chandra_ocr.tables.page import page_tables

log = logging.getLogger(__name__)

INVISIBLE_SHARE = 0.5  # above this share of invisible text over a full-page image: an earlier OCR layer


@dataclass
class DocumentTriage:
    """Routes for all pages of a document, with the text-layer blocks and ruled tables of text-route pages."""

    n_pages: int
    pages: list[PageTriage] = field(default_factory=list)
    text_blocks: dict[int, list[Block]] = field(default_factory=dict)  # page_no → blocks
    tables: dict[int, list[Table]] = field(default_factory=dict)  # page_no → native tables


def triage_document(
    pdf_path: str,
    options: PdfOptions,
    *,
    password: str | None = None,
    force_route: str | None = None,
) -> DocumentTriage:
    """Open ``pdf_path`` and route each page ("text" when its text layer is usable, else "ocr").

    ``force_route`` ("text" or "ocr") puts every page on that route; text blocks are still
    extracted for forced-text pages. Ruled tables of text-route pages become ``Table``s whose
    text blocks are replaced by one ``table`` block each (``tables/native.py``). Raises
    ``BadDocumentError`` (message = quarantine reason) for a missing, empty, non-PDF, unreadable,
    page-less or locked document. A page that fails to extract goes to OCR with the error as
    its reason.
    """
    return joined([triage_pages(pdf_path, options, password=password, force_route=force_route)])


def triage_pages(
    pdf_path: str,
    options: PdfOptions,
    *,
    password: str | None = None,
    force_route: str | None = None,
    pages: tuple[int, int | None] = (0, None),
) -> DocumentTriage:
    """``triage_document`` of the pages from index ``pages[0]`` up to ``pages[1]`` (None: the last),
    without labelling running headers and footers, which takes all the document's pages: ``joined``
    does it once it has the document's parts."""
    if force_route not in (None, "text", "ocr"):
        raise ConfigError(f"force_route must be 'text', 'ocr' or None, got {force_route!r}")
    with open_pdf(pdf_path, password=password) as doc:
        result = DocumentTriage(n_pages=doc.page_count)
        first, end = pages
        for index in range(first, doc.page_count if end is None else min(end, doc.page_count)):
            read = _triage_page(doc, index, options, force_route)
            page_no = read.triage.page_no
            result.pages.append(read.triage)
            if read.blocks is not None and read.triage.route == "text":
                blocks = read.blocks
                tables: list[Table] = []
                if options.native_tables:
                    blocks, tables = _with_tables(read, blocks)
                result.text_blocks[page_no] = blocks
                if tables:
                    result.tables[page_no] = tables
    n_ocr = sum(p.route == "ocr" for p in result.pages)
    log.debug("triaged %s: %d of %d pages, %d to OCR", pdf_path, len(result.pages), result.n_pages, n_ocr)
    return result


def joined(parts: list[DocumentTriage]) -> DocumentTriage:
    """One document's triage from its parts (``triage_pages`` of consecutive page ranges, in order),
    running headers and footers labelled over all its pages."""
    result = DocumentTriage(n_pages=parts[0].n_pages)
    for part in parts:
        result.pages += part.pages
        result.text_blocks.update(part.text_blocks)
        result.tables.update(part.tables)
    heights = {p.page_no: p.height_pt for p in result.pages}
    result.text_blocks = label_running(result.text_blocks, heights)
    return result


def page_route(doc: pymupdf.Document, index: int, options: PdfOptions) -> Literal["text", "ocr"]:
    """The route triage gives page ``index`` of the open ``doc`` (its text layer is read; no tables)."""
    return _triage_page(doc, index, options, None).triage.route


def open_pdf(pdf_path: str, *, password: str | None = None) -> pymupdf.Document:
    """Open ``pdf_path`` as a PDF with at least one page, authenticated; raise BadDocumentError if not."""
    try:
        size = os.path.getsize(pdf_path)
    except OSError as e:
        raise BadDocumentError(f"cannot read file: {e.strerror or e}") from e
    if size == 0:
        raise BadDocumentError("empty file (0 bytes)")
    try:
        doc = pymupdf.open(pdf_path, filetype="pdf")
    except Exception as e:  # MuPDF raises several types for unparsable input
        hint = "" if _has_pdf_header(pdf_path) else "not a PDF (no %PDF header); "
        # the reason names the file, never the host's folders (the row has its source already)
        message = str(e).replace(str(pdf_path), os.path.basename(pdf_path))
        raise BadDocumentError(f"{hint}cannot open: {message}") from e
    try:
        _check_opened(doc, password)
    except BaseException:
        doc.close()
        raise
    return doc


def _check_opened(doc: pymupdf.Document, password: str | None) -> None:
    """Authenticate and check the page count of a freshly opened document."""
    if doc.needs_pass:
        if password is None:
            raise BadDocumentError("encrypted: a password is required to open it")
        if not any(doc.authenticate(form) for form in _password_forms(password)):
            raise BadDocumentError("encrypted: the password given is wrong")
    try:
        n_pages = doc.page_count
    except Exception as e:  # a broken page tree surfaces here
        raise BadDocumentError(f"cannot read the page tree: {e}") from e
    if n_pages == 0:
        raise BadDocumentError("document has no pages")


# RFC 3454 table B.1: characters SASLprep maps to nothing (soft hyphen, joiners, variation selectors, ...)
_SASL_NOTHING = dict.fromkeys(
    [0x00AD, 0x034F, 0x1806, 0x180B, 0x180C, 0x180D, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF]
    + list(range(0xFE00, 0xFE10))
)


def _password_forms(password: str) -> list[str]:
    """The password as given, then SASLprep-prepared (RFC 4013 mapping + NFKC), which AES-256 (R6)
    files expect and MuPDF does not apply itself."""
    mapped = "".join(" " if unicodedata.category(c) == "Zs" else c for c in password.translate(_SASL_NOTHING))
    prepared = unicodedata.normalize("NFKC", mapped)
    return [password] if prepared == password else [password, prepared]


def _has_pdf_header(pdf_path: str) -> bool:
    """Whether the first KiB holds ``%PDF-`` (readers accept junk before it)."""
    with open(pdf_path, "rb") as f:
        return b"%PDF-" in f.read(1024)


class _PageRead(NamedTuple):
    """One page's route and, when its text layer was read, its blocks and the MuPDF objects read."""

    triage: PageTriage
    blocks: list[Block] | None = None
    page: pymupdf.Page | None = None
    textpage: pymupdf.TextPage | None = None
    row_splits: int = 0  # TextStats.row_splits


def _triage_page(
    doc: pymupdf.Document, index: int, options: PdfOptions, force_route: str | None
) -> _PageRead:
    """Route one page; extraction errors send it to OCR instead of failing the document."""
    page_no = index + 1
    try:
        page = doc.load_page(index)
        width, height, rotation = page.rect.width, page.rect.height, page.rotation
    except Exception as e:  # a broken page object must not kill the document
        log.warning("page %d cannot be loaded: %s", page_no, e)
        return _PageRead(PageTriage(page_no, 0.0, 0.0, 0, "ocr", f"page cannot be loaded: {e}", 0))
    if force_route == "ocr":
        return _PageRead(PageTriage(page_no, width, height, rotation, "ocr", "forced", 0))
    try:
        textpage = page.get_textpage(flags=TEXT_FLAGS)
        extracted = read_page(page, textpage)
        route, reason = _route(page, extracted.stats, options)
    except Exception as e:  # MuPDF errors on one page's content
        log.warning("page %d text extraction failed: %s", page_no, e)
        route = "text" if force_route == "text" else "ocr"
        reason = f"text extraction failed: {e}"
        return _PageRead(PageTriage(page_no, width, height, rotation, route, reason, 0))
    if force_route == "text":
        route, reason = "text", "forced"
    n_chars = extracted.stats.n_chars
    triage = PageTriage(page_no, width, height, rotation, route, reason, n_chars)
    return _PageRead(triage, extracted.blocks, page, textpage, extracted.stats.row_splits)


def _with_tables(read: _PageRead, blocks: list[Block]) -> tuple[list[Block], list[Table]]:
    """The page's tables and its blocks with table blocks in place; a failure keeps the text."""
    assert read.page is not None, "text blocks without the page they were read from"  # see _triage_page
    try:
        return page_tables(read.page, blocks, read.textpage, read.row_splits)
    except Exception as e:  # MuPDF or table-finder errors on odd drawings must not cost the page
        log.warning("page %d table detection failed: %s", read.triage.page_no, e)
        return blocks, []


def _route(page: pymupdf.Page, stats: TextStats, options: PdfOptions) -> tuple[Literal["text", "ocr"], str]:
    """The route for a page from its text statistics (images measured only when they matter)."""
    if stats.n_chars < options.min_text_chars:
        if largest_image_share(page) >= options.image_cover_ratio:
            return "ocr", "full-page image"
        return "ocr", "few characters"
    if stats.bad_glyph_ratio > options.max_bad_glyph_ratio:
        return "ocr", "unmapped glyphs"
    if stats.invisible_ratio > INVISIBLE_SHARE and largest_image_share(page) >= options.image_cover_ratio:
        return "ocr", "full-page image"  # a scan under an earlier OCR layer of unknown quality
    return "text", "text layer"
