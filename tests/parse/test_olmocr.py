"""olmOCR-2's answer format: the front matter the olmocr package documents, then Markdown."""

from __future__ import annotations

import pytest

from chandra_ocr.errors import ParseError
from chandra_ocr.parse.olmocr import OlmocrFacts, parse_olmocr, split_front_matter

FRONT = (
    "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
    "is_table: {table}\nis_diagram: false\n---\n"
)


def test_front_matter_facts_and_text_split():
    facts, text = split_front_matter(FRONT.format(table="True") + "# Title\n\nBody.")
    assert facts == OlmocrFacts("en", True, 0, True, False)
    assert text == "# Title\n\nBody."


def test_the_text_parses_as_markdown_with_html_tables_and_latex():
    raw = FRONT.format(table="True") + (
        "## Results\n\nThe mean is \\(x\\).\n\n<table><tr><th>a</th><th>b</th></tr>"
        "<tr><td>1</td><td>2</td></tr></table>\n\n\\[ E = mc^2 \\]\n\n![A bar chart](page_1_2_3_4.png)"
    )
    page = parse_olmocr(raw, 612.0, 792.0)
    assert [b.label for b in page.blocks] == ["section_header", "text", "table", "formula", "figure"]
    assert page.blocks[0].level == 2 and page.blocks[-1].text == "A bar chart"
    (table,) = page.tables
    assert table.source == "html" and table.n_rows == 2 and table.n_cols == 2


def test_a_page_without_text_has_null_language_and_no_blocks():
    raw = FRONT.replace("en", "null").format(table="False")
    facts, text = split_front_matter(raw)
    assert facts.primary_language is None and text == ""
    assert parse_olmocr(raw, 612.0, 792.0).blocks == []


@pytest.mark.parametrize(
    "raw, why",
    [
        ("# Title only, no front matter", "front matter"),
        ("---\nprimary_language: en\nis_table: False\n", "not closed"),
        (FRONT.format(table="maybe") + "x", "is_table"),
        (
            FRONT.replace("rotation_correction: 0", "rotation_correction: 45").format(table="False"),
            "rotation",
        ),
        (FRONT.replace("is_diagram: false\n", "").format(table="False"), "is_diagram"),
        (FRONT.replace("is_table", "is table").format(table="False"), "key: value"),
    ],
)
def test_broken_answers_raise_parse_error_so_the_page_is_retried(raw, why):
    with pytest.raises(ParseError, match=why):
        parse_olmocr(raw, 612.0, 792.0)
