"""Tables → cell grids: spans, ragged rows, headers, hostile sizes, Markdown, real ground-truth tables."""

from __future__ import annotations

import json
import time

import pytest

from chandra_ocr.errors import ParseError
from chandra_ocr.parse.html_text import html_to_text
from chandra_ocr.tables.markup import (
    MAX_CELLS,
    MAX_COLS,
    MAX_ROWS,
    find_tables,
    grid,
    split_pipe_row,
    table_from_html,
    table_from_markdown,
    table_from_rows,
    table_text,
)


def _html(html: str, **kw):
    return table_from_html(html, table_no=1, bbox=None, **kw)


def test_rowspan_and_colspan_combinations():
    t = _html(
        "<table><tr><td rowspan=2 colspan=2>A</td><td>B</td></tr>"
        "<tr><td>C</td></tr>"
        "<tr><td>D</td><td rowspan='2'>E</td><td>F</td></tr>"
        "<tr><td>G</td><td>H</td></tr></table>"
    )
    assert (t.n_rows, t.n_cols) == (4, 3)
    assert grid(t) == [["A", "A", "B"], ["A", "A", "C"], ["D", "E", "F"], ["G", "E", "H"]]
    positions = {c.text: (c.row, c.col, c.rowspan, c.colspan) for c in t.cells}
    assert (
        positions["A"] == (0, 0, 2, 2) and positions["C"] == (1, 2, 1, 1) and positions["H"] == (3, 2, 1, 1)
    )
    assert len({(c.row, c.col) for c in t.cells}) == len(t.cells)  # one cell per top-left position


def test_ragged_rows_leave_empty_positions_and_widen_the_grid():
    t = _html(
        "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr><tr><td>d</td><td>e</td><td>f</td></tr></table>"
    )
    assert (t.n_rows, t.n_cols) == (3, 3)
    assert grid(t) == [["a", "b", ""], ["c", "", ""], ["d", "e", "f"]]


def test_rowspan_beyond_the_table_is_clipped_and_zero_spans_to_the_end():
    t = _html(
        "<table><tr><td rowspan=9>a</td><td rowspan=0>z</td></tr><tr><td>b</td></tr><tr><td>c</td></tr>"
    )
    cells = {c.text: (c.rowspan, c.col) for c in t.cells}
    assert cells["a"] == (3, 0) and cells["z"] == (3, 1) and cells["b"] == (1, 2)
    assert t.n_rows == 3


def test_thead_rows_are_the_header_joined_per_column():
    t = _html(
        "<table><thead><tr><th rowspan=2>Region</th><th colspan=2>2023</th></tr>"
        "<tr><th>Q1</th><th>Q2</th></tr></thead><tbody><tr><th>North</th><td>1</td><td>2</td></tr></tbody></table>"
    )
    assert t.header == ("Region", "2023 / Q1", "2023 / Q2")
    headers = {c.text for c in t.cells if c.is_header}
    assert headers == {"Region", "2023", "Q1", "Q2"}  # the <th> row header in the body is not a header


def test_two_lines_of_one_columns_label_read_as_one_and_a_group_label_keeps_its_slash():
    t = _html(
        "<table><thead><tr><th>#</th><th colspan=2>TEDs</th><th>Inference</th></tr>"
        "<tr><th>enc-layers</th><th>simple</th><th>all</th><th>time (secs)</th></tr></thead>"
        "<tbody><tr><td>6</td><td>0.9</td><td>0.8</td><td>2.7</td></tr></tbody></table>"
    )
    assert t.header == ("# enc-layers", "TEDs / simple", "TEDs / all", "Inference time (secs)")


def test_leading_th_rows_without_thead_are_the_header():
    t = _html("<table><tr><th>Name</th><th>Role</th></tr><tr><td>Ada</td><td>Engineer</td></tr></table>")
    assert t.header == ("Name", "Role")


def test_first_row_is_a_header_only_when_it_looks_like_one():
    numeric = _html("<table><tr><td>Item</td><td>Price</td></tr><tr><td>Tea</td><td>$1.50</td></tr></table>")
    assert numeric.header == ("Item", "Price")
    assert [c.is_header for c in numeric.cells] == [True, True, False, False]
    text_only = _html("<table><tr><td>Item</td><td>Note</td></tr><tr><td>Tea</td><td>hot</td></tr></table>")
    assert text_only.header == ()
    numbers_on_top = _html("<table><tr><td>2021</td><td>2022</td></tr><tr><td>1</td><td>2</td></tr></table>")
    assert numbers_on_top.header == ()
    blank_cell = _html("<table><tr><td></td><td>Price</td></tr><tr><td>Tea</td><td>1</td></tr></table>")
    assert blank_cell.header == ()


