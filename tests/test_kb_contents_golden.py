"""The knowledge base one run makes over a mixed subset, pinned by per-table row hashes.

A refactoring of the pipeline must leave these hashes alone; a change that means to alter the
output (a better table reader, new columns) updates them, and its commit says why. Print the
current hashes with ``.venv/bin/python tests/test_kb_contents_golden.py``.

Columns that differ between runs by nature are left out: times, run ids, latencies and the
source's absolute path (its file name stays). Compression is off: Ghostscript's output embeds
dates and ids. Tesseract reads the scans (100 dpi, for speed); its version is the machine's.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

CORPUS_FILES = [
    "docling/tests/data/pdf/sources/redp5110_sampled.pdf",  # born-digital, headings, tables, 18 pages
    "pdfplumber/tests/pdfs/nics-background-checks-2015-11.pdf",  # a large table
    "ocrmypdf/tests/resources/cardinal.pdf",  # scanned pages
    "pdfjs/test/pdfs/Pages-tree-refs.pdf",  # partial: one page in a page-tree cycle
]
VOLATILE = {
    "documents": ["source_uri", "run_id", "first_seen", "ingested_at"],
    "pages": ["latency_ms"],
    "chunks": ["updated_at"],
}
TABLES = ["documents", "pages", "blocks", "tables", "table_cells", "chunks"]

# rows:hash. The code of 39692bf produced the same documents, pages 30:f02f4617bf85f427, blocks
# 370:19146e7630f0e3f3, tables 7:ecc1bd64e2d2756e, table_cells 472:8a3662c6d66464e5 and chunks
# 66:0893157c7bec6856, unchanged by the no-hang and data-model changes; the reader of tables without
# (all) rules, header rows and running headers (issue #21) changed pages, blocks, tables and chunks
# (then pages 30:854b3abf088813b8, blocks 386:df88ea399a724cba, tables 7:87ca658885cfe6a2,
# table_cells 1527:596e40fd69fbfcf9, chunks 63:858ab3600a9430d2). The partly ruled reader
# (tables/partly_ruled.py) changed them again: NICS is read by its column rules (25 columns, the empty
# Rentals pair included, the group labels as a header row, the title left as text), so its cells
# and row chunks change; redp5110's code listing on page 8 holds fewer lines in a table (then pages
# 30:8d0a7ad46a86f28a, blocks 387:bed1b0a7f5fd1d97, tables 7:5566697a1fd18997, table_cells
# 1619:d4370abbddae1c1e, chunks 67:80a610922db96560). Header labels (group label " / ", a column's
# wrapped lines with a space), NICS's narrow group labels spanning the columns between the rules that
# cross their line (Pre-Pawn, Redemption, Private Sale: 6 empty cells fewer, longer column names, one
# row chunk more) and bold header rows (redp5110 pp. 8, 11, 12: "Column name | Data type |
# Description", "Special register | Corresponding value", "Global variable | Type | Description")
# changed them again (then documents 8:611663d559b9a8ff, pages 30:0e816311b1196a96, blocks
# 387:77f598e988a14be1, tables 7:58abe29d111ef614, table_cells 1613:5cd99879eca2d65c, chunks
# 68:fc96c9c3214f38af). Header levels (issue 58: pipeline version 3; tables.header_rows, stub_head
# and table_cells.header_level added; NICS's column labels with no group label above them span
# both header rows, 8 empty header cells fewer; wrapped cells joined) changed them again (then
# chunks 68:fb9f71afe14e0321). Chunks for retrieval (issue 56: chunks.context; a table chunk is its
# title, a columns line and one line per row, split into parts of at most table_max_tokens, 256; a
# short text block before a table names it) changed the chunks alone.
EXPECTED = {
    "documents": "8:57ef768f08bd3e36",
    "pages": "30:8177d068155836a1",
    "blocks": "387:582f3f13f861cc14",
    "tables": "7:ecb05cd6efa8dd91",
    "table_cells": "1605:8d0a67c41d2b3d52",
    "chunks": "85:ee668258f4f3f149",
}


def build(corpus: Path, samples: Path, work: Path) -> Path:
    """Run the pipeline over the subset into ``work/kb``; returns the KB folder."""
    src = work / "in"
    src.mkdir(parents=True)
    for path in [*sorted(samples.glob("*.pdf")), *(corpus / f for f in CORPUS_FILES)]:
        shutil.copy(path, src / path.name)
    options = IngestOptions(
        engine="cpu", pdf=PdfOptions(settle_seconds=0, compress=False), engine_options={"dpi": 100}
    )
    run(src, work / "kb", options)
    return work / "kb"


def table_hashes(kb: Path) -> dict[str, str]:
    """sha256 of each table's rows (volatile columns left out), sorted, as text."""
    con = connect(KbLayout(kb), read_only=True)
    try:
        out = {}
        for table in TABLES:
            skip = VOLATILE.get(table)
            columns = f"* EXCLUDE ({', '.join(skip)})" if skip else "*"
            rows = sorted(repr(r) for r in con.execute(f"SELECT {columns} FROM {table}").fetchall())
            out[table] = f"{len(rows)}:" + hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
        return out
    finally:
        con.close()


@pytest.mark.timeout(900)
def test_one_run_over_a_mixed_subset_makes_the_pinned_kb(corpus: Path, samples: Path, tmp_path: Path):
    assert table_hashes(build(corpus, samples, tmp_path)) == EXPECTED


if __name__ == "__main__":
    import tempfile

    from conftest import SAMPLES, corpus_root

    root = corpus_root()
    if root is None:
        sys.exit("the corpus is needed: set CHANDRA_OCR_CORPUS")
    with tempfile.TemporaryDirectory() as tmp:
        for table, digest in table_hashes(build(root, SAMPLES, Path(tmp))).items():
            print(f'    "{table}": "{digest}",')
