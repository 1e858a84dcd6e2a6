"""The knowledge base's DuckDB file: schema, the single-writer loader, and read helpers.

DuckDB lets one process hold a read-write connection and then blocks every other process,
readers included; ``connect`` waits (bounded) for the lock instead of failing at once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import duckdb

from chandra_ocr.errors import StoreError
from chandra_ocr.store.layout import SHARD_TABLES, KbLayout
from chandra_ocr.store.schema import apply_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRecord:
    """One pipeline run's summary for the ``runs`` table."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    n_documents: int
    n_pages: int
    metrics: dict


def connect(layout: KbLayout, *, read_only: bool = False, wait_s: float = 120.0) -> duckdb.DuckDBPyConnection:
    """Open the KB file, waiting up to ``wait_s`` while another process holds its lock."""
    layout.root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(layout.duckdb_path), read_only=read_only)
        except duckdb.IOException as e:
            if "lock" not in str(e).lower() or time.monotonic() > deadline:
                raise StoreError(f"cannot open {layout.duckdb_path}: {e}") from e
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN … COMMIT around the block; ROLLBACK (and re-raise) on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def known_documents(layout: KbLayout) -> dict[str, str]:
    """doc_id → source_uri of every document already recorded (any status); empty for a new KB."""
    if not layout.duckdb_path.exists():
        return {}
    con = connect(layout, read_only=True)
    try:
        has = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'documents'"
        ).fetchone()
        if not has or not has[0]:
            return {}
        return dict(con.execute("SELECT doc_id, source_uri FROM documents").fetchall())
    finally:
        con.close()


def document_versions(layout: KbLayout) -> dict[str, tuple[str, str | None]]:
    """doc_id → (pipeline_version, model) for deciding what ``reprocess`` must redo."""
    if not layout.duckdb_path.exists():
        return {}
    con = connect(layout, read_only=True)
    try:
        return {
            r[0]: (r[1], r[2])
            for r in con.execute("SELECT doc_id, pipeline_version, model FROM documents").fetchall()
        }
    except duckdb.CatalogException:
        return {}
    finally:
        con.close()


def load_documents(
    layout: KbLayout, doc_ids: Iterable[str], run: Callable[[], RunRecord] | None = None
) -> dict[str, int]:
    """Upsert the shards of ``doc_ids`` into DuckDB in one transaction; returns rows loaded per table.

    A document's rows are replaced as a whole (no orphans); ``first_seen`` and, for unchanged
    chunks, ``updated_at`` survive re-ingestion, new or changed chunks get the load's time as
    ``updated_at``; chunks that disappear get tombstones. ``run`` makes the run's record once the
    rows are in (so that it can time the load), stored in the same transaction.
    """
    doc_ids = sorted(set(doc_ids))
    missing = [d for d in doc_ids if not layout.shard("documents", d).exists()]
    if missing:
        raise StoreError(f"no shards for {len(missing)} document(s), e.g. {missing[0]}")
    con = connect(layout)
    try:
        apply_schema(con)
        # Shards are many small files: with insertion order kept, DuckDB's threads wait on each
        # other to order their rows (a 59-document load read its shards in 115 ms on 2 threads,
        # 85 ms on one, 70 ms unordered). Tables have keys; nothing reads them in physical order.
        con.execute("SET SESSION preserve_insertion_order = false")
        if not doc_ids:
            counts = dict.fromkeys(SHARD_TABLES, 0)
        else:
            with transaction(con):
                counts = _upsert(con, layout, doc_ids)
                if run is not None:
                    _record_run(con, run())
        log.info("loaded %d document(s) into %s: %s", len(doc_ids), layout.duckdb_path, counts)
        return counts
    finally:
        con.close()


def _upsert(con: duckdb.DuckDBPyConnection, layout: KbLayout, doc_ids: list[str]) -> dict[str, int]:
    counts = {}
    for table in SHARD_TABLES:  # fixed identifiers, never built from document content
        paths = [str(p) for d in doc_ids if (p := layout.shard(table, d)).exists()]  # no rows: no shard
        if paths:
            con.execute(f"CREATE OR REPLACE TEMP TABLE new_{table} AS SELECT * FROM read_parquet(?)", [paths])
        else:
            con.execute(f"CREATE OR REPLACE TEMP TABLE new_{table} AS SELECT * FROM {table} LIMIT 0")
        counts[table] = con.fetchall()[0][0]  # CREATE … AS answers with its row count
    con.execute(
        "UPDATE new_documents n SET first_seen = d.first_seen FROM documents d WHERE d.doc_id = n.doc_id"
    )
    # A changed chunk's updated_at is this load's time, not its assembly time: a feed export that ran
    # between the two would otherwise have moved its watermark past the chunk before it was visible.
    con.execute("UPDATE new_chunks SET updated_at = now()")
    con.execute(
        "UPDATE new_chunks n SET updated_at = c.updated_at FROM chunks c "
        "WHERE c.chunk_id = n.chunk_id AND c.content_hash = n.content_hash"
    )
    con.execute(
        "INSERT OR REPLACE INTO chunk_tombstones "
        "SELECT chunk_id, doc_id, now() FROM chunks "
        "WHERE doc_id IN (SELECT doc_id FROM new_documents) "
        "AND chunk_id NOT IN (SELECT chunk_id FROM new_chunks)"
    )
    con.execute("DELETE FROM chunk_tombstones WHERE chunk_id IN (SELECT chunk_id FROM new_chunks)")
    for table in reversed(SHARD_TABLES):
        con.execute(f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM new_documents)")
    for table in SHARD_TABLES:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_{table}")
        con.execute(f"DROP TABLE new_{table}")
    return counts


def _record_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    con.execute(
        "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?)",
        [run.run_id, run.started_at, run.finished_at, run.n_documents, run.n_pages, json.dumps(run.metrics)],
    )


def forget_documents(layout: KbLayout, doc_ids: Iterable[str]) -> dict[str, int]:
    """Remove documents from the knowledge base (rows, shards, exports); returns rows deleted per table.

    In one transaction, every chunk of the documents gets a tombstone (so the vector feed's
    next export deletes their vectors) and their rows leave every shard table. Then their
    Parquet shards and Markdown/JSON exports are deleted. Unknown ids are ignored. A document
    whose PDF is still in the source folder is ingested again by the next run.
    """
    doc_ids = sorted(set(doc_ids))
    con = connect(layout)
    try:
        apply_schema(con)
        with transaction(con):
            con.execute(
                "CREATE OR REPLACE TEMP TABLE forget_ids AS SELECT unnest(?::VARCHAR[]) AS doc_id", [doc_ids]
            )
            con.execute(
                "INSERT OR REPLACE INTO chunk_tombstones "
                "SELECT chunk_id, doc_id, now() FROM chunks WHERE doc_id IN (SELECT doc_id FROM forget_ids)"
            )
            counts = {}
            for table in reversed(SHARD_TABLES):  # fixed identifiers
                where = "WHERE doc_id IN (SELECT doc_id FROM forget_ids)"
                counts[table] = con.execute(f"SELECT count(*) FROM {table} {where}").fetchall()[0][0]
                con.execute(f"DELETE FROM {table} {where}")
    finally:
        con.close()
    for doc_id in doc_ids:
        for path in [layout.shard(t, doc_id) for t in SHARD_TABLES] + [
            layout.export(doc_id, s) for s in (".md", ".json")
        ]:
            path.unlink(missing_ok=True)
    log.info("forgot %d document(s): %s", len(doc_ids), counts)
    return counts