def test_nested_tables_are_flattened_into_their_cell():
    t = _html(
        "<table><tr><td>outer<table><tr><td>in1</td><td>in2</td></tr><tr><td>in3</td></tr></table></td>"
        "<td>right</td></tr><tr><td>x</td><td>y</td></tr></table>"
    )
    assert (t.n_rows, t.n_cols) == (2, 2)
    rows = grid(t)
    assert rows[0][0].replace("|", " ").split() == ["outer", "in1", "in2", "in3"]
    assert rows[0][1:] == ["right"] and rows[1] == ["x", "y"]


def test_caption_html_and_explicit_caption():
    html = "<table><caption>Sales <b>2023</b></caption><tr><td>a</td></tr></table>"
    assert _html(html).caption == "Sales 2023"
    assert _html(html, caption="Table 4").caption == "Table 4"
    assert _html(html).html == html


def test_cells_keep_inline_markup_as_text_and_unescape_entities():
    t = _html("<table><tr><td>a &amp; <i>b</i><br>c</td><td><math>x_1</math></td></tr></table>")
    assert grid(t) == [["a & b c", "$x_1$"]]


def test_bare_rows_without_table_tag_and_the_first_of_several_tables():
    assert grid(_html("<tr><td>1</td><td>2</td></tr>")) == [["1", "2"]]
    assert grid(_html("<table><tr><td>first</td></tr></table><table><tr><td>second</td></tr></table>")) == [
        ["first"]
    ]


def test_rows_of_cells_make_the_table_their_html_makes():
    """``table_from_rows`` (native tables) builds what ``table_from_html`` makes of its own HTML, and
    ``table_text`` renders the table as ``html_to_text`` renders that HTML: spans, an empty cell, an
    all-empty row, markup characters, and the first row taken as a header by the HTML rule, with the
    row its spanning "Name" reaches down to."""
    rows = [
        [("Name", 2, 1), ("Q1 & Q2", 1, 2)],
        [("<a>", 1, 1), ("", 1, 1)],
        [("x", 1, 1), ("1.5", 1, 1), ("2", 1, 1)],
        [("", 1, 1), ("", 1, 1), ("", 1, 1)],
        [("y", 1, 3)],
    ]
    t = table_from_rows(rows, table_no=2, bbox=(1.0, 2.0, 3.0, 4.0))
    assert t == table_from_html(t.html, table_no=2, bbox=(1.0, 2.0, 3.0, 4.0), source="native")
    assert t.header == ("Name", "Q1 & Q2 / <a>", "Q1 & Q2")
    assert [c.is_header for c in t.cells[:5]] == [1, 1, 1, 1, 0]
    assert table_text(t) == html_to_text(t.html) == "Name | Q1 & Q2\n<a> |\nx | 1.5 | 2\n| |\ny"
    with pytest.raises(ParseError):
        table_from_rows([[], []], table_no=1, bbox=None)


@pytest.mark.parametrize("html", ["", "no table", "<table></table>", "<table><tr></tr></table>", "<td"])
def test_no_cells_raises_parse_error(html):
    with pytest.raises(ParseError):
        _html(html)


def test_find_tables_nested_and_unclosed():
    src = "x<table><tr><td><table></table></td></tr></table>y<table><tr><td>open"
    spans = find_tables(src)
    assert [src[a:b][:7] for a, b in spans] == ["<table>", "<table>"]
    assert spans[0] == (1, src.index("y")) and spans[1][1] == len(src)


def test_hostile_spans_are_bounded_and_keep_the_other_cells():
    start = time.process_time()  # this process's CPU time: other processes on the machine do not move it
    t = _html("<table><tr><td colspan=999999 rowspan=999999>x</td><td>y</td></tr><tr><td>z</td></tr></table>")
    assert time.process_time() - start < 1.0
    assert t.n_cols <= MAX_COLS and t.n_rows == 2
    assert {"x", "y", "z"} <= {c.text for c in t.cells}


def test_many_wide_cells_stay_within_the_grid_limits():
    row = "<tr>" + "<td colspan=1000 rowspan=1000>v</td>" * 1500 + "</tr>"
    start = time.process_time()
    t = _html("<table>" + row * 20 + "</table>")  # 1 MB, 30,000 cells each asking for 10⁶ positions
    elapsed = time.process_time() - start
    assert t.n_rows * t.n_cols <= MAX_CELLS and t.n_cols <= MAX_COLS
    assert len(grid(t)) == t.n_rows
    assert elapsed < 5.0


