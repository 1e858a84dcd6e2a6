"""The knowledge base's loader, forget, and read helpers over kb.duckdb.

Rows live in Parquet files under ``kb/parquet/`` (store/dataset.py); kb.duckdb holds the views
over them and the catalog, and every change is published as a new kb.duckdb (store/session.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.errors import StoreError
from chandra_ocr.store.dataset import add_files, create_views, next_gen, views_root, write_file
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.schema import dataset_ddl
from chandra_ocr.store.session import WriteSession, write_session
from chandra_ocr.store.staging import read_staged

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


def connect(layout: KbLayout, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open kb.duckdb for reading. Writers never open it (they publish a new file, store/session.py),
    so this neither waits for a load nor makes one wait. Where kb.duckdb's views name the files of
    another folder (the KB was moved or copied), the connection reads those of this one."""
    try:
        con = duckdb.connect(str(layout.duckdb_path), read_only=read_only)
    except duckdb.Error as e:
        raise StoreError(f"cannot open {layout.duckdb_path}: {e}") from e
    try:
        _read_here(con, layout)
    except BaseException:
        con.close()
        raise
    return con


_told: set[Path] = set()  # moved knowledge bases this process has warned about


def _read_here(con: duckdb.DuckDBPyConnection, layout: KbLayout) -> None:
    """Temporary views over this folder's files where kb.duckdb's name another folder's (or none
    recorded: a kb.duckdb from before ``kb_location``); a moved KB is named once per process."""
    here, made = layout.root.resolve(), views_root(con)
    if made == here:
        return
    try:
        create_views(con, layout, temporary=True)
    except duckdb.CatalogException:  # no dataset catalog: not a knowledge base's kb.duckdb yet
        return
    except duckdb.Error as e:
        raise StoreError(f"cannot read the knowledge base at {here}: {e}") from e
    if made is not None and here not in _told:
        _told.add(here)
        log.warning(
            "%s was written at %s (the folder was moved or copied): reading the files here; other DuckDB "
            "clients read those at %s until the next write here, e.g. `chandra-ingest compact --kb %s`",
            here, made, made, here,
        )  # fmt: skip


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
        ).fetchall()[0][0]
        if not has:
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


@dataclass(frozen=True)
class Loaded:
    """What one load did: rows loaded per table, and the documents another run had loaded first."""

    counts: dict[str, int]
    elsewhere: dict[str, str]  # doc_id → the run whose rows of it are in the KB (not loaded again)


def incomplete_documents(
    con: duckdb.DuckDBPyConnection, run_id: str | None = None, limit: int | None = None
) -> list[tuple[str, str, str, str]]:
    """(file name, status, reason, run id) of the quarantined or partial documents of the run ``run_id``
    (by file name), else of every run (latest first); at most ``limit``."""
    return con.execute(
        "SELECT file_name, status, coalesce(error, ''), run_id FROM documents "
        "WHERE status <> 'ingested' AND (?::VARCHAR IS NULL OR run_id = ?) "
        "ORDER BY CASE WHEN ?::VARCHAR IS NULL THEN ingested_at END DESC NULLS LAST, file_name LIMIT ?",
        [run_id, run_id, run_id, limit],
    ).fetchall()


