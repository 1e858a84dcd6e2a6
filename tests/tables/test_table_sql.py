"""Tables in DuckDB after a real ingest: the kb_table_cells / kb_table_rows macros, the
table_search view and ``chandra-ingest table`` return exactly the cells the extractor found."""

from __future__ import annotations

import csv
import io
import json
import shutil
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pymupdf
import pytest

from chandra_ocr.cli import main
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.document import Document, Page
from chandra_ocr.parse.chandra_html import parse_chandra_html
from chandra_ocr.pdf.text_layer import read_page
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect, load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged
from chandra_ocr.store.table_view import resolve_document, table_relation
from chandra_ocr.tables.markup import grid
from chandra_ocr.tables.page import page_tables
from chandra_ocr.testing.cell_match import cell_match, filled_grid

OPTIONS = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False, workers=1))
FILES = ["row_span_1.pdf", "twotables_2.pdf", "column_span_2.pdf"]


@pytest.fixture(scope="module")
def kb(corpus, tmp_path_factory) -> KbLayout:
    src = tmp_path_factory.mktemp("src")
    for name in FILES:
        shutil.copy(corpus / "camelot/tests/files" / name, src / name)
    root = tmp_path_factory.mktemp("kb")
    run(src, root, OPTIONS)
    return KbLayout(root)


def _db_grid(con, doc_id: str, page_no: int, table_no: int) -> list[list[str]]:
    rows = con.execute(
        'SELECT "row", col, text FROM kb_table_cells(?, ?, ?) ORDER BY "row", col',
        [doc_id, page_no, table_no],
    ).fetchall()
    n_rows = max(r for r, _, _ in rows) + 1
    n_cols = max(c for _, c, _ in rows) + 1
    out = [[""] * n_cols for _ in range(n_rows)]
    for r, c, text in rows:
        out[r][c] = text
    return out


@pytest.mark.corpus
def test_macro_returns_the_extracted_grid(kb, corpus):
    con = connect(kb, read_only=True)
    try:
        for name in FILES:
            doc_id = resolve_document(con, name)
            with pymupdf.open(corpus / "camelot/tests/files" / name) as pdf:
                read = read_page(pdf[0])
                extracted = page_tables(pdf[0], read.blocks, row_splits=read.stats.row_splits)[1]
            stored = con.execute(
                "SELECT table_no, n_rows, n_cols, header, source FROM tables "
                "WHERE doc_id = ? ORDER BY table_no",
                [doc_id],
            ).fetchall()
            assert [(t.table_no, t.n_rows, t.n_cols, list(t.header), "native") for t in extracted] == stored
            for t in extracted:
                db = _db_grid(con, doc_id, 1, t.table_no)
                assert db == grid(t)
                assert cell_match(filled_grid(t), db) == 1.0
    finally:
        con.close()


@pytest.mark.corpus
def test_relation_rows_and_search_view(kb):
    con = connect(kb, read_only=True)
    try:
        doc_id = resolve_document(con, "row_span_1.pdf")
        db = _db_grid(con, doc_id, 1, 1)
        header = con.execute(
            "SELECT header FROM tables WHERE doc_id = ? AND table_no = 1", [doc_id]
        ).fetchall()
        n_header = con.execute(
            'SELECT count(DISTINCT "row") FROM kb_table_cells(?, 1, 1) WHERE is_header', [doc_id]
        ).fetchall()[0][0]
        relation = table_relation(con, doc_id, 1, 1)
        assert relation.columns == ["row", *header[0][0]]
        assert [list(r[1:]) for r in relation.fetchall()] == db[n_header:]
        rows = con.execute("SELECT cells, record FROM kb_table_rows(?, 1, 1)", [doc_id]).fetchall()
        assert [r[0] for r in rows] == db[n_header:]
        assert rows[0][1]["County"] == db[n_header][header[0][0].index("County")]
        found = con.execute(
            "SELECT file_name, table_no FROM table_search WHERE header_text ILIKE '%plan name%'"
        ).fetchall()
        assert found == [("row_span_1.pdf", 1)]
        by_cell = con.execute("SELECT DISTINCT file_name FROM table_search WHERE cell_text ILIKE '%Kerala%'")
        assert by_cell.fetchall() == [("twotables_2.pdf",)]
    finally:
        con.close()


