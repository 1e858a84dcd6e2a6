"""Write sessions: every change to the knowledge base is built in a copy of kb.duckdb and renamed onto it.

A read-only DuckDB connection holds a shared lock on its file, and a read-write one needs the
file to itself, so a writer that opened kb.duckdb would wait for every reader and block every
new one. No writer opens it: a session copies it (small: the rows live in Parquet files, see
store/dataset.py) to ``.kb.duckdb.next``, changes the copy and renames it onto ``kb.duckdb``.
A reader that has the old file open keeps reading it (its inode); one that connects later gets
the new one; neither waits. Writers wait for each other on the lock file ``.write.lock``.

A session that fails leaves kb.duckdb as it was; the Parquet files it wrote are not listed there
and are removed by the next session that succeeds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from chandra_ocr.errors import StoreError
from chandra_ocr.store.dataset import (
    add_files,
    create_shapes,
    create_views,
    next_gen,
    stale_files,
    views_root,
    write_file,
)
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.locks import take_lock
from chandra_ocr.store.schema import apply_catalog, apply_helpers, sql_digest


@dataclass(frozen=True)
class WriteSession:
    """An open write session: ``con`` is connected to the next kb.duckdb."""

    con: duckdb.DuckDBPyConnection
    layout: KbLayout


@cache
def _empty_kb() -> bytes:
    """kb.duckdb of a new knowledge base (catalog, empty shapes, views, helpers), built once per process."""
    with tempfile.TemporaryDirectory(prefix="chandra-ocr-kb-") as folder:
        layout = KbLayout(Path(folder))
        con = duckdb.connect(str(layout.duckdb_path))
        try:
            _apply_schema(con, layout)
        finally:
            con.close()
        return layout.duckdb_path.read_bytes()


@contextmanager
def write_session(layout: KbLayout, *, wait_s: float = 120.0) -> Iterator[WriteSession]:
    """Hold the write lock (waiting up to ``wait_s``), yield a session, then publish its kb.duckdb.

    Everything the block did becomes visible at once, when the new file is renamed into place;
    an exception discards it all.
    """
    layout.root.mkdir(parents=True, exist_ok=True)
    with _write_lock(layout, wait_s):
        nxt = layout.next_duckdb_path
        _discard(nxt)
        if layout.duckdb_path.exists():
            shutil.copyfile(layout.duckdb_path, nxt)
        else:  # a new KB: the schema is applied once per process, not once per KB
            nxt.write_bytes(_empty_kb())
        con = duckdb.connect(str(nxt))
        try:
            if _schema_digest(con) != sql_digest():
                _apply_schema(con, layout)
            elif views_root(con) != layout.root.resolve():  # moved or copied: read the files here
                create_views(con, layout)
            yield WriteSession(con, layout)
            create_views(con, layout)
            stale = stale_files(con, layout)
        except BaseException:
            con.close()
            _discard(nxt)
            raise
        con.close()  # checkpoints: the whole database is in the one file, which is renamed next
        if os.path.exists(f"{nxt}.wal"):
            _discard(nxt)
            raise StoreError(f"DuckDB left a write-ahead log beside {nxt}: nothing was published")
        os.replace(nxt, layout.duckdb_path)
        _fsync_dir(layout.root)
        for path in stale:
            path.unlink(missing_ok=True)


def _fsync_dir(folder: os.PathLike) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(db: os.PathLike) -> None:
    for path in (str(db), f"{db}.wal"):
        with suppress(FileNotFoundError):
            os.unlink(path)


@contextmanager
def _write_lock(layout: KbLayout, wait_s: float) -> Iterator[None]:
    with open(layout.write_lock, "a+b") as f:
        take_lock(
            lambda: fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB),
            wait_s,
            f"another writer has held {layout.write_lock} for over {wait_s:.0f} s",
            max_delay_s=1.0,
        )
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _schema_digest(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        rows = con.execute("SELECT digest FROM kb_schema").fetchall()
    except duckdb.CatalogException:  # a new kb.duckdb, or one from before the Parquet dataset
        return None
    return rows[0][0] if rows else None


def _apply_schema(con: duckdb.DuckDBPyConnection, layout: KbLayout) -> None:
    """Catalog, dataset views and the helpers over them, once per kb.duckdb and change of sql/*.sql."""
    apply_catalog(con)
    create_shapes(con)
    _migrate_tables(con, layout)
    create_views(con, layout)
    apply_helpers(con)
    con.execute("DELETE FROM kb_schema")
    con.execute("INSERT INTO kb_schema VALUES (?)", [sql_digest()])


def _migrate_tables(con: duckdb.DuckDBPyConnection, layout: KbLayout) -> None:
    """A kb.duckdb from before the Parquet dataset holds the rows in tables: move them into files."""
    kinds = dict(
        con.execute(
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema = 'main' AND table_catalog = current_database()"
        ).fetchall()
    )
    old = [t for t in DOCUMENT_TABLES if kinds.get(t) == "BASE TABLE"]
    if not old:
        return
    con.execute("DROP VIEW IF EXISTS table_search")
    gen = next_gen(con)
    add_files(con, [write_file(con, layout, t, f"SELECT * FROM main.{t} ORDER BY doc_id", gen) for t in old])
    for table in reversed(old):
        con.execute(f"DROP TABLE main.{table}")