def load_documents(
    layout: KbLayout,
    run_id: str,
    doc_ids: Iterable[str],
    run: Callable[[Mapping[str, str]], RunRecord] | None = None,
) -> Loaded:
    """Load the rows of ``doc_ids`` staged by ``run_id`` in one write session.

    The rows become one new Parquet file per table (``kb/parquet/<table>/``), published with the
    run's record at once; then the run's staged files are deleted. A document's rows are replaced as
    a whole (no orphans); ``first_seen`` and, for unchanged chunks, ``updated_at`` survive
    re-ingestion, new or changed chunks get the load's time as ``updated_at``; chunks that disappear
    get tombstones. Keys are checked among the loaded rows. A document that another run loaded under
    this pipeline version while this one worked on it is not loaded again (``Loaded.elsewhere``: runs
    overlapping on one KB load each document once); one without staged rows that is already in the
    knowledge base was loaded by an earlier try of the same load and is passed by. ``run`` makes the
    run's record, given the documents loaded elsewhere, once the rows are in (so that it can time the
    load). The work is that of the new rows (and a look-up of their doc_ids among the loaded ones),
    whatever the KB's size; merging files is for ``compact_if_due`` afterwards (store/compact.py).
    """
    doc_ids = sorted(set(doc_ids))
    with write_session(layout) as session:
        loaded = _document_runs(session.con, doc_ids)
        elsewhere = {d: r or "?" for d, (r, v) in loaded.items() if r != run_id and v == PIPELINE_VERSION}
        todo = [d for d in doc_ids if d not in elsewhere]
        staged = [d for d in todo if layout.staged(run_id, d).exists()]
        missing = [d for d in todo if d not in loaded and d not in staged]
        if missing:
            raise StoreError(f"no staged rows for {len(missing)} document(s), e.g. {missing[0]}")
        counts = _load(session, run_id, staged) if staged else dict.fromkeys(DOCUMENT_TABLES, 0)
        if run is not None:
            _record_run(session.con, run(elsewhere))
    for doc_id in doc_ids:
        layout.staged(run_id, doc_id).unlink(missing_ok=True)
    if elsewhere:
        log.info("%d document(s) already loaded by other runs, not loaded again: %s", len(elsewhere),
                 ", ".join(f"{d[:12]}… by {r}" for d, r in sorted(elsewhere.items())[:5]))  # fmt: skip
    log.info("rows of %d staged document(s) stored in %s: %s", len(staged), layout.duckdb_path, counts)
    return Loaded(counts, elsewhere)


def document_runs(layout: KbLayout, doc_ids: list[str]) -> dict[str, tuple[str | None, str]]:
    """doc_id → (run_id, pipeline_version) of those of ``doc_ids`` in the knowledge base."""
    if not layout.duckdb_path.exists():
        return {}
    con = connect(layout, read_only=True)
    try:
        return _document_runs(con, doc_ids)
    except duckdb.CatalogException:  # a KB without documents yet
        return {}
    finally:
        con.close()


def _document_runs(con: duckdb.DuckDBPyConnection, doc_ids: list[str]) -> dict[str, tuple[str | None, str]]:
    rows = con.execute(
        "SELECT doc_id, run_id, pipeline_version FROM documents WHERE list_contains(?::VARCHAR[], doc_id)",
        [doc_ids],
    ).fetchall()
    return {d: (r, v) for d, r, v in rows}


def _load(session: WriteSession, run_id: str, doc_ids: list[str]) -> dict[str, int]:
    con, layout = session.con, session.layout
    counts = _stage(con, layout, run_id, doc_ids)
    try:
        _merge(con, layout, [t for t in DOCUMENT_TABLES if counts[t]])
    finally:
        con.execute("DETACH staging")
    return counts


def _stage(
    con: duckdb.DuckDBPyConnection, layout: KbLayout, run_id: str, doc_ids: list[str]
) -> dict[str, int]:
    """The rows of ``doc_ids`` staged by ``run_id`` in the keyed tables of ``staging``, an in-memory database
    attached to the session (no second DuckDB instance): a duplicate key, or a NULL where the
    schema forbids one, fails the load here."""
    con.execute("ATTACH ':memory:' AS staging")
    con.execute(dataset_ddl("staging"))
    counts = {}
    for table, rows in read_staged(
        layout, run_id, doc_ids
    ).items():  # fixed identifiers, never document content
        counts[table] = rows.num_rows
        if rows.num_rows:
            con.register("staged_rows", rows)
            try:
                con.execute(f"INSERT INTO staging.{table} BY NAME SELECT * FROM staged_rows")
            finally:
                con.unregister("staged_rows")
    return counts


