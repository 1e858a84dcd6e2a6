"""The Parquet dataset under ``kb/parquet/<table>/``: its files, their live rows, the views over them.

Loaded rows live in a few immutable Parquet files per table, listed in kb.duckdb's ``kb_files``
with the write generation that made them. A document loaded again (or forgotten) at generation
``g`` is recorded in ``kb_superseded``; its rows in files older than ``g`` no longer count. The
views ``documents``, ``pages``, ... in kb.duckdb read each file and leave those rows out;
compaction (store/compact.py) rewrites files without them.

Each file has a second name, a hard link under ``kb/snapshots/<table>/``, and the views read
that one: compaction removes a replaced file from ``kb/parquet/`` at once (a reader of that
folder sees live files only) but keeps its snapshot name for ``RETAIN_S``, so a connection to
an older kb.duckdb can still query it. Views name files by absolute path (DuckDB resolves
relative paths against the reader's working directory, not the database file's), and kb.duckdb
records the folder they were made for (``kb_location``): a write session in another folder (the KB
was moved or copied) makes them again for that folder before anything else, and a reader there
shadows them with temporary views of its own (store/duckdb_store.py). Paths are quoted into the
SQL text (a view takes no parameters).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.schema import dataset_ddl

FILE_PREFIX = "part-"
RETAIN_S = 24 * 3600
ROW_GROUP_ROWS = 100_000


@dataclass(frozen=True)
class DataFile:
    """One Parquet file of the dataset, as ``kb_files`` lists it."""

    table: str
    file: str
    gen: int
    n_rows: int
    bytes: int

    def path(self, layout: KbLayout) -> Path:
        return layout.dataset_dir(self.table) / self.file

    def snapshot(self, layout: KbLayout) -> Path:
        return layout.snapshot_dir(self.table) / self.file


def quote(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def data_files(con: duckdb.DuckDBPyConnection, table: str | None = None) -> list[DataFile]:
    """The files of ``table`` (of every table when None), oldest generation first."""
    rows = con.execute(
        "SELECT table_name, file, gen, n_rows, bytes FROM kb_files "
        "WHERE $t IS NULL OR table_name = $t ORDER BY gen, file",
        {"t": table},
    ).fetchall()
    return [DataFile(*r) for r in rows]


def next_gen(con: duckdb.DuckDBPyConnection) -> int:
    """A generation newer than every file and every superseded mark."""
    return con.execute(
        "SELECT coalesce(max(gen), 0) + 1 "
        "FROM (SELECT gen FROM kb_files UNION ALL SELECT gen FROM kb_superseded)"
    ).fetchall()[0][0]


def newest_mark(con: duckdb.DuckDBPyConnection) -> int:
    """The generation of the newest superseded mark (0 when none): files at least as new are clean."""
    return con.execute("SELECT coalesce(max(gen), 0) FROM kb_superseded").fetchall()[0][0]


def live_rows_sql(layout: KbLayout, files: list[DataFile], newest: int) -> str:
    """A SELECT of the rows of ``files`` (of one table) that still count (``newest``: ``newest_mark``):
    files without superseded documents are read together, every other one alone, less the documents
    superseded after it was written. Columns are the table's shape (``kb_shape``), by name: a file
    written before a column was added reads NULL there."""
    clean = [f for f in files if f.gen >= newest]
    parts = [f"SELECT * FROM kb_shape.{files[0].table}"]  # a fixed identifier
    if clean:
        paths = ", ".join(quote(str(f.snapshot(layout))) for f in clean)
        parts.append(f"SELECT * FROM read_parquet([{paths}], union_by_name = true)")
    for f in files:
        if f.gen < newest:
            parts.append(
                f"SELECT * FROM read_parquet({quote(str(f.snapshot(layout)))}) "
                f"WHERE doc_id NOT IN (SELECT doc_id FROM kb_superseded WHERE gen > {int(f.gen)})"
            )
    return "\nUNION ALL BY NAME\n".join(parts)


def create_shapes(con: duckdb.DuckDBPyConnection) -> None:
    """Schema ``kb_shape``: each dataset table empty, with its column types (a view without files);
    replaced, so a kb.duckdb made before a column was added gets it."""
    con.execute("CREATE SCHEMA IF NOT EXISTS kb_shape")
    con.execute(dataset_ddl("kb_shape").replace("CREATE TABLE IF NOT EXISTS", "CREATE OR REPLACE TABLE"))


def create_views(con: duckdb.DuckDBPyConnection, layout: KbLayout, *, temporary: bool = False) -> None:
    """(Re)define the view of every dataset table over its current files (the empty shape when none),
    naming them by absolute path, and record the folder in ``kb_location``; ``temporary``: views of
    this connection only, which shadow kb.duckdb's (a reader's, where the KB is not where it was made).

    The one place where values reach SQL text: a view takes no parameters, so its files' paths
    (from ``kb_files`` and the KB folder) are escaped string literals.
    """
    here = KbLayout(layout.root.resolve())
    files, newest = data_files(con), newest_mark(con)
    kind = "TEMPORARY VIEW " if temporary else "VIEW main."
    views = []
    for table in DOCUMENT_TABLES:  # fixed identifiers
        mine = [f for f in files if f.table == table]
        view_sql = live_rows_sql(here, mine, newest) if mine else f"SELECT * FROM kb_shape.{table}"
        views.append(f"CREATE OR REPLACE {kind}{table} AS {view_sql};")
    if not temporary:
        views.append(f"DELETE FROM kb_location; INSERT INTO kb_location VALUES ({quote(str(here.root))});")
    con.execute("\n".join(views))  # one call: DuckDB's per-call cost is a millisecond here


def views_root(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The folder whose files kb.duckdb's views name (None: not recorded, a kb.duckdb from before)."""
    try:
        rows = con.execute("SELECT root FROM kb_location").fetchall()
    except duckdb.CatalogException:
        return None
    return Path(rows[0][0]) if rows else None


