"""The vector feed: chunks added, changed or deleted since a feed's last export, as one outbox Parquet file.

Each export writes ``<kb>/outbox/<feed>-<export_no:06d>.parquet`` and then advances the feed's
watermark (table ``feed_watermarks``, sql/003_feed.sql) in the same write session, so a
crash between the two rewrites the same file on the next try instead of losing or skipping rows.

Outbox columns, one row per chunk, deletes first, then upserts by ``doc_id, chunk_no``:

- ``op``: ``upsert`` (insert or replace the vector of ``chunk_id``) or ``delete`` (remove it);
- ``chunk_id``, ``doc_id``, ``changed_at`` (when the change reached the knowledge base);
- for upserts only (NULL for deletes): ``chunk_no``, ``kind``, ``text``, ``n_tokens``,
  ``header_path``, ``page_start``, ``page_end``, ``bboxes``, ``content_hash``, ``source_uri``,
  ``file_name``, ``context`` (what the chunk belongs to; a store indexes ``context`` + newline +
  ``text``, ``document.indexed_text``).

The file's key-value metadata holds ``feed``, ``export_no``, ``since`` and ``until`` (ISO times).
Applying the files in ``export_no`` order, each row idempotently (upsert by ``chunk_id``, delete
by ``chunk_id``), reproduces the knowledge base's chunks in a vector index.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from chandra_ocr.errors import StoreError
from chandra_ocr.store.atomic import write_atomic
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.session import write_session

log = logging.getLogger(__name__)

_CHANGES = """
CREATE OR REPLACE TEMP TABLE feed_changes AS
SELECT 'delete' AS op, t.chunk_id, t.doc_id, t.deleted_at AS changed_at,
       NULL::INTEGER AS chunk_no, NULL::VARCHAR AS kind, NULL::VARCHAR AS text, NULL::INTEGER AS n_tokens,
       NULL::VARCHAR[] AS header_path, NULL::INTEGER AS page_start, NULL::INTEGER AS page_end,
       NULL AS bboxes, NULL::VARCHAR AS content_hash, NULL::VARCHAR AS source_uri, NULL::VARCHAR AS file_name,
       NULL::VARCHAR AS context
FROM chunk_tombstones t WHERE t.deleted_at > coalesce($since::TIMESTAMPTZ, '-infinity')
UNION ALL BY NAME
SELECT 'upsert' AS op, c.chunk_id, c.doc_id, c.updated_at AS changed_at, c.chunk_no, c.kind,
       c.text, c.n_tokens, c.header_path, c.page_start, c.page_end, c.bboxes, c.content_hash,
       d.source_uri, d.file_name, coalesce(c.context, '') AS context
