"""Chandra layout HTML → blocks and tables: format cases, coordinates, rotation, garbage."""

from __future__ import annotations

import json
import re

import pymupdf
import pytest
from chandra.prompts import OCR_LAYOUT_PROMPT
from PIL import Image, ImageOps

from chandra_ocr.document import LABELS
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.chandra_html import LABEL_MAP, normalise_label, parse_chandra_html, scale_bbox
from chandra_ocr.tables.markup import grid

# A page in the documented format: top-level divs, data-bbox 0-1000 "x0 y0 x1 y1", data-label.
PAGE = """<div data-bbox="50 20 950 60" data-label="Page-Header"><p>ACME Annual Report</p></div>
<div data-bbox="100 100 900 140" data-label="Section-Header"><h2>1. Results</h2></div>
<div data-bbox="100 150 900 300" data-label="Text"><p>Revenue grew by <b>12%</b> &amp; costs fell.</p>
<p>Second paragraph with <math>x^2</math>.</p></div>
<div data-bbox="100 310 900 330" data-label="Caption"><p>Table 1: Sales by region</p></div>
<div data-bbox="100 340 900 600" data-label="Table"><table>
<thead><tr><th rowspan="2">Region</th><th colspan="2">2023</th></tr><tr><th>Q1</th><th>Q2</th></tr></thead>
<tbody><tr><td>North</td><td>1.5</td><td>2.0</td></tr><tr><td>South</td><td colspan="2">n/a</td></tr></tbody>
</table></div>
<div data-bbox="100 620 900 700" data-label="List-Group"><ul><li>first</li><li>second</li></ul></div>
<div data-bbox="100 710 500 900" data-label="Image"><img alt="A bar chart of sales"/></div>
<div data-bbox="0 0 1000 1000" data-label="Blank-Page"></div>
<div data-bbox="50 950 950 980" data-label="Page-Footer"><p>Page 3</p></div>"""

W, H = 612.0, 792.0


def _expected_bbox(x0: float, y0: float, x1: float, y1: float, w: float = W, h: float = H) -> tuple:
    return (x0 * w / 1000, y0 * h / 1000, x1 * w / 1000, y1 * h / 1000)


def test_blocks_labels_text_and_bboxes():
    page = parse_chandra_html(PAGE, W, H)
    labels = [b.label for b in page.blocks]
    assert labels == [
        "page_header", "section_header", "text", "caption", "table", "list", "figure", "page_footer",
    ]  # fmt: skip
    assert [b.block_no for b in page.blocks] == list(range(len(page.blocks)))
    header, heading, text = page.blocks[0], page.blocks[1], page.blocks[2]
    assert header.text == "ACME Annual Report"
    assert heading.text == "1. Results" and heading.level == 2
    assert text.text == "Revenue grew by 12% & costs fell.\nSecond paragraph with $x^2$."
    assert text.html is not None and "<b>12%</b>" in text.html
    assert header.bbox == pytest.approx(_expected_bbox(50, 20, 950, 60))
    assert page.blocks[-1].bbox == pytest.approx(_expected_bbox(50, 950, 950, 980))
    assert page.blocks[5].text == "- first\n- second"
    assert page.blocks[6].text == "A bar chart of sales"  # figure described only in alt


def test_table_block_becomes_a_cell_grid_with_the_block_bbox_and_caption():
    page = parse_chandra_html(PAGE, W, H)
    (table,) = page.tables
    table_block = next(b for b in page.blocks if b.label == "table")
    assert table.table_no == 1 and table.source == "html"
    assert table.bbox == table_block.bbox == pytest.approx(_expected_bbox(100, 340, 900, 600))
    assert table.caption == "Table 1: Sales by region"
    assert (table.n_rows, table.n_cols) == (4, 3)
    assert table.header == ("Region", "2023 / Q1", "2023 / Q2")
    assert grid(table) == [
        ["Region", "2023", "2023"],
        ["Region", "Q1", "Q2"],
        ["North", "1.5", "2.0"],
        ["South", "n/a", "n/a"],
    ]
    region = next(c for c in table.cells if c.text == "Region")
    assert (region.row, region.col, region.rowspan, region.colspan, region.is_header) == (0, 0, 2, 1, True)


