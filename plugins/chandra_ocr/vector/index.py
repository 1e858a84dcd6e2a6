"""The embedded vector index: one DuckDB file with a fixed-size FLOAT array per chunk, exact cosine search.

``<index_dir>/vectors.duckdb`` holds

- ``vectors``: one row per chunk (``chunk_id`` key), the chunk's text and provenance as in the
  outbox, its ``content_hash`` and ``embedding FLOAT[dim]``;
- ``index_meta``: the embedding model and dimension the vectors were made with (an index never
  mixes models: another model raises ConfigError; delete the folder to rebuild);
- ``applied_exports``: which outbox files (feed, export_no) were applied, so a replay is a no-op.

Search is exact (a full scan with ``array_cosine_similarity``); bench/vector_index.py compares
it with LanceDB (results in bench/results/vector_index.json).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb

from chandra_ocr.errors import ConfigError, StoreError

log = logging.getLogger(__name__)

# Vectors past which exact search takes over ~100 ms a query on 2 cores (bench/results/vector_index.json).
EXACT_SEARCH_LIMIT = 100_000

# The outbox columns an index keeps beside each vector (outbox.py documents them).
COLUMNS = (
    "chunk_id, doc_id, chunk_no, kind, text, n_tokens, header_path, page_start, page_end, "
    "bboxes, content_hash, source_uri, file_name, context"
)


@dataclass(frozen=True)
class Hit:
    """One search result: the chunk, where it comes from, and its cosine similarity to the query."""

    chunk_id: str
    doc_id: str
    file_name: str
    page_start: int
    page_end: int
    kind: str
    header_path: tuple[str, ...]
    text: str
    score: float
    context: str = ""


def index_path(index_dir: Path) -> Path:
    """The index's DuckDB file inside ``index_dir``."""
    return Path(index_dir) / "vectors.duckdb"


def connect_index_file(path: Path, what: str, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the index file ``path`` (``what`` names it in errors); StoreError when a
    read-only one does not exist yet or it cannot be opened."""
    if read_only and not path.exists():
        raise StoreError(f"no {what} at {path}; run the vector feed first")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:
        raise StoreError(f"cannot open {what} {path}: {e}") from e


def open_index(
    index_dir: Path, model: str, dim: int, *, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the index for vectors of ``model`` with ``dim`` dimensions.

    Raises ConfigError when the index holds another model's vectors, StoreError when it cannot be opened.
    """
    con = connect_index_file(index_path(index_dir), "vector index", read_only=read_only)
    try:
        if not read_only:
            _create(con, model, dim)
        _check_model(con, model, dim)
    except BaseException:
        con.close()
        raise
    return con


def _create(con: duckdb.DuckDBPyConnection, model: str, dim: int) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS index_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    con.execute(
        "INSERT INTO index_meta VALUES ('model', ?), ('dim', ?) ON CONFLICT DO NOTHING", [model, str(dim)]
    )
    _check_model(con, model, dim)
    con.execute(
        f"""CREATE TABLE IF NOT EXISTS vectors (
            chunk_id VARCHAR PRIMARY KEY, doc_id VARCHAR NOT NULL, chunk_no INTEGER, kind VARCHAR,
            text VARCHAR, n_tokens INTEGER, header_path VARCHAR[], page_start INTEGER, page_end INTEGER,
            bboxes STRUCT(page_no INTEGER, x0 DOUBLE, y0 DOUBLE, x1 DOUBLE, y1 DOUBLE)[],
            content_hash VARCHAR, source_uri VARCHAR, file_name VARCHAR,
            embedding FLOAT[{int(dim)}] NOT NULL, embedded_at TIMESTAMPTZ NOT NULL, context VARCHAR)"""
    )
    con.execute("ALTER TABLE vectors ADD COLUMN IF NOT EXISTS context VARCHAR")  # an index made before it
    con.execute(
        "CREATE TABLE IF NOT EXISTS applied_exports (feed VARCHAR, export_no INTEGER, file VARCHAR, "
        "upserts BIGINT, deletes BIGINT, embedded BIGINT, applied_at TIMESTAMPTZ, "
        "PRIMARY KEY (feed, export_no))"
    )


def _check_model(con: duckdb.DuckDBPyConnection, model: str, dim: int) -> None:
    meta = dict(con.execute("SELECT key, value FROM index_meta").fetchall())
    if meta.get("model") != model or meta.get("dim") != str(dim):
        raise ConfigError(
            f"the vector index holds {meta.get('model')} vectors (dim {meta.get('dim')}), not {model} "
            f"(dim {dim}); delete the index folder to rebuild it"
        )


def last_applied(con: duckdb.DuckDBPyConnection, feed: str) -> int:
    """The highest export number of ``feed`` applied to this index (0 when none)."""
    return int(
        con.execute(
            "SELECT coalesce(max(export_no), 0) FROM applied_exports WHERE feed = ?", [feed]
        ).fetchall()[0][0]
    )


def search(con: duckdb.DuckDBPyConnection, query_vector, k: int = 5, doc_id: str | None = None) -> list[Hit]:
    """The ``k`` chunks most similar to ``query_vector`` (cosine), best first; optionally of one document."""
    dim = len(query_vector)
    rows = con.execute(
        f"""SELECT chunk_id, doc_id, file_name, page_start, page_end, kind, header_path, text,
                   array_cosine_similarity(embedding, ?::FLOAT[{dim}]) AS score, coalesce(context, '')
            FROM vectors WHERE ?::VARCHAR IS NULL OR doc_id = ?
            ORDER BY score DESC, chunk_id LIMIT ?""",
        [list(map(float, query_vector)), doc_id, doc_id, int(k)],
    ).fetchall()
    return [
        Hit(cid, doc_id, file_name, first, last, kind, tuple(header_path or ()), text, float(score), context)
        for cid, doc_id, file_name, first, last, kind, header_path, text, score, context in rows
    ]


def count(con: duckdb.DuckDBPyConnection, doc_id: str | None = None) -> int:
    """Vectors in the index (of one document)."""
    sql = "SELECT count(*) FROM vectors WHERE ?::VARCHAR IS NULL OR doc_id = ?"
    return int(con.execute(sql, [doc_id, doc_id]).fetchall()[0][0])
