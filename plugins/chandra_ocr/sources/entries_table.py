"""The source entries table: what discovery last saw at each source location, and the bytes' doc_id.

One Parquet file, ``kb/sources/entries.parquet`` (columns ``location``, ``size``, ``mtime``, ``etag``,
``doc_id``, ``hashed_at``), beside kb.duckdb so that every worker and every new machine shares it;
query it with ``read_parquet('kb/sources/entries.parquet')``. It is a cache of hashes: an entry
whose (location, size, mtime, ETag) is unchanged keeps its doc_id without being read again
(rsync's and git's quick check). A write replaces the file atomically (written beside it, fsynced,
renamed), and only when something changed; two discoveries writing at once lose at most one's
updates, which costs a re-hash, never a wrong answer.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from chandra_ocr.store.layout import KbLayout

SCHEMA = pa.schema(
    [
        ("location", pa.string()),
        ("size", pa.int64()),
        ("mtime", pa.float64()),
        ("etag", pa.string()),
        ("doc_id", pa.string()),
        ("hashed_at", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass(frozen=True)
class SourceEntry:
    """One row: a location as discovery last saw it, and the sha256 of its bytes then."""

    location: str
    size: int
    mtime: float
    etag: str | None
    doc_id: str
    hashed_at: datetime

    def same(self, size: int, mtime: float, etag: str | None) -> bool:
        """The quick check: same size and modification time, and the same ETag where the store has one."""
        return self.size == size and self.mtime == mtime and self.etag == etag


def read_entries(layout: KbLayout) -> dict[str, SourceEntry]:
    """location → entry; empty when the KB has none yet."""
    if not layout.source_entries.exists():
        return {}
    table = pq.read_table(layout.source_entries, schema=SCHEMA)
    cols = [table.column(name).to_pylist() for name in SCHEMA.names]
    return {row[0]: SourceEntry(*row) for row in zip(*cols, strict=True)}


def write_entries(layout: KbLayout, entries: dict[str, SourceEntry]) -> None:
    """Replace the table with ``entries`` (sorted by location), atomically."""
    rows = [entries[k] for k in sorted(entries)]
    table = pa.table({name: [getattr(e, name) for e in rows] for name in SCHEMA.names}, schema=SCHEMA)
    path = layout.source_entries
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def new_entry(location: str, size: int, mtime: float, etag: str | None, doc_id: str) -> SourceEntry:
    return SourceEntry(location, size, mtime, etag, doc_id, datetime.now(UTC))