def test_row_count_is_capped():
    t = _html("<table>" + "<tr><td>r</td></tr>" * (MAX_ROWS + 50) + "</table>")
    assert t.n_rows == MAX_ROWS


def test_markdown_pipe_table_with_alignment_row():
    t = table_from_markdown("| Item | Qty |\n|:-----|----:|\n| Tea | 2 |\n| Milk \\| Sugar | 1 |", table_no=2)
    assert t.source == "markdown" and t.table_no == 2 and t.bbox is None
    assert t.header == ("Item", "Qty")
    assert grid(t) == [["Item", "Qty"], ["Tea", "2"], ["Milk | Sugar", "1"]]
    assert [c.is_header for c in t.cells[:3]] == [True, True, False]


def test_markdown_without_outer_pipes_ragged_and_without_delimiter():
    t = table_from_markdown("a | b\n--- | ---\n1 | 2 | 3\n4", table_no=1)
    assert grid(t) == [["a", "b", ""], ["1", "2", "3"], ["4", "", ""]]
    plain = table_from_markdown("| x | y |\n| 1 | 2 |", table_no=1)
    assert plain.header == () and grid(plain) == [["x", "y"], ["1", "2"]]
    with pytest.raises(ParseError):
        table_from_markdown("\n \n", table_no=1)


def test_split_pipe_row():
    assert split_pipe_row("| a | b\\|c |") == ["a", "b|c"]
    assert split_pipe_row("a|b") == ["a", "b"]
    assert split_pipe_row("|  |x|") == ["", "x"]


def _docling_tables(corpus):
    root = corpus / "docling/tests/data/pdf/groundtruth"
    for name in ("2305.03393v1-pg9", "normal_4pages", "redp5110_sampled", "table_mislabeled_as_picture"):
        for table in json.loads((root / f"{name}.json").read_text())["tables"]:
            yield name, table["data"]


def _html_from_ground_truth(data: dict) -> str:
    """Write docling's cells back as an HTML table: header rows as <th> in <thead>, gaps as empty <td>."""
    starts = {(c["start_row_offset_idx"], c["start_col_offset_idx"]): c for c in data["table_cells"]}
    covered = {
        (r, k)
        for c in data["table_cells"]
        for r in range(c["start_row_offset_idx"], c["end_row_offset_idx"])
        for k in range(c["start_col_offset_idx"], c["end_col_offset_idx"])
    }
    out, in_head = ["<table>"], False
    for r in range(data["num_rows"]):
        head = all(c["column_header"] for c in data["grid"][r])
        if head != in_head:
            out.append("<thead>" if head else "</thead><tbody>")
            in_head = head
        tag = "th" if head else "td"
        cells = []
        for k in range(data["num_cols"]):
            if (r, k) in starts:
                c = starts[(r, k)]
                cells.append(
                    f'<{tag} rowspan="{c["row_span"]}" colspan="{c["col_span"]}">{c["text"]}</{tag}>'
                )
            elif (r, k) not in covered:
                cells.append(f"<{tag}></{tag}>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


@pytest.mark.corpus
def test_real_tables_from_docling_ground_truth_round_trip(corpus):
    """Real tables (spans included) written as HTML parse back to docling's own dense grid."""
    tables = list(_docling_tables(corpus))
    assert len(tables) >= 8 and any(
        c["row_span"] > 1 or c["col_span"] > 1 for _, d in tables for c in d["table_cells"]
    )
    for name, data in tables:
        html = _html_from_ground_truth(data).replace("&", "&amp;")
        table = _html(html)
        expected = [[" ".join(c["text"].split()) for c in row] for row in data["grid"]]
        assert (table.n_rows, table.n_cols) == (data["num_rows"], data["num_cols"]), name
        assert grid(table) == expected, name
        n_head = sum(1 for row in data["grid"] if all(c["column_header"] for c in row))
        if n_head:
            labels = []
            for col in range(data["num_cols"]):
                parts: list[str] = []
                for row in expected[:n_head]:
                    if row[col] and (not parts or parts[-1] != row[col]):
                        parts.append(row[col])
                labels.append(" / ".join(parts))
            assert table.header == tuple(labels), name


@pytest.mark.corpus
def test_real_tables_as_markdown_round_trip(corpus):
    for name, data in _docling_tables(corpus):
        rows = [[" ".join(c["text"].split()).replace("|", "\\|") for c in row] for row in data["grid"]]
        md = "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])])
        md += "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows[1:])
        table = table_from_markdown(md, table_no=1)
        assert grid(table) == [[c.replace("\\|", "|") for c in r] for r in rows], name
        assert table.header == tuple(rows[0])
