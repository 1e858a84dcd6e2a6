"""Tables across page breaks (sql/004_tables.sql: table_continuations, table_parts,
kb_linked_table_rows) after a real ingest of a PDF made here: a table that ends one page and goes on,
without its header, at the top of the next is linked; one after a paragraph is not."""

from __future__ import annotations

import pymupdf
import pytest

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

OPTIONS = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False, workers=1))
TOWNS = ["Ashford", "Bexley", "Crawley", "Dorking", "Epsom", "Farnham", "Guildford", "Horsham"]


def _rows(page: pymupdf.Page, rows: list[tuple[str, ...]], top: float) -> float:
    for n, row in enumerate(rows):
        for x, text in zip((72, 250, 400), row, strict=True):
            page.insert_text((x, top + 14 * n), text, fontsize=10)
    return top + 14 * len(rows)


def _body(first: int, n: int) -> list[tuple[str, ...]]:
    return [(TOWNS[i % 8] + f" {i}", f"{1000 + 37 * i:,}", f"{3 + i % 7}.5") for i in range(first, first + n)]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    doc = pymupdf.open()
    one = doc.new_page(width=612, height=792)
    one.insert_text((72, 90), "Water use by town, 2024", fontsize=14)
    _rows(one, [("Town", "Litres", "Change (%)"), *_body(0, 12)], 560)  # ends the page
    two = doc.new_page(width=612, height=792)
    end = _rows(two, _body(12, 10), 72)  # goes on at the top, no header
    two.insert_text((72, end + 30), "The figures above are provisional and will be revised.", fontsize=10)
    three = doc.new_page(width=612, height=792)
    _rows(three, _body(22, 6), 72)  # a table at the top, but page two ended with a paragraph
    src = tmp_path_factory.mktemp("src")
    doc.save(src / "water.pdf")
    root = tmp_path_factory.mktemp("kb")
    run(src, root, OPTIONS)
    con = connect(KbLayout(root), read_only=True)
    yield con
    con.close()


def test_a_table_going_on_at_the_top_of_the_next_page_is_linked(kb):
    tables = kb.execute("SELECT page_no, table_no, n_cols FROM tables ORDER BY page_no").fetchall()
    assert tables == [(1, 1, 3), (2, 1, 3), (3, 1, 3)]
    links = kb.execute(
        "SELECT page_no, table_no, prev_page_no, prev_table_no FROM table_continuations"
    ).fetchall()
    assert links == [(2, 1, 1, 1)]
    parts = kb.execute("SELECT page_no, first_page_no, part_no FROM table_parts ORDER BY page_no").fetchall()
    assert parts == [(1, 1, 1), (2, 1, 2), (3, 3, 1)]


def test_linked_rows_carry_the_first_parts_column_names(kb):
    doc_id = kb.execute("SELECT doc_id FROM documents").fetchone()[0]
    rows = kb.execute(
        "SELECT part_no, record['Town'], record['Litres'] FROM kb_linked_table_rows(?, 1, 1)", [doc_id]
    ).fetchall()
    assert [r[1] for r in rows] == [town for town, _, _ in _body(0, 22)]
    assert [r[0] for r in rows] == [1] * 12 + [2] * 10
    assert rows[-1][2] == _body(21, 1)[0][1]


@pytest.mark.corpus
def test_the_warn_report_reads_as_one_table_over_its_pages(corpus, tmp_path):
    """pdfplumber's WARN report: one table over pages 1-15 (header on page 1 only), then a summary
    table at the foot of page 15 that goes on over page 16."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "warn.pdf").write_bytes(
        (corpus / "pdfplumber/tests/pdfs/WARN-Report-for-7-1-2015-to-03-25-2016.pdf").read_bytes()
    )
    run(src, tmp_path / "kb", OPTIONS)
    con = connect(KbLayout(tmp_path / "kb"), read_only=True)
    try:
        chains = con.execute(
            "SELECT first_page_no, first_table_no, count(*) FROM table_parts GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert chains == [(1, 1, 15), (15, 2, 2)]
        doc_id = con.execute("SELECT doc_id FROM documents").fetchone()[0]
        rows = con.execute(
            "SELECT count(*), count(DISTINCT page_no), count(record['Company']) "
            "FROM kb_linked_table_rows(?, 1, 1)",
            [doc_id],
        ).fetchone()
        assert rows == (633, 15, 633)
    finally:
        con.close()
