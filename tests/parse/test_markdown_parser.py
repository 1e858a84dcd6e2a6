"""Markdown (LightOnOCR output) and plain text → blocks and tables."""

from __future__ import annotations

import json
import re

import pytest

from chandra_ocr.parse.markdown import parse_markdown
from chandra_ocr.tables.markup import grid

PAGE = """# Annual Report ##

Revenue grew this year
across all regions.

## 1. Results

- first point
- second point
  continued on the next line
3. numbered

| Item | Qty |
|:-----|----:|
| Tea | 2 |
| Milk | 1 |

<table>
<tr><th>Region</th><th>Sales</th></tr>
<tr><td>North</td><td>10</td></tr>
</table>

$$
E = mc^2
$$

\\[ a^2 + b^2 = c^2 \\]

```python
print("hi")
```

![A bar chart](image_1.png)

---

Setext Heading
--------------
Closing paragraph."""


def _labels(md: str) -> list[tuple[str, str]]:
    return [(b.label, b.text) for b in parse_markdown(md, 612, 792).blocks]


def test_a_page_with_every_construct():
    page = parse_markdown(PAGE, 612, 792)
    assert [(b.label, b.level) for b in page.blocks] == [
        ("section_header", 1), ("text", None), ("section_header", 2), ("list", None), ("table", None),
        ("table", None), ("formula", None), ("formula", None), ("code", None), ("figure", None),
        ("section_header", 2), ("text", None),
    ]  # fmt: skip
    texts = [b.text for b in page.blocks]
    assert texts[0] == "Annual Report"
    assert texts[1] == "Revenue grew this year\nacross all regions."
    assert texts[3].splitlines() == [
        "- first point",
        "- second point",
        "  continued on the next line",
        "3. numbered",
    ]
    assert texts[6] == "$$E = mc^2$$" and texts[7] == "$$a^2 + b^2 = c^2$$"
    assert texts[8] == 'print("hi")'
    assert texts[9] == "A bar chart"
    assert texts[10] == "Setext Heading" and texts[11] == "Closing paragraph."
    assert all(b.bbox is None for b in page.blocks)
    assert [b.block_no for b in page.blocks] == list(range(len(page.blocks)))


def test_pipe_and_html_tables_become_tables_numbered_in_order():
    page = parse_markdown(PAGE, 612, 792)
    pipe, html = page.tables
    assert (pipe.table_no, pipe.source, pipe.header) == (1, "markdown", ("Item", "Qty"))
    assert grid(pipe) == [["Item", "Qty"], ["Tea", "2"], ["Milk", "1"]]
    assert (html.table_no, html.source, html.header) == (2, "html", ("Region", "Sales"))
    assert grid(html) == [["Region", "Sales"], ["North", "10"]]
    html_block = [b for b in page.blocks if b.label == "table"][1]
    assert html_block.html is not None and html_block.html.startswith("<table>")
    assert html_block.text == "Region | Sales\nNorth | 10"


def test_unclosed_constructs_run_to_the_end():
    assert _labels("```\ncode without end\nmore") == [("code", "code without end\nmore")]
    assert _labels("$$\nx = 1\nstill math") == [("formula", "$$x = 1\nstill math$$")]
    md = "<table><tr><td>a</td></tr>\n<tr><td>b</td>"
    page = parse_markdown(md, 612, 792)
    assert grid(page.tables[0]) == [["a"], ["b"]]


def test_headings_need_a_space_and_lists_need_content():
    assert _labels("#hashtag\n-not a list\n####### seven") == [
        ("text", "#hashtag\n-not a list\n####### seven")
    ]
    assert _labels("#\n\n### ") == []


def test_a_table_row_without_delimiter_is_text():
    assert _labels("a | b\nc | d") == [("text", "a | b\nc | d")]


def test_empty_output_is_an_empty_page():
    page = parse_markdown("", 612, 792)
    assert page.blocks == [] and page.tables == []


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["2305.03393v1-pg9", "normal_4pages", "redp5110_sampled", "2206.01062"])
def test_doclings_markdown_parses_to_its_own_json_tables_and_headings(corpus, name):
    """docling's ground-truth Markdown export, parsed, gives the tables of its JSON export."""
    root = corpus / "docling/tests/data/pdf/groundtruth"
    md = (root / f"{name}.md").read_text()
    page = parse_markdown(md, 612, 792)
    heading_lines = [ln for ln in md.splitlines() if re.match(r"#{1,6} \S", ln)]
    headings = [b for b in page.blocks if b.label == "section_header"]
    assert len(headings) == len(heading_lines)
    assert [h.level for h in headings] == [len(ln.split(" ")[0]) for ln in heading_lines]
    json_file = root / f"{name}.json"
    if json_file.exists():
        expected = [
            [[" ".join(c["text"].split()) for c in row] for row in t["data"]["grid"]]
            for t in json.loads(json_file.read_text())["tables"]
        ]
        assert [grid(t) for t in page.tables] == expected
    else:
        assert len(page.tables) == sum(1 for ln in md.splitlines() if re.fullmatch(r"\|( ?-+ ?\|)+", ln))