@pytest.mark.corpus
def test_a_two_level_header_names_the_columns_and_the_rows_type_as_numbers(kb, corpus, tmp_path):
    """twotables_2: "State" and "n" span both header rows, "Literacy Status" groups six columns over
    the second; the body rows cast to numbers in SQL by their joined column names, and DuckDB's CSV
    reader types the CLI's CSV of the table as numbers, row for row camelot's expected values."""
    expected = json.loads((corpus / "camelot/camelot_expected_tables.json").read_text())["expected"]
    body = expected["data_lattice_two_tables_1"][2:]  # camelot's table: two header rows, then the body
    con = connect(kb, read_only=True)
    try:
        doc_id = resolve_document(con, "twotables_2.pdf")
        shape = con.execute(
            "SELECT header_rows, stub_head, header FROM tables WHERE doc_id = ? AND table_no = 1", [doc_id]
        ).fetchone()
        assert shape[:2] == (2, "State")
        assert shape[2][:4] == [
            "State",
            "n",
            "Literacy Status / Illiterate",
            "Literacy Status / Read & Write",
        ]
        levels = con.execute(
            "SELECT header_level, list(text ORDER BY col) FROM table_cells "
            "WHERE doc_id = ? AND table_no = 1 AND is_header GROUP BY ALL ORDER BY ALL",
            [doc_id],
        ).fetchall()
        assert levels[0] == (1, ["State", "n", "Literacy Status"])
        assert levels[1][0] == 2 and levels[1][1][:2] == ["Illiterate", "Read & Write"]
        typed = con.execute(
            "SELECT r.record['State'], r.record['n']::INTEGER, "
            "r.record['Literacy Status / Read & Write']::DOUBLE FROM kb_table_rows(?, 1, 1) r ORDER BY r.row",
            [doc_id],
        ).fetchall()
        assert typed == [(row[0], int(row[1]), float(row[3])) for row in body]
    finally:
        con.close()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["table", "--kb", str(kb.root), "twotables_2.pdf", "1", "1", "--csv"]) == 0
    (tmp_path / "t.csv").write_text(out.getvalue(), encoding="utf-8")
    types = dict(
        duckdb.sql(f"DESCRIBE SELECT * FROM read_csv('{tmp_path / 't.csv'}')").fetchall()[i][:2]
        for i in range(9)
    )
    assert types["State"] == "VARCHAR" and types["n"] == "BIGINT"
    assert {types[f"Literacy Status / {name}"] for name in ("Illiterate", "Read & Write", "College")} == {
        "DOUBLE"
    }


@pytest.mark.corpus
def test_cli_table_prints_the_same_relation(kb):
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["table", "--kb", str(kb.root), "column_span_2.pdf", "1", "1", "--csv"]) == 0
    printed = list(csv.reader(io.StringIO(out.getvalue())))
    con = connect(kb, read_only=True)
    try:
        relation = table_relation(con, resolve_document(con, "column_span_2.pdf"), 1, 1)
        assert printed == [relation.columns, *[[str(v) for v in r] for r in relation.fetchall()]]
    finally:
        con.close()
    assert main(["table", "--kb", str(kb.root), "column_span_2.pdf", "1", "9"]) == 2  # no such table


CHANDRA_PAGE = """<div data-bbox="100 100 900 140" data-label="Section-Header"><h2>Results</h2></div>
<div data-bbox="100 340 900 600" data-label="Table"><table>
<thead><tr><th rowspan="2">Region</th><th colspan="2">2023</th><th rowspan="2">Note</th></tr>
<tr><th>Q1</th><th>Q2</th></tr></thead>
<tbody><tr><td>North</td><td>1.5</td><td>2.0</td><td rowspan="2">est.</td></tr>
<tr><td>South</td><td colspan="2">n/a</td></tr></tbody></table></div>"""

# The HTML table model, worked out by hand: spans repeat over the area they cover.
CHANDRA_GRID = [
    ["Region", "2023", "2023", "Note"],
    ["Region", "Q1", "Q2", "Note"],
    ["North", "1.5", "2.0", "est."],
    ["South", "n/a", "n/a", "est."],
]


def test_chandra_html_spans_reach_duckdb_as_the_right_grid(tmp_path: Path):
    parsed = parse_chandra_html(CHANDRA_PAGE, 612, 792)
    page = Page(1, 612, 792, "ocr", "vllm", blocks=parsed.blocks, tables=parsed.tables)
    doc = Document("d" * 64, "/x/c.pdf", "c.pdf", 1, n_pages=1, pages=[page])
    layout = KbLayout(tmp_path)
    write_staged(layout, "r", doc.doc_id, document_rows(doc, [], run_id="r", now=datetime.now(UTC)))
    load_documents(layout, "r", [doc.doc_id])
    con = connect(layout, read_only=True)
    try:
        assert _db_grid(con, doc.doc_id, 1, 1) == CHANDRA_GRID
        relation = table_relation(con, doc.doc_id, 1, 1)
        assert relation.columns == ["row", "Region", "2023 / Q1", "2023 / Q2", "Note"]
        assert relation.fetchall() == [(2, "North", "1.5", "2.0", "est."), (3, "South", "n/a", "n/a", "est.")]
    finally:
        con.close()