def write_file(
    con: duckdb.DuckDBPyConnection, layout: KbLayout, table: str, query: str, gen: int, part: int = 0
) -> DataFile | None:
    """Write the rows of ``query`` as a new file of ``table``, for ``add_files`` to list; None when no rows.

    Written beside its final name and renamed onto it, so a reader of ``kb/parquet/`` never sees
    half a file; a file that a failed session leaves behind is unlisted and removed by the next one.
    """
    name = f"{FILE_PREFIX}{gen:08d}-{part:03d}.parquet"
    path = layout.dataset_dir(table) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{name}.tmp")
    reader = con.sql(query).to_arrow_reader(ROW_GROUP_ROWS)
    n_rows = 0
    with pq.ParquetWriter(tmp, reader.schema) as writer:  # pyarrow: no path in SQL text (COPY takes none)
        for batch in reader:
            writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
            n_rows += batch.num_rows
    if not n_rows:
        tmp.unlink(missing_ok=True)
        return None
    with open(tmp, "rb") as f:  # on disk before a kb.duckdb that lists it can be
        os.fsync(f.fileno())
        size = os.fstat(f.fileno()).st_size
    os.replace(tmp, path)
    snapshot = layout.snapshot_dir(table) / name
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.unlink(missing_ok=True)  # left by a session that failed
    os.link(path, snapshot)
    return DataFile(table, name, gen, n_rows, size)


def add_files(con: duckdb.DuckDBPyConnection, files: list[DataFile | None]) -> None:
    """List the written ``files`` (None: nothing written) in ``kb_files``, in one statement."""
    listed = [f for f in files if f is not None]
    if listed:
        con.execute(
            "INSERT INTO kb_files SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), "
            "unnest(?::BIGINT[]), unnest(?::BIGINT[]), now()",
            [[getattr(f, k) for f in listed] for k in ("table", "file", "gen", "n_rows", "bytes")],
        )


def retire(con: duckdb.DuckDBPyConnection, files: list[DataFile]) -> None:
    """Take ``files`` out of the dataset (and, when the session is published, out of kb/parquet/)."""
    if not files:
        return
    con.execute(
        "CREATE OR REPLACE TEMP TABLE retiring AS "
        "SELECT unnest(?::VARCHAR[]) AS table_name, unnest(?::VARCHAR[]) AS file",
        [[f.table for f in files], [f.file for f in files]],
    )  # two statements for the lot: DuckDB pays milliseconds per statement on a keyed table
    con.execute("DELETE FROM kb_files WHERE (table_name, file) IN (SELECT (table_name, file) FROM retiring)")
    con.execute("INSERT OR REPLACE INTO kb_retired SELECT table_name, file, now() FROM retiring")


def stale_files(con: duckdb.DuckDBPyConnection, layout: KbLayout) -> list[Path]:
    """Files to delete once the session is published: under kb/parquet/ every file ``kb_files`` does
    not list (replaced, left by a failed writer, or per-document shards of the layout before this
    one); under kb/snapshots/ those neither listed nor retired less than ``RETAIN_S`` ago."""
    con.execute("DELETE FROM kb_retired WHERE retired_at < now() - to_seconds(?)", [RETAIN_S])
    listed = set(con.execute("SELECT table_name, file FROM kb_files").fetchall())
    kept = listed | set(con.execute("SELECT table_name, file FROM kb_retired").fetchall())
    found = []
    for table in DOCUMENT_TABLES:
        for folder, keep in ((layout.dataset_dir(table), listed), (layout.snapshot_dir(table), kept)):
            if folder.is_dir():
                found += [p for p in folder.iterdir() if p.is_file() and (table, p.name) not in keep]
    return found