def _merge(con: duckdb.DuckDBPyConnection, layout: KbLayout, tables: list[str]) -> None:
    """The staged rows of ``tables`` (those with rows) as this generation's files, with what they
    replace marked superseded."""
    now = con.execute("SELECT now()").fetchall()[0][0]
    gen = next_gen(con)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE prior AS SELECT doc_id, first_seen FROM documents "
        "WHERE doc_id IN (SELECT doc_id FROM staging.documents)"
    )
    # A changed chunk's updated_at is this load's time, not its assembly time: a feed export that ran
    # between the two would otherwise have moved its watermark past the chunk before it was visible.
    con.execute("UPDATE staging.chunks SET updated_at = ?", [now])
    if con.execute("SELECT count(*) FROM prior").fetchall()[0][0]:  # re-ingested documents
        con.execute(
            "UPDATE staging.documents n SET first_seen = p.first_seen FROM prior p WHERE p.doc_id = n.doc_id"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE prior_chunks AS "
            "SELECT chunk_id, doc_id, content_hash, updated_at FROM chunks "
            "WHERE doc_id IN (SELECT doc_id FROM prior)"
        )
        con.execute(
            "UPDATE staging.chunks n SET updated_at = c.updated_at FROM prior_chunks c "
            "WHERE c.chunk_id = n.chunk_id AND c.content_hash = n.content_hash"
        )
        con.execute(
            "INSERT OR REPLACE INTO chunk_tombstones SELECT chunk_id, doc_id, ? FROM prior_chunks "
            "WHERE chunk_id NOT IN (SELECT chunk_id FROM staging.chunks)",
            [now],
        )
        con.execute("INSERT OR REPLACE INTO kb_superseded SELECT doc_id, ? FROM prior", [gen])
    con.execute("DELETE FROM chunk_tombstones WHERE chunk_id IN (SELECT chunk_id FROM staging.chunks)")
    written = [write_file(con, layout, t, f"SELECT * FROM staging.{t} ORDER BY doc_id", gen) for t in tables]
    add_files(con, written)


def _record_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    con.execute(
        "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?)",
        [run.run_id, run.started_at, run.finished_at, run.n_documents, run.n_pages, json.dumps(run.metrics)],
    )


def forget_documents(layout: KbLayout, doc_ids: Iterable[str]) -> dict[str, int]:
    """Remove documents from the knowledge base (rows, exports); returns rows deleted per table.

    In one write session, every chunk of the documents gets a tombstone (so the vector feed's
    next export deletes their vectors) and their rows stop counting in every dataset table (until
    compaction rewrites the files without them). Then their Markdown/JSON exports are deleted (a
    run's staged rows are that run's: store/claims.py removes a dead run's). Unknown ids are ignored.
    A document whose PDF is still in the source folder is ingested again by the next run.
    """
    doc_ids = sorted(set(doc_ids))
    with write_session(layout) as session:
        con = session.con
        con.execute("CREATE TEMP TABLE forget_ids AS SELECT unnest(?::VARCHAR[]) AS doc_id", [doc_ids])
        where = "WHERE doc_id IN (SELECT doc_id FROM forget_ids)"
        con.execute(
            f"INSERT OR REPLACE INTO chunk_tombstones SELECT chunk_id, doc_id, now() FROM chunks {where}"
        )
        counts = {}
        for table in reversed(DOCUMENT_TABLES):  # fixed identifiers
            counts[table] = con.execute(f"SELECT count(*) FROM {table} {where}").fetchall()[0][0]
        con.execute(
            f"INSERT OR REPLACE INTO kb_superseded SELECT doc_id, ? FROM documents {where}", [next_gen(con)]
        )
    for doc_id in doc_ids:
        for path in [layout.export(doc_id, ".md"), layout.export(doc_id, ".json")]:
            path.unlink(missing_ok=True)
    log.info("forgot %d document(s): %s", len(doc_ids), counts)
    return counts