FROM chunks c JOIN documents d USING (doc_id) WHERE c.updated_at > coalesce($since::TIMESTAMPTZ, '-infinity')
"""

_ORDERED = "SELECT * FROM feed_changes ORDER BY op, doc_id, chunk_no NULLS FIRST, chunk_id"


@dataclass(frozen=True)
class FeedExport:
    """What one export wrote; ``path`` is None (and the watermark unchanged) when nothing had changed."""

    feed: str
    export_no: int
    path: Path | None
    upserts: int
    deletes: int
    since: datetime | None
    until: datetime | None

    def summary(self) -> str:
        """One line for a person: what the export wrote."""
        if self.path is None:
            return "outbox: nothing changed since the last export"
        counts = f"{self.upserts} upserts, {self.deletes} deletes"
        return f"outbox: export {self.export_no} → {self.path} ({counts})"


def pending_files(layout: KbLayout, feed: str, after: int) -> list[tuple[int, Path]]:
    """(export_no, path) of the outbox files of ``feed`` numbered above ``after``, in order."""
    pattern = re.compile(rf"{re.escape(feed)}-(\d{{6,}})\.parquet")
    found = []
    for path in layout.outbox().glob(f"{feed}-*.parquet"):
        m = pattern.fullmatch(path.name)
        if m and int(m.group(1)) > after:
            found.append((int(m.group(1)), path))
    return sorted(found)


def count_upserts(files: list[tuple[int, Path]]) -> int:
    """How many upsert rows the outbox ``files`` hold (a feed's progress total)."""
    total = 0
    for _, path in files:
        try:
            ops = pq.read_table(path, columns=["op"]).column("op")
        except (OSError, pa.ArrowException) as e:
            raise StoreError(f"cannot read outbox file {path}: {e}") from e
        total += ops.to_pylist().count("upsert")
    return total


def read_export(path: Path) -> pa.Table:
    """One outbox file's rows; a file written before the ``context`` column has it as NULL.
    Raises StoreError when the file cannot be read."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise StoreError(f"cannot read outbox file {path}: {e}") from e
    if "context" not in table.column_names:
        table = table.append_column("context", pa.nulls(table.num_rows, pa.string()))
    return table


def outbox_file(layout: KbLayout, feed: str, export_no: int) -> Path:
    """The deterministic outbox path of export ``export_no`` of ``feed``."""
    return layout.outbox() / f"{feed}-{export_no:06d}.parquet"


def export_changes(layout: KbLayout, feed: str = "vector", wait_s: float = 120.0) -> FeedExport:
    """Write the changes since ``feed``'s watermark to a new outbox file, then advance the watermark.

    Holds the knowledge base's write lock throughout (waiting up to ``wait_s`` for it), so no load
    can commit between reading the changes and moving the watermark. Raises StoreError when the
    file cannot be written (the watermark then stays where it was).
    """
    if not feed.replace("_", "").replace("-", "").isalnum():
        raise StoreError(f"feed name must be alphanumeric (with - or _), got {feed!r}")
    with write_session(layout, wait_s=wait_s) as session:
        result = _export(session.con, layout, feed)
    log.info(
        "feed %s: export %d → %s (%d upserts, %d deletes)",
        feed,
        result.export_no,
        result.path,
        result.upserts,
        result.deletes,
    )
    return result


def _export(con: duckdb.DuckDBPyConnection, layout: KbLayout, feed: str) -> FeedExport:
    row = con.execute("SELECT watermark, export_no FROM feed_watermarks WHERE feed = ?", [feed]).fetchone()
    since, last_no = (row[0], row[1]) if row else (None, 0)
    con.execute(_CHANGES, {"since": since})
    upserts, deletes, until = con.execute(
        "SELECT count(*) FILTER (op = 'upsert'), count(*) FILTER (op = 'delete'), max(changed_at) "
        "FROM feed_changes"
    ).fetchall()[0]  # fetched to the end: the connection has no unfinished result for the export
    if until is None:
        return FeedExport(feed, last_no, None, 0, 0, since, since)
    export_no = last_no + 1
    path = outbox_file(layout, feed, export_no)
    meta = {
        "feed": feed,
        "export_no": str(export_no),
        "since": since.isoformat() if since else "",
        "until": until.isoformat(),
    }
    try:
        write_atomic(path, lambda tmp: _copy(con, tmp, meta))
    except (OSError, duckdb.Error) as e:
        raise StoreError(f"cannot write outbox file {path}: {e}") from e
    con.execute(
        "INSERT OR REPLACE INTO feed_watermarks VALUES (?, ?, ?, ?, now(), ?, ?)",
        [feed, until, export_no, str(path), upserts, deletes],
    )
    return FeedExport(feed, export_no, path, upserts, deletes, since, until)


def _copy(con: duckdb.DuckDBPyConnection, tmp: Path, meta: dict[str, str]) -> None:
    """Stream the ordered changes into the Parquet file ``tmp``, ``meta`` in its key-value metadata.

    Written with pyarrow rather than ``COPY ... TO 'path'``: COPY takes no parameters, and a path
    (from the user's KB folder) is never spliced into SQL text.
    """
    reader = con.sql(_ORDERED).to_arrow_reader()
    schema = reader.schema.with_metadata({**(reader.schema.metadata or {}), **meta})
    with pq.ParquetWriter(tmp, schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
