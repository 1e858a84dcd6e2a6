"""Chunking on docling's Markdown ground truth and real PDFs: header paths, size limit, whole
tables, and chunk ids that are stable across runs, processes and file locations."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chandra_ocr.chunking import chunk_document, token_count
from chandra_ocr.config import ChunkOptions
from chandra_ocr.document import Block, Document, Page, Table, TableCell
from chandra_ocr.parse.markdown import parse_markdown

GT = "docling/tests/data/pdf/groundtruth"
DOCS = ["2206.01062", "multi_page", "normal_4pages", "redp5110_sampled", "2305.03393v1-pg9"]
_WORD = re.compile(r"[^\W\d_]{2,}")


def _doc(md: str, name: str) -> Document:
    parsed = parse_markdown(md, 612, 792)
    page = Page(1, 612, 792, "ocr", "openai", blocks=parsed.blocks, tables=parsed.tables)
    return Document(name * 2, f"/archive/{name}.pdf", f"{name}.pdf", len(md), n_pages=1, pages=[page])


def _md(corpus: Path, name: str) -> str:
    return (corpus / GT / f"{name}.md").read_text(encoding="utf-8")


def _probes(md: str) -> list[tuple[str, tuple[str, ...]]]:
    """(five words from a prose line, the headings above it) read straight off the Markdown lines."""
    stack: list[tuple[int, str]] = []
    probes = []
    for line in md.splitlines():
        heading = re.match(r"(#{1,6})\s+(.*)", line)
        if heading:
            level = len(heading.group(1))
            stack = [h for h in stack if h[0] < level] + [(level, " ".join(heading.group(2).split()))]
        elif (
            line
            and not line.startswith(("|", "<", "!", "-", "*", "$", "`"))
            and len(_WORD.findall(line)) >= 8
        ):
            probes.append((" ".join(_WORD.findall(line)[:5]), tuple(h for _, h in stack)))
    return probes


@pytest.mark.corpus
@pytest.mark.parametrize("name", DOCS)
def test_header_paths_match_the_markdown_headings(corpus, name):
    md = _md(corpus, name)
    chunks = chunk_document(_doc(md, name), ChunkOptions(max_tokens=200, overlap_tokens=20))
    words = [" ".join(_WORD.findall(c.text)) for c in chunks]
    checked = 0
    for probe, path in _probes(md):
        holders = {tuple(c.header_path) for c, w in zip(chunks, words, strict=True) if probe in w}
        if len(holders) == 1:  # a probe repeated under different headings proves nothing
            assert holders == {path}, probe
            checked += 1
    assert checked >= 3


@pytest.mark.corpus
@pytest.mark.parametrize("max_tokens", [64, 512])
def test_no_chunk_is_over_the_limit_except_a_single_oversized_table_row(corpus, max_tokens):
    """Rule: only a table chunk holding one body row (after at most half the limit of title and
    columns) may exceed the limit."""
    options = ChunkOptions(max_tokens=max_tokens, overlap_tokens=8, table_max_tokens=max_tokens)
    for name in DOCS:
        for chunk in chunk_document(_doc(_md(corpus, name), name), options):
            assert chunk.n_tokens == token_count(chunk.text)
            if chunk.n_tokens > max_tokens:
                assert chunk.kind == "table", (name, chunk.text[:200])
                *head, row = chunk.text.splitlines()
                assert token_count("\n".join(head)) <= max_tokens // 2 < token_count(row), chunk.text[:300]


def _table(rows: list[list[str]]) -> Table:
    cells = tuple(
        TableCell(r, c, t, is_header=r == 0) for r, row in enumerate(rows) for c, t in enumerate(row)
    )
    return Table(1, (50, 100, 550, 700), len(rows), len(rows[0]), tuple(rows[0]), "html", cells)


def _table_doc(rows: list[list[str]]) -> Document:
    table = _table(rows)
    blocks = [
        Block(0, "section_header", (50, 40, 550, 60), "Results", level=1),
        Block(1, "caption", (50, 70, 550, 90), "Table 1: Yearly counts"),
        Block(2, "table", table.bbox, "table text", table_no=table.table_no),
        Block(3, "text", (50, 710, 550, 760), "After the table."),
    ]
    return Document(
        "t" * 64,
        "/x/t.pdf",
        "t.pdf",
        1,
        n_pages=1,
        pages=[Page(1, 612, 792, "text", "text", blocks=blocks, tables=[table])],
    )


def test_a_table_that_fits_is_one_chunk_with_its_caption():
    rows = [["Year", "Count"], *[[str(2000 + i), str(i * 7)] for i in range(10)]]
    chunks = chunk_document(_table_doc(rows), ChunkOptions(max_tokens=200, overlap_tokens=10))
    (table_chunk,) = [c for c in chunks if c.kind == "table"]
    lines = table_chunk.text.splitlines()
    assert lines[:2] == ["Table 1: Yearly counts", "Columns: Year; Count"]
    assert lines[2:] == [f"Year: {year}; Count: {count}" for year, count in rows[1:]]
    assert table_chunk.header_path == ("Results",) and "Results" in table_chunk.context
    assert "After the table." not in table_chunk.text
    assert all("Table 1: Yearly counts" not in c.text for c in chunks if c.kind == "text")


def test_a_large_table_splits_by_rows_with_the_title_and_columns_repeated():
    rows = [["Year", "Count", "Note"], *[[str(2000 + i), str(i * 7), f"note {i}"] for i in range(60)]]
    options = ChunkOptions(60, 5, table_max_tokens=60)
    chunks = [c for c in chunk_document(_table_doc(rows), options) if c.kind == "table"]
    assert len(chunks) > 2
    seen = []
    for chunk in chunks:
        lines = chunk.text.splitlines()
        assert lines[:2] == ["Table 1: Yearly counts", "Columns: Year; Count; Note"]
        assert chunk.n_tokens <= 60
        seen += lines[2:]
    assert seen == [f"Year: {y}; Count: {c}; Note: {n}" for y, c, n in rows[1:]]  # every row once, in order


def test_a_row_reads_label_then_values_under_their_columns():
    """A statement's rows: the title rows above the header, a shared header part said once, lone
    currency signs and empty cells left out, a row label with its values named by their column."""
    cells = (
        TableCell(0, 0, "CONSOLIDATED BALANCE SHEETS", colspan=2),
        TableCell(1, 1, "As of December 31,", colspan=4, is_header=True),
        TableCell(2, 1, "2017", colspan=2, is_header=True),
        TableCell(2, 3, "2016", colspan=2, is_header=True),
        TableCell(3, 0, "Total current liabilities"),
        TableCell(3, 1, "$"),
        TableCell(3, 2, "5,466,312"),
        TableCell(3, 3, "$"),
        TableCell(3, 4, "4,586,657"),
        TableCell(4, 0, "Current liabilities:"),
    )
    table = Table(1, (0, 0, 10, 10), 5, 5, ("", "", "", "", ""), "native", cells)
    doc = _table_doc([["a", "b"], ["c", "d"]])
    doc.pages[0].tables = [table]
    (chunk,) = [c for c in chunk_document(doc, ChunkOptions()) if c.kind == "table"]
    assert chunk.text.splitlines() == [
        "Table 1: Yearly counts",
        "CONSOLIDATED BALANCE SHEETS",
        "Columns: As of December 31, / 2017; As of December 31, / 2016",
        "Total current liabilities — 2017: 5,466,312; 2016: 4,586,657",
        "Current liabilities:",
    ]


def test_page_headers_and_footers_are_left_out():
    blocks = [
        Block(0, "page_header", (0, 0, 600, 20), "ACME Corp confidential"),
        Block(1, "text", (0, 100, 600, 200), "Body text of the page."),
        Block(2, "page_footer", (0, 770, 600, 790), "Page 7"),
    ]
    doc = Document(
        "h" * 64, "/x/h.pdf", "h.pdf", 1, n_pages=1, pages=[Page(1, 612, 792, "text", "text", blocks=blocks)]
    )
    (chunk,) = chunk_document(doc, ChunkOptions())
    assert chunk.text == "Body text of the page." and chunk.bboxes == ((1, 0, 100, 600, 200),)


@pytest.mark.corpus
def test_ids_are_stable_across_runs_locations_and_processes(corpus):
    md = _md(corpus, "2206.01062")
    doc = _doc(md, "x")
    first = [c.chunk_id for c in chunk_document(doc, ChunkOptions())]
    assert first == [c.chunk_id for c in chunk_document(_doc(md, "x"), ChunkOptions())]
    assert len(set(first)) == len(first)
    moved = dataclasses.replace(doc, source_uri="/elsewhere/renamed.pdf", file_name="renamed.pdf")
    assert first == [c.chunk_id for c in chunk_document(moved, ChunkOptions())]
    script = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]);"
        "from test_chunking import _doc; from chandra_ocr.chunking import chunk_document;"
        "from chandra_ocr.config import ChunkOptions;"
        "doc = _doc(Path(sys.argv[1]).read_text(encoding='utf-8'), 'x');"
        "print(json.dumps([c.chunk_id for c in chunk_document(doc, ChunkOptions())]))"
    )
    other = subprocess.run(
        [sys.executable, "-c", script, str(corpus / GT / "2206.01062.md"), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    assert json.loads(other.stdout) == first


@pytest.mark.corpus
def test_a_changed_block_changes_only_its_own_chunk_ids(corpus):
    doc = _doc(_md(corpus, "normal_4pages"), "n")
    before = chunk_document(doc, ChunkOptions(max_tokens=120, overlap_tokens=10))
    blocks = doc.pages[0].blocks
    i = next(
        i for i, b in enumerate(blocks) if b.label == "text" and len(b.text) > 200 and i > len(blocks) // 2
    )
    blocks[i] = dataclasses.replace(blocks[i], text=blocks[i].text + " An added sentence.")
    after = chunk_document(doc, ChunkOptions(max_tokens=120, overlap_tokens=10))
    kept = {c.chunk_id for c in before} & {c.chunk_id for c in after}
    assert len(kept) >= len(before) - 3  # only the chunks around the edit change
    assert {c.chunk_id for c in before} != {c.chunk_id for c in after}


TABLE_PDFS = [
    "pdfplumber/tests/pdfs/nics-background-checks-2015-11.pdf",
    "pdfplumber/tests/pdfs/senate-expenditures.pdf",
    "pdfplumber/tests/pdfs/federal-register-2020-17221.pdf",
    "camelot/tests/files/health.pdf",
    "camelot/tests/files/foo.pdf",
    "docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf",
]


@pytest.mark.corpus
@pytest.mark.parametrize("path", TABLE_PDFS)
def test_text_chunks_of_table_pages_keep_the_limit(corpus, path):
    """Born-digital pages with tables (the triage route): text chunks never exceed ``max_tokens``; a
    split table repeats at most half the limit (caption and header, else less), so a table chunk
    over the limit is one row larger than the rest of the budget."""
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.triage import triage_document

    triage = triage_document(str(corpus / path), PdfOptions())
    assert triage.tables, "the document has tables"
    pages = [
        Page(n, 612, 792, "text", "text", blocks=b, tables=triage.tables.get(n, []))
        for n, b in triage.text_blocks.items()
    ]
    doc = Document("d" * 64, str(path), Path(path).name, 1, n_pages=len(pages), pages=pages)
    max_tokens = 100
    options = ChunkOptions(max_tokens=max_tokens, overlap_tokens=10, table_max_tokens=max_tokens)
    for chunk in chunk_document(doc, options):
        if chunk.n_tokens > max_tokens:
            assert chunk.kind == "table", chunk.text[:200]
            assert token_count(chunk.text.splitlines()[-1]) > max_tokens // 2, chunk.text[:300]


def test_a_row_of_years_under_a_date_header_names_the_columns():
    cells = (
        TableCell(0, 1, "MAY 31,", colspan=2, is_header=True),
        TableCell(1, 0, "(Dollars in millions)"),
        TableCell(1, 1, "2019"),
        TableCell(1, 2, "2018"),
        TableCell(2, 0, "Total current assets"),
        TableCell(2, 1, "16,525"),
        TableCell(2, 2, "15,134"),
    )
    table = Table(1, (0, 0, 10, 10), 3, 3, ("", "MAY 31,", "MAY 31,"), "native", cells)
    doc = _table_doc([["a", "b"], ["c", "d"]])
    doc.pages[0].tables = [table]
    (chunk,) = [c for c in chunk_document(doc, ChunkOptions()) if c.kind == "table"]
    assert chunk.text.splitlines()[1:] == [
        "(Dollars in millions)",
        "Columns: MAY 31, / 2019; MAY 31, / 2018",
        "Total current assets — 2019: 16,525; 2018: 15,134",
    ]
