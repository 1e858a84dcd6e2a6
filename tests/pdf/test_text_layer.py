"""Text-layer blocks and statistics on real born-digital, rotated and broken-font corpus PDFs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pymupdf
import pytest
from metrics import normalise_words, word_f1
from PIL import Image

from chandra_ocr.document import LABELS
from chandra_ocr.pdf.text_layer import TextStats, largest_image_share, read_page, text_blocks

pytestmark = pytest.mark.corpus

DOCLING = "docling/tests/data/pdf"
BORN_DIGITAL = [
    "2305.03393v1-pg9",
    "multi_page",
    "code_and_formula",
    "right_to_left_01",
    "amt_handbook_sample",
]


def _groundtruth(corpus: Path, name: str) -> str:
    return (corpus / DOCLING / "groundtruth" / f"{name}.md").read_text()


def _ink_share(page: pymupdf.Page, blocks) -> float:
    """Share of blocks whose bbox, on an independent 72-dpi render of the displayed page, holds ink."""
    pix = page.get_pixmap(dpi=72, colorspace=pymupdf.csGRAY)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    inked = 0
    for block in blocks:
        x0, y0, x1, y1 = block.bbox
        region = image.crop((int(x0), int(y0), int(x1) + 1, int(y1) + 1))
        inked += region.getextrema()[0] < 160
    return inked / len(blocks)


@pytest.mark.parametrize("name", BORN_DIGITAL)
def test_blocks_match_groundtruth_words_and_lie_on_the_page(corpus: Path, name: str) -> None:
    doc = pymupdf.open(corpus / DOCLING / "sources" / f"{name}.pdf")
    texts = []
    for page in doc:
        blocks = text_blocks(page)
        assert blocks, f"page {page.number + 1} has no blocks"
        assert [b.block_no for b in blocks] == list(range(len(blocks)))
        assert {b.label for b in blocks} <= set(LABELS)
        for b in blocks:
            x0, y0, x1, y1 = b.bbox
            assert -1 <= x0 <= x1 <= page.rect.width + 1 and -1 <= y0 <= y1 <= page.rect.height + 1
            assert b.text == b.text.strip() and "  " not in b.text
        assert _ink_share(page, blocks) >= 0.9
        texts.append("\n\n".join(b.text for b in blocks))
    # the ground truth drops page headers/footers and some figure text, so the match is loose
    assert word_f1("\n".join(texts), _groundtruth(corpus, name)) >= 0.8


def test_headings_and_lists_follow_the_groundtruth(corpus: Path) -> None:
    truth = _groundtruth(corpus, "multi_page")
    heading_truth = {" ".join(normalise_words(h)) for h in re.findall(r"^#+ (.+)$", truth, re.M)}
    items_truth = [normalise_words(i)[:3] for i in re.findall(r"^- (.+)$", truth, re.M)]
    doc = pymupdf.open(corpus / DOCLING / "sources" / "multi_page.pdf")
    blocks = [b for page in doc for b in text_blocks(page)]
    headings = [b for b in blocks if b.label == "section_header"]
    found = {" ".join(normalise_words(b.text)) for b in headings}
    assert all(b.level is not None and 1 <= b.level <= 6 for b in headings)
    assert len(found & heading_truth) >= 0.8 * len(heading_truth)
    assert len(found & heading_truth) >= 0.8 * len(found)
    list_words = [normalise_words(line) for b in blocks if b.label == "list" for line in b.text.split("\n")]
    assert len(list_words) >= 0.8 * len(items_truth)
    hits = sum(
        any(words[: len(item)] == item or words[1:4] == item for words in list_words) for item in items_truth
    )
    assert hits >= 0.8 * len(items_truth)


def test_hyphenation_across_lines_is_undone(corpus: Path) -> None:
    doc = pymupdf.open(corpus / DOCLING / "sources" / "2305.03393v1-pg9.pdf")
    raw = doc[0].get_text()
    assert "Ef-\nfects" in raw  # the PDF really breaks the word
    text = " ".join(b.text for b in text_blocks(doc[0]))
    assert "Effects of reducing" in text and "Ef-" not in text


def test_running_header_and_footer_are_labelled(corpus: Path) -> None:
    doc = pymupdf.open(corpus / DOCLING / "sources" / "redp5110_sampled.pdf")
    running = re.compile(
        r"Copyright IBM Corp\. 2014|^\d+ Row and Column Access Control Support in IBM DB2 for i$"
    )
    n_running = 0
    for page in doc:
        blocks = text_blocks(page)
        for i, block in enumerate(blocks):
            if running.search(block.text):  # the Redbook's running footers
                n_running += 1
                assert block.label == "page_footer", block
            if block.label == "page_footer":
                assert all(b.label == "page_footer" for b in blocks[i:]), "footers come last"
    assert n_running >= 8
    blocks = text_blocks(pymupdf.open(corpus / DOCLING / "sources" / "2305.03393v1-pg9.pdf")[0])
    assert blocks[0].label == "page_header" and blocks[0].text.startswith("Optimized Table Tokenization")


def test_rotated_page_boxes_are_in_displayed_space(corpus: Path) -> None:
    folder = corpus / "pdfplumber/tests/pdfs"
    rotated = pymupdf.open(folder / "nics-background-checks-2015-11-rotated.pdf")[0]
    upright = pymupdf.open(folder / "nics-background-checks-2015-11.pdf")[0]
    assert rotated.rotation == 90 and rotated.rect.width < rotated.rect.height
    r_blocks, u_blocks = text_blocks(rotated), text_blocks(upright)
    assert sorted(b.text for b in r_blocks) == sorted(b.text for b in u_blocks)
    for b in r_blocks:
        assert 0 <= b.bbox[0] <= b.bbox[2] <= rotated.rect.width + 1
        assert 0 <= b.bbox[1] <= b.bbox[3] <= rotated.rect.height + 1
    assert _ink_share(rotated, r_blocks) >= 0.8
    assert _ink_share(upright, u_blocks) >= 0.8


def text_quality(page: pymupdf.Page) -> TextStats:
    """The statistics triage routes by: the text layer's, and the largest image's share of the page."""
    return dataclasses.replace(read_page(page).stats, image_cover=largest_image_share(page))


def test_quality_flags_unmapped_glyphs_invisible_text_and_images(corpus: Path) -> None:
    res = corpus / "ocrmypdf/tests/resources"
    unmapped = text_quality(pymupdf.open(res / "type3_font_nomapping.pdf")[0])
    assert unmapped.n_chars > 0 and unmapped.bad_glyph_ratio > 0.5
    ocred = text_quality(pymupdf.open(res / "graph_ocred.pdf")[0])  # scan under an invisible OCR layer
    assert ocred.n_chars > 50 and ocred.invisible_ratio > 0.9 and ocred.image_cover > 0.9
    clean = text_quality(pymupdf.open(corpus / DOCLING / "sources" / "multi_page.pdf")[0])
    assert clean.n_chars > 1000 and clean.bad_glyph_ratio == 0 and clean.invisible_ratio == 0
    assert clean.image_cover == 0.0
    scan = pymupdf.open(corpus / "derived/eurotext.scan.pdf")[0]
    assert text_quality(scan).n_chars == 0 and largest_image_share(scan) > 0.95