def test_tables_are_numbered_in_page_order_and_textless_tables_skipped():
    html = (
        '<div data-bbox="0 0 10 10" data-label="Table"><table><tr><td>a</td></tr></table></div>'
        '<div data-bbox="0 10 10 20" data-label="Table">   </div>'
        '<div data-bbox="0 20 10 30" data-label="Table">no table markup here</div>'
        '<div data-bbox="0 30 10 40" data-label="Table"><table><tr><td>b</td></tr></table></div>'
    )
    page = parse_chandra_html(html, W, H)
    # numbering follows the table blocks that have text (the chunker pairs them the same way)
    assert [(t.table_no, grid(t)) for t in page.tables] == [(1, [["a"]]), (3, [["b"]])]


def test_every_label_of_chandras_prompt_maps_into_the_normalised_set():
    prompt_labels = re.findall(r"^- ([A-Z][A-Za-z-]+)$", OCR_LAYOUT_PROMPT, flags=re.MULTILINE)
    assert len(prompt_labels) >= 15
    for label in prompt_labels:
        if label == "Blank-Page":
            continue
        assert label.lower() in LABEL_MAP, label
    assert set(LABEL_MAP.values()) <= set(LABELS)
    assert normalise_label("section_header") == "section_header"
    assert normalise_label(" equation-block ") == "formula"
    assert normalise_label("Something-New") == normalise_label(None) == "other"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("900 100 100 300", (100, 100, 900, 300)),  # swapped x
        ("-20 -5 1200 1001", (0, 0, 1000, 1000)),  # clamped to the page
        ("10.5, 20.25, 30, 40", (10.5, 20.25, 30, 40)),  # floats, commas
    ],
)
def test_bbox_is_ordered_clamped_and_scaled(raw, expected):
    assert scale_bbox(raw, W, H) == pytest.approx(_expected_bbox(*expected))


@pytest.mark.parametrize("raw", [None, "", "1 2 3", "a b c d", "1 2 3 4 5", "nan 1 2 3", "1e999 0 1 1"])
def test_invalid_bbox_is_none_and_the_block_is_kept(raw):
    attr = "" if raw is None else f' data-bbox="{raw}"'
    page = parse_chandra_html(f'<div data-label="Text"{attr}><p>kept</p></div>', W, H)
    assert [(b.bbox, b.text) for b in page.blocks] == [(None, "kept")]


def test_non_square_page_scales_x_and_y_independently():
    page = parse_chandra_html('<div data-bbox="250 500 750 1000" data-label="Text">x</div>', 1000.0, 300.0)
    assert page.blocks[0].bbox == pytest.approx((250.0, 150.0, 750.0, 300.0))


def test_stray_content_outside_layout_divs_becomes_unplaced_text():
    html = 'intro text<div data-bbox="0 0 100 100" data-label="Text">inside</div>\n<p>tail</p>\n'
    page = parse_chandra_html(html, W, H)
    assert [(b.label, b.bbox is None, b.text) for b in page.blocks] == [
        ("text", True, "intro text"),
        ("text", False, "inside"),
        ("text", True, "tail"),
    ]


def test_nested_divs_stay_inside_their_block():
    html = (
        '<div data-bbox="0 0 500 500" data-label="Complex-Block"><div data-bbox="1 1 2 2">a</div>'
        '<div>b</div></div><div data-bbox="0 500 500 600" data-label="Text">c</div>'
    )
    page = parse_chandra_html(html, W, H)
    assert [(b.label, b.text) for b in page.blocks] == [("text", "a\nb"), ("text", "c")]


