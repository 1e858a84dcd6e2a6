"""Triage on real corpus PDFs: born-digital → text, scans → OCR, broken inputs → BadDocumentError."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from chandra_ocr.config import PdfOptions
from chandra_ocr.errors import BadDocumentError, ConfigError
from chandra_ocr.pdf.triage import joined, triage_document, triage_pages

pytestmark = pytest.mark.corpus

OPTIONS = PdfOptions()
SOURCES = "docling/tests/data/pdf/sources"
BORN_DIGITAL = ["2305.03393v1-pg9.pdf", "multi_page.pdf", "code_and_formula.pdf", "normal_4pages.pdf"]
SCANS = ["derived/eurotext.scan.pdf", "derived/phototest.scan.pdf", "derived/8071_093.3B.scan.pdf"]


@pytest.mark.parametrize("name", BORN_DIGITAL)
def test_born_digital_pages_take_the_text_route(corpus: Path, name: str) -> None:
    path = corpus / SOURCES / name
    result = triage_document(str(path), OPTIONS)
    doc = pymupdf.open(path)
    assert result.n_pages == doc.page_count == len(result.pages)
    assert [p.page_no for p in result.pages] == list(range(1, doc.page_count + 1))
    for page, mu_page in zip(result.pages, doc, strict=True):
        assert page.route == "text", page
        assert page.n_chars >= OPTIONS.min_text_chars
        assert (page.width_pt, page.height_pt) == pytest.approx((mu_page.rect.width, mu_page.rect.height))
        blocks = result.text_blocks[page.page_no]
        assert blocks and sum(len(b.text) for b in blocks) >= 0.8 * page.n_chars


@pytest.mark.parametrize("name", SCANS)
def test_scans_take_the_ocr_route(corpus: Path, name: str) -> None:
    result = triage_document(str(corpus / name), OPTIONS)
    assert result.pages and all(p.route == "ocr" for p in result.pages)
    assert all(p.reason in ("full-page image", "few characters") for p in result.pages)
    assert result.text_blocks == {}


def test_rotated_scan_reports_displayed_size(corpus: Path) -> None:
    result = triage_document(str(corpus / "docling/tests/data/ocr/sources/ocr_test_rotated_90.pdf"), OPTIONS)
    (page,) = result.pages
    assert page.rotation in (90, 270) and page.width_pt > page.height_pt  # portrait A4 shown landscape
    assert (page.route, page.reason) == ("ocr", "full-page image")


def test_scan_under_an_invisible_ocr_layer_goes_to_ocr(corpus: Path) -> None:
    result = triage_document(str(corpus / "ocrmypdf/tests/resources/graph_ocred.pdf"), OPTIONS)
    (page,) = result.pages
    assert page.n_chars > OPTIONS.min_text_chars
    assert (page.route, page.reason) == ("ocr", "full-page image")


def test_unmapped_glyphs_go_to_ocr(corpus: Path) -> None:
    path = str(corpus / "ocrmypdf/tests/resources/type3_font_nomapping.pdf")
    (page,) = triage_document(path, PdfOptions(min_text_chars=1)).pages
    assert (page.route, page.reason) == ("ocr", "unmapped glyphs")


def test_thresholds_come_from_the_options(corpus: Path) -> None:
    path = str(corpus / SOURCES / "2305.03393v1-pg9.pdf")
    (page,) = triage_document(path, PdfOptions(min_text_chars=10**6)).pages
    assert (page.route, page.reason) == ("ocr", "few characters")


def test_forced_routes(corpus: Path) -> None:
    text_pdf, scan = str(corpus / SOURCES / "multi_page.pdf"), str(corpus / SCANS[0])
    forced_ocr = triage_document(text_pdf, OPTIONS, force_route="ocr")
    assert all((p.route, p.reason) == ("ocr", "forced") for p in forced_ocr.pages)
    assert forced_ocr.text_blocks == {}
    forced_text = triage_document(scan, OPTIONS, force_route="text")
    assert all((p.route, p.reason) == ("text", "forced") for p in forced_text.pages)
    assert forced_text.text_blocks == {1: []}  # a scan has no text layer: empty, not missing
    with pytest.raises(ConfigError):
        triage_document(text_pdf, OPTIONS, force_route="tesseract")


def test_a_broken_page_goes_to_ocr_without_killing_the_document(corpus: Path) -> None:
    # page 2 of this pdf.js test file sits in a cyclic page tree
    result = triage_document(str(corpus / "pdfjs/test/pdfs/Pages-tree-refs.pdf"), OPTIONS)
    broken = [p for p in result.pages if p.route == "ocr" and "cannot be loaded" in p.reason]
    assert broken and "cycle" in broken[0].reason
    assert len(result.pages) == result.n_pages


def test_password(corpus: Path) -> None:
    path = str(corpus / "pdfplumber/tests/pdfs/password-example.pdf")
    with pytest.raises(BadDocumentError, match="password is required"):
        triage_document(path, OPTIONS)
    with pytest.raises(BadDocumentError, match="password given is wrong"):
        triage_document(path, OPTIONS, password="not-it")
    result = triage_document(path, OPTIONS, password="test")
    assert result.n_pages >= 1 and result.pages[0].route == "text"


@pytest.mark.parametrize(
    ("rel", "message"),
    [
        ("pdfplumber/tests/pdfs/empty.pdf", r"empty file \(0 bytes\)"),
        ("ocrmypdf/tests/resources/invalid.pdf", "cannot open"),
        ("qpdf/qpdf/qtest/qpdf/empty.pdf", "no pages"),
        ("format-corpus/pdf-handbuilt-test-corpus/T02-02_007_page-tree-wrong-count.pdf", "page tree"),
        ("no/such/file.pdf", "cannot read file"),
    ],
)
def test_bad_inputs_are_refused_with_a_reason(corpus: Path, rel: str, message: str) -> None:
    with pytest.raises(BadDocumentError, match=message):
        triage_document(str(corpus / rel), OPTIONS)


def test_the_reason_names_the_file_not_its_folders(corpus: Path) -> None:
    path = corpus / "ocrmypdf/tests/resources/invalid.pdf"
    with pytest.raises(BadDocumentError, match="cannot open") as refused:
        triage_document(str(path), OPTIONS)
    assert str(path.parent) not in str(refused.value)


def test_non_pdf_renamed_to_pdf(tmp_path: Path) -> None:
    fake = tmp_path / "report.pdf"
    fake.write_text("Quarterly report\nThis is plain text, saved with the wrong extension.\n")
    with pytest.raises(BadDocumentError, match="not a PDF"):
        triage_document(str(fake), OPTIONS)


def test_parts_joined_are_the_document_triaged_whole(tmp_path: Path) -> None:
    """A large document is triaged in parts by several workers (stages/extract.py); joined, the parts
    give the whole document's triage: a line near the top of pages 1 and 3 of 4 recurs on half the
    document's pages (a running header) though on one page of each part only."""
    doc = pymupdf.open()
    for i in range(4):
        page = doc.new_page(width=612, height=792)
        if i in (0, 2):
            page.insert_text((72, 80), "Acme Corporation quarterly report", fontsize=10)
        page.insert_text((72, 300), f"Body text of page {i + 1}, long enough to be read from its text layer.")
    doc.save(path := tmp_path / "four.pdf")
    whole = triage_document(str(path), OPTIONS)
    parts = [triage_pages(str(path), OPTIONS, pages=r) for r in [(0, 2), (2, None)]]
    assert [p.page_no for p in parts[1].pages] == [3, 4] and parts[0].n_pages == parts[1].n_pages == 4
    assert joined(parts) == whole
    assert [b.label for b in whole.text_blocks[3]] == ["page_header", "text"]
    assert [b.label for b in joined(parts[1:]).text_blocks[3]] == ["text", "text"]  # one part alone
