"""Readers in other processes never block a load (nor it them); compaction keeps the live rows only."""

import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import duckdb
from pace import scaled
from store.test_loader import _doc

from chandra_ocr.store.compact import FAN_IN, compact_if_due, compact_kb
from chandra_ocr.store.duckdb_store import connect, forget_documents, load_documents
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.schema import dataset_ddl
from chandra_ocr.store.staging import read_staged, write_staged

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _stage(layout, doc_id, texts):
    doc, chunks = _doc(doc_id, texts)
    write_staged(layout, "r", doc_id, document_rows(doc, chunks, run_id="r", now=T0))


def _count(layout, sql="SELECT count(*) FROM documents"):
    con = connect(layout)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def _rows(layout):
    con = connect(layout)
    try:
        return {t: sorted(con.sql(f"SELECT * FROM {t}").fetchall(), key=repr) for t in DOCUMENT_TABLES}
    finally:
        con.close()


def _reader(layout):
    """Another process holding a read-only connection; each line on stdin is a query it answers."""
    script = textwrap.dedent(f"""
        import duckdb, sys
        con = duckdb.connect({str(layout.duckdb_path)!r}, read_only=True)
        print("open", flush=True)
        for sql in sys.stdin:
            print(con.execute(sql).fetchone()[0], flush=True)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "open"
    return proc


def _ask(proc, sql):
    proc.stdin.write(sql + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_a_load_succeeds_while_another_process_holds_a_read_only_connection(tmp_path):
    layout = KbLayout(tmp_path)
    _stage(layout, "d1", ["alpha"])
    load_documents(layout, "r", ["d1"])
    reader = _reader(layout)
    try:
        _stage(layout, "d2", ["beta"])
        bound = scaled(10)
        started = time.monotonic()
        load_documents(layout, "r", ["d2"])
        assert time.monotonic() - started < bound  # not the old 120 s wait for the lock
        assert _ask(reader, "SELECT count(*) FROM documents") == "1"  # its snapshot: the file it opened
        assert _count(layout) == 2  # reopened: the new data
        forget_documents(layout, ["d1"])  # any writer, not only the loader
        assert _count(layout, "SELECT string_agg(doc_id) FROM documents") == "d2"
    finally:
        reader.stdin.close()
        reader.wait(10)
    assert reader.returncode == 0


def test_a_reader_connecting_during_a_load_gets_the_last_committed_state_at_once(tmp_path):
    layout = KbLayout(tmp_path)
    _stage(layout, "d0", ["zero"])
    load_documents(layout, "r", ["d0"])
    ids = [f"d{i:03d}" for i in range(1, 301)]
    for doc_id in ids:
        _stage(layout, doc_id, ["alpha", "beta"])
    loader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from chandra_ocr.store.layout import KbLayout; "
            "from chandra_ocr.store.duckdb_store import load_documents; "
            f"load_documents(KbLayout(Path(sys.argv[1])), 'r', {ids!r})",
            str(layout.root),
        ]
    )
    seen, slowest = set(), 0.0
    quiet_bound = scaled(1.0)  # a reader that waited for the load would take the load's seconds
    while loader.poll() is None or not seen:
        started = time.monotonic()
        con = duckdb.connect(str(layout.duckdb_path), read_only=True)
        seen.add(con.execute("SELECT count(*) FROM documents").fetchone()[0])
        con.close()
        slowest = max(slowest, time.monotonic() - started)
    assert loader.returncode == 0
    assert seen <= {1, 301} and 1 in seen  # the old state or the new one, never a part
    assert slowest < max(quiet_bound, scaled(1.0))  # the slowdown before and after the reads
    assert _count(layout) == 301


def test_loads_add_a_bounded_number_of_files_and_compaction_keeps_the_live_rows(tmp_path):
    layout = KbLayout(tmp_path)
    merged = 0
    for run in range(2 * FAN_IN + 1):
        _stage(layout, f"r{run}", [f"text {run}", "common"])
        before = len(list((tmp_path / "parquet" / "chunks").glob("*.parquet")))
        load_documents(layout, "r", [f"r{run}"])
        assert len(list((tmp_path / "parquet" / "chunks").glob("*.parquet"))) == before + 1  # the load alone
        merged += compact_if_due(layout) is not None  # what a run does after its load
        files = [p for p in (tmp_path / "parquet" / "chunks").iterdir()]
        assert len(files) < FAN_IN + 1  # merged as tiers fill up, not one file per load for ever
    assert merged == 2
    _stage(layout, "r1", ["text 1", "changed"])  # re-ingested: its old rows must go
    load_documents(layout, "r", ["r1"])
    forget_documents(layout, ["r2"])
    before = _rows(layout)
    assert {r[0] for r in before["documents"]} == {f"r{i}" for i in range(2 * FAN_IN + 1)} - {"r2"}
    assert sorted(r[4] for r in before["chunks"] if r[1] == "r1") == ["changed", "text 1"]

    reader = _reader(layout)  # opened before the compaction
    counts = compact_kb(layout)
    assert all(after == 1 for _, after in counts.values()), counts
    assert _rows(layout) == before
    try:  # still reads the replaced files (their snapshot names are kept for a day)
        assert _ask(reader, "SELECT count(*) FROM chunks") == str(len(before["chunks"]))
    finally:
        reader.stdin.close()
        reader.wait(10)
    con = duckdb.connect()  # a reader of kb/parquet/ without kb.duckdb sees the same rows
    for table in DOCUMENT_TABLES:
        direct = con.sql(f"SELECT * FROM read_parquet('{tmp_path}/parquet/{table}/*.parquet')").fetchall()
        assert sorted(direct, key=repr) == before[table], table
    assert _count(layout, "SELECT count(*) FROM kb_superseded") == 0


def test_a_kb_duckdb_with_the_rows_in_tables_is_moved_into_parquet_files_by_its_next_write(tmp_path):
    layout = KbLayout(tmp_path)
    _stage(layout, "old", ["alpha"])
    con = duckdb.connect(str(layout.duckdb_path))  # the layout before the Parquet dataset
    con.execute(dataset_ddl())
    for table, rows in read_staged(layout, "r", ["old"]).items():
        con.register("old_rows", rows)
        con.execute(f"INSERT INTO {table} SELECT * FROM old_rows")
        con.unregister("old_rows")
    con.close()
    layout.staged("r", "old").unlink()
    _stage(layout, "new", ["beta"])
    load_documents(layout, "r", ["new"])
    assert _count(layout, "SELECT string_agg(doc_id ORDER BY doc_id) FROM chunks") == "new,old"
    assert _count(layout, "SELECT count(*) FROM duckdb_views() WHERE view_name = 'documents'") == 1
    assert len(list((tmp_path / "parquet" / "documents").glob("part-*.parquet"))) == 2


def test_files_written_before_a_column_was_added_read_null_there_and_compact(tmp_path):
    """A KB loaded before ``tables.header_rows`` / ``stub_head`` and ``table_cells.header_level``
    existed: its next write gives kb.duckdb the new shape, old rows read NULL in the new columns,
    new rows their values, and compaction merges old and new files."""
    import pyarrow.parquet as pq

    layout = KbLayout(tmp_path)
    _stage(layout, "old", ["alpha"])
    load_documents(layout, "r", ["old"])
    added = {"tables": ["header_rows", "stub_head"], "table_cells": ["header_level"]}
    for table, columns in added.items():  # the files as the earlier version wrote them
        for path in (tmp_path / "parquet" / table).glob("part-*.parquet"):
            pq.write_table(pq.read_table(path).drop_columns(columns), path)
    con = duckdb.connect(str(layout.duckdb_path))
    for table, columns in added.items():
        for column in columns:
            con.execute(f"ALTER TABLE kb_shape.{table} DROP COLUMN {column}")
    con.execute("UPDATE kb_schema SET digest = 'before'")
    con.close()

    _stage(layout, "new", ["beta"])
    load_documents(layout, "r", ["new"])
    sql = "SELECT doc_id, header_rows, stub_head FROM tables ORDER BY doc_id"
    con = connect(layout)
    try:
        assert con.execute(sql).fetchall() == [("new", 1, "k"), ("old", None, None)]
        levels = con.execute(
            "SELECT doc_id, header_level FROM table_cells WHERE is_header ORDER BY ALL"
        ).fetchall()
        assert levels == [("new", 1), ("new", 1), ("old", None), ("old", None)]
    finally:
        con.close()
    compact_kb(layout)
    assert _count(layout, "SELECT count(*) FROM tables WHERE header_rows IS NULL") == 1
    assert _count(layout, "SELECT count(*) FROM kb_table_rows('old', 1, 1)") == 1