def test_truncated_output_keeps_the_complete_blocks_and_the_open_one():
    cut = '<div data-bbox="100 340 900 600"'
    html = PAGE.split(cut)[0] + cut + ' data-label="Text">cut of'
    page = parse_chandra_html(html, W, H)
    assert page.blocks[-1].text == "cut of"
    assert [b.label for b in page.blocks][:4] == ["page_header", "section_header", "text", "caption"]


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "   \n",
        "The quick brown fox",
        "<p>HTML without layout blocks</p>",
        "<div>no attributes</div><div class='x'>still none</div>",
        '<div data-bb="0 0 1 1"',  # truncated inside the first tag
        "<table><tr><td>1</td></tr></table>",
        "<<<<>>>> data-bbox data-label",
    ],
)
def test_output_without_layout_blocks_raises_parse_error(garbage):
    with pytest.raises(ParseError):
        parse_chandra_html(garbage, W, H)


def test_blank_page_alone_is_valid_and_empty():
    page = parse_chandra_html('<div data-bbox="0 0 1000 1000" data-label="Blank-Page"></div>', W, H)
    assert page.blocks == [] and page.tables == []


def _ink_box_normalised(image: Image.Image) -> str:
    """The 0-1000 box around the dark pixels: what a perfect model reports for the one text block."""
    x0, y0, x1, y1 = ImageOps.invert(image.convert("L")).point(lambda v: 255 if v > 96 else 0).getbbox()
    w, h = image.size
    return f"{round(x0 * 1000 / w)} {round(y0 * 1000 / h)} {round(x1 * 1000 / w)} {round(y1 * 1000 / h)}"


def _render(page: pymupdf.Page) -> Image.Image:
    pix = page.get_pixmap(dpi=144)  # PyMuPDF renders the page as displayed (rotation applied)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def test_rotate_90_non_square_page_maps_onto_the_displayed_size(tmp_path):
    """Contract: boxes are relative to the displayed page; the caller passes its (swapped) size."""
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=700)
    page.insert_text((50, 100), "HELLO WORLD", fontsize=20)
    page.set_rotation(90)
    displayed = page.rect
    assert (displayed.width, displayed.height) == (700, 400)
    words = [pymupdf.Rect(w[:4]) * page.rotation_matrix for w in page.get_text("words")]
    truth = words[0] | words[1]  # the words' box on the displayed page
    html = f'<div data-bbox="{_ink_box_normalised(_render(page))}" data-label="Text">HELLO WORLD</div>'
    (block,) = parse_chandra_html(html, displayed.width, displayed.height).blocks
    # ink vs the words' line boxes: same centre, extents within the font's ascent/descent
    centre = ((block.bbox[0] + block.bbox[2]) / 2, (block.bbox[1] + block.bbox[3]) / 2)
    assert centre == pytest.approx(((truth.x0 + truth.x1) / 2, (truth.y0 + truth.y1) / 2), abs=2.0)
    assert block.bbox == pytest.approx(tuple(truth), abs=8.0)
    assert block.bbox[0] > 400  # beyond the unrotated width: only the displayed size explains it


@pytest.mark.corpus
def test_rotated_scan_from_the_corpus_matches_doclings_ground_truth_box(corpus):
    """docling's /Rotate 270 scan (displayed 842 × 595): the ink box maps onto the ground-truth box."""
    base = corpus / "docling/tests/data/ocr"
    doc = pymupdf.open(base / "sources/ocr_test_rotated_90.pdf")
    page = doc[0]
    assert page.rotation in (90, 270) and page.rect.width > page.rect.height
    truth_file = base / "groundtruth/tesseract/full_page/ocr_test_rotated_90.tesseract.full_page.json"
    truth = json.loads(truth_file.read_text())
    height = truth["pages"]["1"]["size"]["height"]
    boxes = [p["bbox"] for p in truth["texts"][0]["prov"]]  # bottom-left origin
    expected = (
        min(b["l"] for b in boxes),
        height - max(b["t"] for b in boxes),
        max(b["r"] for b in boxes),
        height - min(b["b"] for b in boxes),
    )
    html = f'<div data-bbox="{_ink_box_normalised(_render(page))}" data-label="Text">Docling bundles</div>'
    (block,) = parse_chandra_html(html, page.rect.width, page.rect.height).blocks
    assert block.bbox == pytest.approx(expected, abs=2.0)
