"""The parsers on arbitrary and hostile input: only ParseError, and linear time."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chandra_ocr.document import ParsedPage
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.chandra_html import parse_chandra_html
from chandra_ocr.parse.markdown import parse_markdown
from chandra_ocr.tables.markup import grid, table_from_html, table_from_markdown

# Fragments that exercise the parsers' structure: tags (well-formed, broken, hostile attributes),
# comments, entities, Markdown markers.
FRAGMENTS = [
    '<div data-bbox="10 20 300 400" data-label="Text">', '<div data-bbox="1e9 -5 nan x" data-label="Table">',
    '<div data-label="Section-Header">', "<div>", "</div>", "<div", '<div data-bbox="', "<table>", "</table>",
    "<thead>", "<tr>", "</tr>", "<td>", "</td>", "<th>", '<td colspan="999999">', "<td rowspan=0>",
    '<th rowspan="-3" colspan="abc">', "<caption>", "</caption>", "<h2>", "<ul><li>", "</li></ul>",
    '<math display="block">', "</math>", "<pre>", "</pre>", "<br/>", '<img alt="x"/>', "<!--", "-->",
    "<script>", "&amp;", "&#x110000;", "&bogus;", "<", ">", "'", '"', "\n", "\n\n", "| a | b |",
    "|---|:-:|", "# ", "## h", "- ", "1. ", "$$", "\\[", "\\]", "```", "~~~", "![a](b)", "===", "---",
    "text", " ", "\t", "\x00", "\u202e", "表",
]  # fmt: skip

html_like = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=80).map("".join)
any_text = st.one_of(st.text(max_size=2000), html_like)

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def _only_parse_error(fn, text: str) -> None:
    try:
        result = fn(text)
    except ParseError:
        return
    if isinstance(result, ParsedPage):
        for table in result.tables:
            assert len(grid(table)) == table.n_rows
            assert len({(c.row, c.col) for c in table.cells}) == len(table.cells)
        assert [b.block_no for b in result.blocks] == list(range(len(result.blocks)))


@FUZZ
@given(any_text)
def test_chandra_html_raises_only_parse_error(text):
    _only_parse_error(lambda t: parse_chandra_html(t, 612.0, 792.0), text)


@FUZZ
@given(any_text)
def test_markdown_never_raises(text):
    assert isinstance(parse_markdown(text, 612.0, 792.0), ParsedPage)


@FUZZ
@given(any_text)
def test_table_parsers_raise_only_parse_error(text):
    _only_parse_error(lambda t: table_from_html(t, table_no=1, bbox=None), text)
    _only_parse_error(lambda t: table_from_markdown(t, table_no=1), text)


HOSTILE = {
    "deep divs": '<div data-bbox="0 0 1 1" data-label="Text">' + "<div>" * 50_000 + "x" + "</div>" * 50_000,
    "unclosed divs": '<div data-label="Text">' * 50_000,
    "unclosed comments": "<!--" * 50_000,
    "lone brackets": "<a" * 100_000,
    "nested tables": "<table><tr><td>" * 30_000,
    "nested lists": "<ul><li>" * 50_000,
    "nested math": "<math>" * 50_000,
    "spans": "<table>" + "<tr>" + '<td colspan="1000" rowspan="1000">x</td>' * 20_000 + "</tr>" * 20,
    "long attribute": '<div data-bbox="' + "1 " * 100_000 + '" data-label="Text">x</div>',
    "spaces heading": "# " + " " * 150_000 + "x",
    "markdown fences": "```\n" * 50_000,
    "math openers": "$$\n" * 50_000,
    "pipes": "|" * 150_000 + "\n" + "|-" * 50_000,
    "html table lines": "<table>\n" * 50_000,
    "list continuation": "- a\n  b\n" * 50_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_inputs_finish_quickly(name):
    text = HOSTILE[name]
    start = time.process_time()  # this process's CPU time: other processes on the machine do not move it
    for fn in (
        lambda t: parse_chandra_html(t, 612.0, 792.0),
        lambda t: parse_markdown(t, 612.0, 792.0),
        lambda t: table_from_html(t, table_no=1, bbox=None),
        lambda t: table_from_markdown(t, table_no=1),
    ):
        _only_parse_error(fn, text)
    assert time.process_time() - start < 10.0, name
