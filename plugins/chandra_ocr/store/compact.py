"""Compaction of the Parquet dataset: many small files become a few of about ``TARGET_BYTES``.

Every load adds one file per table. Files are grouped in size tiers (under 1 MiB, 8 MiB, 64 MiB;
larger ones are full); when a tier of a table holds ``FAN_IN`` files, ``compact_if_due`` merges
them into files of the next tier (at most ``TARGET_BYTES`` each), so a table keeps fewer than
``FAN_IN`` files per tier plus its full ones and a byte is rewritten about once per tier. The
load itself never compacts (its cost stays that of its new rows): a run, or Airflow's load
task, calls ``compact_if_due`` after its load is published, in a write session of its own.
``compact(full=True)`` (``chandra-ingest compact``) also rewrites every file that still holds
rows of re-ingested or forgotten documents, after which ``kb/parquet/`` holds live rows only.
Rows are written sorted by ``doc_id``, so readers skip row groups by its statistics.
"""

from __future__ import annotations

import logging
import os
import time

from chandra_ocr.store.dataset import (
    FILE_PREFIX,
    DataFile,
    add_files,
    data_files,
    live_rows_sql,
    newest_mark,
    next_gen,
    retire,
    write_file,
)
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.session import WriteSession, write_session

log = logging.getLogger(__name__)

TARGET_BYTES = 128 * 2**20
FAN_IN = 8
_TIERS = (2**20, 8 * 2**20, 64 * 2**20)


def _tier(f: DataFile) -> int | None:
    return next((i for i, limit in enumerate(_TIERS) if f.bytes < limit), None)


def _pack(files: list[DataFile]) -> list[list[DataFile]]:
    """Consecutive groups of ``files`` of at most ``TARGET_BYTES`` in all (a larger file alone)."""
    groups: list[list[DataFile]] = []
    group: list[DataFile] = []
    size = 0
    for f in files:
        if group and size + f.bytes > TARGET_BYTES:
            groups.append(group)
            group, size = [], 0
        group.append(f)
        size += f.bytes
    return groups + [group] if group else groups


def _holds_superseded_rows(session: WriteSession, f: DataFile) -> bool:
    return session.con.execute(
        "SELECT EXISTS (SELECT 1 FROM read_parquet(?) "
        "WHERE doc_id IN (SELECT doc_id FROM kb_superseded WHERE gen > ?))",
        [str(f.snapshot(session.layout)), f.gen],
    ).fetchall()[0][0]


def _plan(session: WriteSession | None, files: list[DataFile], full: bool) -> list[list[DataFile]]:
    if full and session is not None:
        dirty = {f.file for f in files if _holds_superseded_rows(session, f)}
        candidates = [f for f in files if _tier(f) is not None or f.file in dirty]
        return [g for g in _pack(candidates) if len(g) > 1 or g[0].file in dirty]
    groups = []
    for tier in range(len(_TIERS)):
        same = [f for f in files if _tier(f) == tier]
        if len(same) >= FAN_IN:
            groups += [g for g in _pack(same) if len(g) > 1]
    return groups


def compact(session: WriteSession, *, full: bool = False) -> dict[str, tuple[int, int]]:
    """Merge (and with ``full``, purge) files as the module describes; returns table → (files before, after).

    The replaced files leave ``kb_files`` now, kb/parquet/ when the session is published, and
    kb/snapshots/ a day later (store/dataset.py).
    """
    con, layout = session.con, session.layout
    gen, newest = next_gen(con), newest_mark(con)
    counts = {}
    for table in DOCUMENT_TABLES:
        files = data_files(con, table)
        written = []
        for part, group in enumerate(_plan(session, files, full)):
            query = f"SELECT * FROM ({live_rows_sql(layout, group, newest)}) ORDER BY doc_id"
            written.append(write_file(con, layout, table, query, gen, part))
            retire(con, group)
        add_files(con, written)
        counts[table] = (len(files), len(data_files(con, table)))
    if full:
        con.execute("DELETE FROM kb_superseded")  # no file holds a superseded row any more
    else:  # marks no file is older than are spent
        con.execute("DELETE FROM kb_superseded WHERE gen <= (SELECT coalesce(min(gen), 0) FROM kb_files)")
    return counts


def compaction_due(layout: KbLayout) -> bool:
    """Whether a size tier of some table has filled up, judged from the sizes of the files under
    kb/parquet/ (which holds the listed files only): no database is opened, so a run pays nothing
    for asking. A file a failed writer left there can make it answer yes once for nothing."""
    for table in DOCUMENT_TABLES:
        folder = layout.dataset_dir(table)
        if not folder.is_dir():
            continue
        files = [
            DataFile(table, e.name, 0, 0, e.stat().st_size)
            for e in os.scandir(folder)
            if e.is_file() and e.name.startswith(FILE_PREFIX)
        ]
        if _plan(None, files, full=False):
            return True
    return False


def compact_if_due(layout: KbLayout) -> dict[str, tuple[int, int]] | None:
    """Merge the filled size tiers when some are full (after a load is published); None when none is."""
    if not compaction_due(layout):
        return None
    t0 = time.monotonic()
    counts = compact_kb(layout, full=False)
    log.info("compacted %s in %.1f s: files per table %s", layout.root, time.monotonic() - t0, counts)
    return counts


def compact_kb(layout: KbLayout, *, full: bool = True) -> dict[str, tuple[int, int]]:
    """Compaction in its own write session; ``full`` is ``chandra-ingest compact``."""
    with write_session(layout) as session:
        return compact(session, full=full)
