"""Running headers/footers across pages (``pdf/running.py``) and headings that are headings
(``text_layer._heading_level``): pages made here, and the corpus pages the issue names."""

from __future__ import annotations

import pymupdf
import pytest

from chandra_ocr.config import PdfOptions
from chandra_ocr.pdf.text_layer import text_blocks
from chandra_ocr.pdf.triage import triage_document

BODY = "The survey covered every district and its results are given in the tables of the annex. " * 3


def _pages(tmp_path, n: int, header: str) -> str:
    """``n`` pages with ``header`` (``{n}`` becomes the page number) set large at the top, and body text."""
    doc = pymupdf.open()
    for i in range(1, n + 1):
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 100), header.format(n=i), fontsize=14)
        page.insert_textbox(pymupdf.Rect(72, 200, 540, 400), BODY, fontsize=10)
        page.insert_textbox(pymupdf.Rect(72, 420, 540, 600), BODY, fontsize=10)
    path = tmp_path / "running.pdf"
    doc.save(path)
    return str(path)


def test_a_line_repeated_at_the_top_of_every_page_is_a_running_header(tmp_path):
    triage = triage_document(_pages(tmp_path, 3, "Annual Survey of {n} Districts"), PdfOptions())
    for blocks in triage.text_blocks.values():
        top = next(b for b in blocks if b.text.startswith("Annual Survey"))
        assert top.label == "page_header" and top.level is None
        assert blocks[0] is top  # headers first in reading order


def test_a_large_line_on_one_page_only_stays_a_heading(tmp_path):
    triage = triage_document(_pages(tmp_path, 1, "Annual Survey"), PdfOptions())
    (top,) = [b for b in triage.text_blocks[1] if b.text.startswith("Annual Survey")]
    assert top.label == "section_header"


def test_paragraph_fragments_in_a_larger_font_are_not_headings():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 100, 540, 300), BODY * 2, fontsize=10)
    page.insert_text((72, 350), "and the districts were counted again,", fontsize=12)
    page.insert_text((72, 400), "Methods", fontsize=12)
    page.insert_textbox(pymupdf.Rect(72, 420, 540, 600), BODY, fontsize=10)
    labels = {b.text: b.label for b in text_blocks(page)}
    assert labels["Methods"] == "section_header"
    assert labels["and the districts were counted again,"] == "text"


@pytest.mark.corpus
def test_federal_register_column_fragments_are_not_headings(corpus):
    """federal-register p. 2: no heading starts in lower case or runs on as a sentence; the running
    header "… Federal Register / Vol. 85 …" of every page is a page header."""
    triage = triage_document(
        str(corpus / "pdfplumber/tests/pdfs/federal-register-2020-17221.pdf"), PdfOptions()
    )
    for page_no, blocks in triage.text_blocks.items():
        for b in blocks:
            if b.label == "section_header":
                assert not b.text[0].islower(), (page_no, b.text)
            if "Federal Register / Vol. 85" in b.text:
                assert b.label == "page_header", (page_no, b.text)
