"""Apply the vector feed's outbox files to the embedded index, and search it with a question.

``apply_outbox`` reads ``<kb>/outbox/<feed>-NNNNNN.parquet`` in export order (the format is
documented in ``chandra_ocr/vector/outbox.py``), skips files already applied, and for each file in one
index transaction: deletes the vectors of ``delete`` rows, then upserts ``upsert`` rows by
``chunk_id`` — embedding only chunks whose ``content_hash`` is new to the index (moved or
renumbered chunks keep their vectors) — and records the file as applied. A crash leaves the
index at the last whole file; the next call resumes there. Chunks are embedded ``EMBED_SLICE`` at a
time, and a progress line (chunks done, chunks/s, ETA) is logged every 10 s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from chandra_ocr.document import indexed_text
from chandra_ocr.progress import Progress
from chandra_ocr.store.duckdb_store import transaction
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.embedder import Embedder
from chandra_ocr.vector.index import COLUMNS, EXACT_SEARCH_LIMIT, Hit, last_applied, open_index, search
from chandra_ocr.vector.outbox import count_upserts, pending_files, read_export

log = logging.getLogger(__name__)

EMBED_SLICE = 256  # chunks per embedding call: the progress counts whole slices


@dataclass(frozen=True)
class ApplyCounts:
    """What one ``apply_outbox`` call did."""

    files: int  # outbox files applied now
    upserts: int  # upsert rows applied
    deletes: int  # delete rows applied
    embedded: int  # chunks that needed a new vector
    vectors: int  # vectors in the index afterwards

    def summary(self) -> str:
        """One line for a person: what changed in the index (and a hint once exact search gets slow)."""
        if not self.files:
            line = f"vector index: up to date, {self.vectors} vectors"
        else:
            line = (
                f"vector index: {self.files} outbox file(s) applied: {self.embedded} chunks embedded "
                f"({self.upserts - self.embedded} reused), {self.deletes} deleted; "
                f"{self.vectors} vectors in all"
            )
        if self.vectors > EXACT_SEARCH_LIMIT:
            line += (
                f"\n  past {EXACT_SEARCH_LIMIT:,} vectors exact search takes over ~100 ms a query: "
                "sync into LanceDB or a vector database (README, 'Where the embedded index stops')"
            )
        return line


def default_index_dir(layout: KbLayout) -> Path:
    """Where the index lives unless told otherwise: ``<kb>/vector``."""
    return layout.root / "vector"


def apply_outbox(
    layout: KbLayout, index_dir: Path | None = None, *, feed: str = "vector", embedder: Embedder | None = None
) -> ApplyCounts:
    """Bring the index at ``index_dir`` (default ``<kb>/vector``) up to the newest outbox file of ``feed``.

    ``embedder`` is started here when given unstarted (or built with default options when None).
    Raises StoreError for an unreadable outbox file, ConfigError when the index holds another
    model's vectors.
    """
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir(layout)
    embedder = (embedder or Embedder()).start()
    con = open_index(index_dir, embedder.name, embedder.dim)
    totals = [0, 0, 0, 0]
    try:
        pending = pending_files(layout, feed, last_applied(con, feed))
        progress = Progress(f"vector feed {index_dir}", count_upserts(pending), log, unit="chunks")
        for export_no, path in pending:
            counts = _apply_file(con, embedder, feed, export_no, path, progress)
            totals = [a + b for a, b in zip(totals, (1, *counts), strict=True)]
        vectors = int(con.execute("SELECT count(*) FROM vectors").fetchall()[0][0])
    finally:
        con.close()
    if progress.total:
        progress.done()
    files, upserts, deletes, embedded = totals
    result = ApplyCounts(files, upserts, deletes, embedded, vectors)
    log.info(
        "vector index %s: %d file(s) applied, %d upserts (%d embedded), %d deletes; %d vectors",
        *(index_dir, result.files, result.upserts, result.embedded, result.deletes, result.vectors),
    )
    return result


def _apply_file(
    con: duckdb.DuckDBPyConnection,
    embedder: Embedder,
    feed: str,
    export_no: int,
    path: Path,
    progress: Progress,
) -> tuple[int, int, int]:
    """Apply one outbox file in one transaction; returns (upserts, deletes, embedded)."""
    table = read_export(path)
    ops = table.column("op").to_pylist()
    deletes = table.filter(pa.array([op == "delete" for op in ops]))
    upserts = table.filter(pa.array([op == "upsert" for op in ops])).select(COLUMNS.split(", "))
    con.register("outbox_deletes", deletes.select(["chunk_id"]))
    con.register("outbox_upserts", upserts)
    try:
        with transaction(con):
            embedded = _stage(con, embedder, progress)  # before the deletes: a moved chunk's vector is reused
            con.execute("DELETE FROM vectors WHERE chunk_id IN (SELECT chunk_id FROM outbox_deletes)")
            dim = embedder.dim
            con.execute(
                f"INSERT OR REPLACE INTO vectors BY NAME SELECT {COLUMNS}, "
                f"embedding::FLOAT[{dim}] AS embedding, now() AS embedded_at FROM staged"
            )
            con.execute("DROP TABLE staged")
            con.execute(
                "INSERT OR REPLACE INTO applied_exports VALUES (?, ?, ?, ?, ?, ?, now())",
                [feed, export_no, str(path), upserts.num_rows, deletes.num_rows, embedded],
            )
    finally:
        con.unregister("outbox_deletes")
        con.unregister("outbox_upserts")
    log.info(
        "applied %s: %d upserts (%d embedded), %d deletes",
        path.name,
        upserts.num_rows,
        embedded,
        deletes.num_rows,
    )
    return upserts.num_rows, deletes.num_rows, embedded


def _stage(con: duckdb.DuckDBPyConnection, embedder: Embedder, progress: Progress) -> int:
    """``outbox_upserts`` with vectors as temp table ``staged``; returns how many had to be embedded.

    A vector is reused when the index already holds a chunk with the same content hash. Each chunk
    counts in ``progress`` once it has its vector.
    """
    dim = embedder.dim
    con.execute(
        """CREATE OR REPLACE TEMP TABLE staged AS
            SELECT u.*, (SELECT any_value(v.embedding) FROM vectors v WHERE v.content_hash = u.content_hash)
                   AS embedding
            FROM outbox_upserts u"""
    )
    missing = con.execute(
        "SELECT chunk_id, context, text FROM staged WHERE embedding IS NULL ORDER BY chunk_id"
    ).fetchall()
    progress.add(int(con.execute("SELECT count(*) FROM staged").fetchall()[0][0]) - len(missing))
    if missing:
        parts = []
        for start in range(0, len(missing), EMBED_SLICE):
            part = missing[start : start + EMBED_SLICE]
            texts = [indexed_text(context, text or "") for _, context, text in part]
            parts.append(pa.array(embedder.embed(texts).ravel(), pa.float32()))
            progress.add(len(part))
        fresh = pa.table(
            {
                "chunk_id": [cid for cid, *_ in missing],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.concat_arrays(parts), dim),
            }
        )
        con.register("fresh_vectors", fresh)
        try:
            con.execute(
                "UPDATE staged s SET embedding = f.embedding "
                "FROM fresh_vectors f WHERE s.chunk_id = f.chunk_id"
            )
        finally:
            con.unregister("fresh_vectors")
    return len(missing)


def search_index(index_dir: Path, question: str, embedder: Embedder, k: int = 5) -> list[Hit]:
    """The ``k`` chunks nearest to ``question`` in the index at ``index_dir``, best first."""
    embedder.start()
    con = open_index(index_dir, embedder.name, embedder.dim, read_only=True)
    try:
        return search(con, embedder.embed([question])[0], k)
    finally:
        con.close()
