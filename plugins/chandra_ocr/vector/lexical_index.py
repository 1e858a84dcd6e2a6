"""The feed's lexical index: the outbox applied to ``<index dir>/lexical.duckdb``, searched by BM25.

Every feed builds it, with or without an embedding model or a vector store, so search has words to
match from the first feed on. ``lexical_chunks`` holds each chunk's outbox columns and its number of
terms, ``postings`` its terms (``vector.lexical``); ``applied_exports`` the outbox files applied (a
replay is a no-op); ``index_meta`` the tokenizer the terms were made with. Each file is applied in
one transaction: deletes and upserts remove the chunks' rows, upserts add them anew. An index made
by another tokenizer is emptied and the outbox replayed from its first file (outbox files are kept).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from chandra_ocr.document import indexed_text
from chandra_ocr.store.duckdb_store import transaction
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector import lexical
from chandra_ocr.vector.index import COLUMNS, Hit, connect_index_file
from chandra_ocr.vector.outbox import pending_files, read_export

log = logging.getLogger(__name__)

TOKENIZER = "words-snowball-english-1"  # change it whenever ``lexical.terms`` changes


@dataclass(frozen=True)
class LexicalCounts:
    """What one ``apply_lexical`` call did."""

    files: int
    upserts: int
    deletes: int
    chunks: int  # chunks in the index afterwards


def lexical_path(index_dir: Path) -> Path:
    """The lexical index's DuckDB file inside ``index_dir``."""
    return Path(index_dir) / "lexical.duckdb"


def open_lexical(index_dir: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating when writable) the lexical index in ``index_dir``; StoreError when it cannot be."""
    con = connect_index_file(lexical_path(index_dir), "lexical index", read_only=read_only)
    if not read_only:
        create_index(con)
    return con


def create_index(con: duckdb.DuckDBPyConnection) -> None:
    """The index's tables in ``con`` (an index of another tokenizer emptied first)."""
    con.execute("CREATE TABLE IF NOT EXISTS index_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    made_by = con.execute("SELECT value FROM index_meta WHERE key = 'tokenizer'").fetchall()
    if made_by and made_by[0][0] != TOKENIZER:
        log.info("lexical index made by tokenizer %s: rebuilding with %s", made_by[0][0], TOKENIZER)
        for table in ("lexical_chunks", "postings", "applied_exports"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute("INSERT OR REPLACE INTO index_meta VALUES ('tokenizer', ?)", [TOKENIZER])
    con.execute(
        """CREATE TABLE IF NOT EXISTS lexical_chunks (
            chunk_id VARCHAR PRIMARY KEY, doc_id VARCHAR NOT NULL, chunk_no INTEGER, kind VARCHAR,
            text VARCHAR, n_tokens INTEGER, header_path VARCHAR[], page_start INTEGER, page_end INTEGER,
            bboxes STRUCT(page_no INTEGER, x0 DOUBLE, y0 DOUBLE, x1 DOUBLE, y1 DOUBLE)[],
            content_hash VARCHAR, source_uri VARCHAR, file_name VARCHAR, context VARCHAR,
            n_terms INTEGER NOT NULL)"""
    )
    lexical.create_postings(con)
    con.execute(
        "CREATE TABLE IF NOT EXISTS applied_exports (feed VARCHAR, export_no INTEGER, "
        "upserts BIGINT, deletes BIGINT, applied_at TIMESTAMPTZ, PRIMARY KEY (feed, export_no))"
    )


def apply_lexical(layout: KbLayout, index_dir: Path, *, feed: str = "vector") -> LexicalCounts:
    """Bring the lexical index in ``index_dir`` up to the newest outbox file of ``feed``."""
    con = open_lexical(index_dir)
    files = upserts = deletes = 0
    try:
        after = con.execute(
            "SELECT coalesce(max(export_no), 0) FROM applied_exports WHERE feed = ?", [feed]
        ).fetchall()[0][0]
        for export_no, path in pending_files(layout, feed, int(after)):
            table = read_export(path)
            ops = table.column("op").to_pylist()
            ups = table.filter(pa.array([op == "upsert" for op in ops])).select(COLUMNS.split(", "))
            dels = table.filter(pa.array([op == "delete" for op in ops])).select(["chunk_id"])
            with transaction(con):
                replace_chunks(con, ups, dels)
                con.execute(
                    "INSERT OR REPLACE INTO applied_exports VALUES (?, ?, ?, ?, now())",
                    [feed, export_no, ups.num_rows, dels.num_rows],
                )
            files, upserts, deletes = files + 1, upserts + ups.num_rows, deletes + dels.num_rows
        chunks = int(con.execute("SELECT count(*) FROM lexical_chunks").fetchall()[0][0])
    finally:
        con.close()
    log.info(
        "lexical index: %d file(s) applied, %d upserts, %d deletes; %d chunks",
        files,
        upserts,
        deletes,
        chunks,
    )
    return LexicalCounts(files, upserts, deletes, chunks)


def replace_chunks(con: duckdb.DuckDBPyConnection, upserts: pa.Table, deletes: pa.Table) -> None:
    """Remove the chunks of ``deletes`` and ``upserts`` (``chunk_id`` columns), then index ``upserts``
    (outbox columns; ``chunk_id``, ``doc_id``, ``text`` and ``context`` at least)."""
    gone = deletes.column("chunk_id").to_pylist() + upserts.column("chunk_id").to_pylist()
    lexical.remove(con, gone)
    con.execute(
        "DELETE FROM lexical_chunks WHERE chunk_id IN (SELECT unnest($ids::VARCHAR[]))", {"ids": gone}
    )
    rows = upserts.to_pylist()
    counts = lexical.add_postings(
        con, ((r["chunk_id"], indexed_text(r["context"], r["text"] or "")) for r in rows)
    )
    con.register("lexical_upserts", upserts.append_column("n_terms", pa.array(counts, pa.int32())))
    try:
        con.execute("INSERT INTO lexical_chunks BY NAME SELECT * FROM lexical_upserts")
    finally:
        con.unregister("lexical_upserts")


def search_lexical(
    con: duckdb.DuckDBPyConnection, question: str, n: int = 50, doc_id: str | None = None
) -> list[Hit]:
    """The ``n`` best chunks for ``question`` by BM25, best first (of one document when given)."""
    ranked = lexical.bm25(con, question, n, doc_id)
    if not ranked:
        return []
    scores = dict(ranked)
    rows = con.execute(
        "SELECT chunk_id, doc_id, file_name, page_start, page_end, kind, header_path, text, "
        "coalesce(context, '') FROM lexical_chunks WHERE list_contains(?, chunk_id)",
        [list(scores)],
    ).fetchall()
    hits = {
        r[0]: Hit(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6] or ()), r[7], scores[r[0]], r[8])
        for r in rows
    }
    return [hits[cid] for cid, _ in ranked if cid in hits]
