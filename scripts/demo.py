"""The README's demo: ingest the bundled sample PDFs into ./kb and show what landed in DuckDB."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

REPO = Path(__file__).resolve().parents[1]

QUERIES = {
    "Documents and how they ended": "SELECT file_name, status, n_pages, error FROM documents ORDER BY file_name",
    "Pages by route and engine": "SELECT route, engine, status, count(*) AS pages FROM pages GROUP BY ALL ORDER BY ALL",
    "Chunks that mention nitrate": (
        "SELECT d.file_name, c.page_start, c.header_path, left(c.text, 70) AS text "
        "FROM chunks c JOIN documents d USING (doc_id) WHERE c.text ILIKE '%nitrate%' ORDER BY ALL"
    ),
}


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    kb = REPO / "kb"
    options = IngestOptions(engine="auto", pdf=PdfOptions(settle_seconds=0))
    summary = run(REPO / "samples", kb, options)
    print(f"\nrun {summary.run_id}: {len(summary.discovery.new)} new documents, statuses {summary.statuses}")
    layout = KbLayout(kb)
    print(f"DuckDB: {layout.duckdb_path}\n")
    con = connect(layout, read_only=True)
    try:
        for title, sql in QUERIES.items():
            print(f"-- {title}\n{sql};")
            con.sql(sql).show(max_width=160)
    finally:
        con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
