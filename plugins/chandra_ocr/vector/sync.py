"""Sync the vector feed's outbox into any LangChain ``VectorStore``, keyed by ``chunk_id``.

LangChain's indexing convention (``index()`` with a record manager), keyed by the knowledge
base's stable ``chunk_id`` instead of a content hash: a record file remembers, per target, the
fingerprint (text + metadata) of every chunk the store holds and which outbox files were
applied. Each outbox file, in export order: its deletes are removed from the store, its upserts
whose fingerprint the record already has are skipped, the rest are written in batches (an id the
store may already hold is deleted first, so no store ever keeps two copies), and only then is the
file recorded as applied: the watermark advances when a whole file is in the store.

Crash-safe: before a batch is written its ids are recorded as *in flight* (no fingerprint), so a
rerun after a kill at any point deletes whatever part of the batch reached the store and writes it
again; deletes are repeated until their file is recorded. The record lives at
``<kb>/vector/sync-<target>.duckdb``; deleting it (and the store's collection) resyncs from the
first outbox file. A progress line (chunks done, chunks/s, ETA) is logged every 10 s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from chandra_ocr.document import indexed_text
from chandra_ocr.errors import ConfigError, StoreError
from chandra_ocr.progress import Progress
from chandra_ocr.store.duckdb_store import transaction
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.chunk_records import chunk_metadata
from chandra_ocr.vector.consumer import default_index_dir
from chandra_ocr.vector.outbox import count_upserts, pending_files

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncCounts:
    """What one ``sync_outbox`` call did to one target store."""

    target: str
    files: int  # outbox files applied now
    written: int  # chunks written (new or changed)
    skipped: int  # upserts whose text and metadata the store already had
    deleted: int  # chunk ids removed
    chunks: int  # chunks the store holds afterwards (by the record)

    def summary(self) -> str:
        """One line for a person: what changed in the store."""
        if not self.files:
            return f"vector store {self.target}: up to date, {self.chunks} chunks"
        return (
            f"vector store {self.target}: {self.files} outbox file(s) applied: "
            f"{self.written} chunks written, {self.skipped} unchanged skipped, {self.deleted} deleted; "
            f"{self.chunks} chunks in all"
        )


def record_path(layout: KbLayout, target: str) -> Path:
    """The sync record of ``target``: ``<kb>/vector/sync-<target>.duckdb``."""
    if not target.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"target name must be alphanumeric (with - or _), got {target!r}")
    return default_index_dir(layout) / f"sync-{target}.duckdb"


def sync_outbox(
    layout: KbLayout, store: VectorStore, *, target: str, feed: str = "vector", batch_size: int = 64
) -> SyncCounts:
    """Bring ``store`` up to the newest outbox file of ``feed`` (see the module doc); one sync per target."""
    if batch_size < 1:
        raise ConfigError("batch_size must be ≥ 1")
    path = record_path(layout, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as e:
        raise StoreError(
            f"cannot open sync record {path} (is another sync of {target!r} running?): {e}"
        ) from e
    totals = [0, 0, 0, 0]
    try:
        _create(con)
        pending = pending_files(layout, feed, _last_applied(con, feed))
        progress = Progress(f"vector store {target}", count_upserts(pending), log, unit="chunks")
        for export_no, file in pending:
            counts = _apply_file(con, store, feed, export_no, file, batch_size, progress)
            totals = [a + b for a, b in zip(totals, (1, *counts), strict=True)]
        held = int(con.execute("SELECT count(*) FROM records").fetchall()[0][0])
    finally:
        con.close()
    if progress.total:
        progress.done()
    files, written, skipped, deleted = totals
    result = SyncCounts(target, files, written, skipped, deleted, held)
    log.info("%s", result.summary())
    return result


def _create(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS records (chunk_id VARCHAR PRIMARY KEY, fingerprint VARCHAR)")
    con.execute(
        "CREATE TABLE IF NOT EXISTS applied (feed VARCHAR, export_no INTEGER, written BIGINT, "
        "skipped BIGINT, deleted BIGINT, applied_at TIMESTAMPTZ, PRIMARY KEY (feed, export_no))"
    )


def _last_applied(con: duckdb.DuckDBPyConnection, feed: str) -> int:
    sql = "SELECT coalesce(max(export_no), 0) FROM applied WHERE feed = ?"
    return int(con.execute(sql, [feed]).fetchall()[0][0])


def _apply_file(
    con: duckdb.DuckDBPyConnection,
    store: VectorStore,
    feed: str,
    export_no: int,
    file: Path,
    batch_size: int,
    progress: Progress,
) -> tuple[int, int, int]:
    """Deletes, changed upserts in batches, then the file's record; returns (written, skipped, deleted).

    The file is read a slice at a time (a backfill's export can hold millions of rows); its rows
    come deletes first, so applying the slices in order keeps deletes before upserts.
    """
    written = skipped = deleted = 0
    try:
        slices = pq.ParquetFile(file).iter_batches(batch_size=max(1024, 16 * batch_size))
        for part in slices:
            rows = part.to_pylist()
            deletes = [r["chunk_id"] for r in rows if r["op"] == "delete"]
            for ids in _batches(deletes, batch_size):
                store.delete(ids=ids)
                _forget(con, ids)
            upserts = [_record(r) for r in rows if r["op"] == "upsert"]
            known = _fingerprints(con, [u[0] for u in upserts])
            todo = [u for u in upserts if known.get(u[0], "") != u[3]]
            progress.add(len(upserts) - len(todo))
            for batch in _batches(todo, batch_size):
                _write(con, store, batch, known)
                progress.add(len(batch))
            written, skipped, deleted = (
                written + len(todo),
                skipped + len(upserts) - len(todo),
                deleted + len(deletes),
            )
    except (OSError, pa.ArrowException) as e:
        raise StoreError(f"cannot read outbox file {file}: {e}") from e
    with transaction(con):
        con.execute(
            "INSERT OR REPLACE INTO applied VALUES (?, ?, ?, ?, ?, now())",
            [feed, export_no, written, skipped, deleted],
        )
    log.info("synced %s: %d written, %d skipped, %d deleted", file.name, written, skipped, deleted)
    return written, skipped, deleted


def _write(
    con: duckdb.DuckDBPyConnection, store: VectorStore, batch: list[tuple], known: dict[str, str | None]
) -> None:
    """One batch: mark its ids in flight, drop any copy the store may hold, add, record fingerprints."""
    from langchain_core.documents import Document

    ids = [cid for cid, *_ in batch]
    with transaction(con):
        con.executemany("INSERT OR REPLACE INTO records VALUES (?, NULL)", [[cid] for cid in ids])
    held = [cid for cid in ids if cid in known]
    if held:
        store.delete(ids=held)
    docs = [Document(page_content=text, metadata=meta, id=cid) for cid, text, meta, _ in batch]
    store.add_documents(docs, ids=ids)
    with transaction(con):
        con.executemany(
            "UPDATE records SET fingerprint = ? WHERE chunk_id = ?", [[fp, cid] for cid, *_, fp in batch]
        )
    for cid in ids:
        known[cid] = None  # in the store now: a later file's upsert of it deletes first


def _forget(con: duckdb.DuckDBPyConnection, ids: list[str]) -> None:
    with transaction(con):
        con.executemany("DELETE FROM records WHERE chunk_id = ?", [[cid] for cid in ids])


def _fingerprints(con: duckdb.DuckDBPyConnection, ids: list[str]) -> dict[str, str | None]:
    """chunk_id → recorded fingerprint (None: in flight) of those of ``ids`` the record has."""
    con.register("wanted", pa.table({"chunk_id": pa.array(ids, pa.string())}))
    try:
        sql = "SELECT r.chunk_id, r.fingerprint FROM records r JOIN wanted USING (chunk_id)"
        return dict(con.execute(sql).fetchall())
    finally:
        con.unregister("wanted")


def _record(row: dict[str, Any]) -> tuple[str, str, dict[str, Any], str]:
    """(chunk_id, text, flat metadata, fingerprint) of one upsert row."""
    text = indexed_text(row.get("context"), row["text"] or "")
    meta = chunk_metadata(row, flat=True)
    payload = json.dumps([text, meta], sort_keys=True, ensure_ascii=False)
    return row["chunk_id"], text, meta, hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _batches(items: Sequence, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
