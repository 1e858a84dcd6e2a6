"""Per-document Parquet shards (staged until loaded), typed by the SQL schema and written atomically."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from chandra_ocr.store.atomic import write_bytes_atomic
from chandra_ocr.store.layout import SHARD_TABLES, KbLayout
from chandra_ocr.store.schema import dataset_ddl


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of ``table`` as DuckDB derives it from sql/001_schema.sql (one source of truth)."""
    if table not in SHARD_TABLES:
        raise ValueError(f"not a shard table: {table}")
    return arrow_schemas()[table]


@cache
def arrow_schemas() -> dict[str, pa.Schema]:
    """The Arrow schemas of all shard tables, derived once per process (an in-memory DuckDB, ~20-60 ms).

    A process that forks workers calls this first: the workers inherit the result and never
    start DuckDB themselves (each would pay ~0.15 s on its first shard).
    """
    con = duckdb.connect(":memory:", config={"threads": 1})
    try:
        con.execute(dataset_ddl())
        return {
            table: con.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table().schema for table in SHARD_TABLES
        }
    finally:
        con.close()


def to_arrow(table: str, rows: list[dict]) -> pa.Table:
    """Rows → an Arrow table with exactly the columns and types of ``table``; unknown keys raise."""
    schema = arrow_schema(table)
    extra = {k for row in rows[:1] for k in row} - set(schema.names)
    if extra:
        raise ValueError(f"columns not in the {table} schema: {sorted(extra)}")
    return pa.Table.from_pylist(rows, schema=schema)


def _parquet_bytes(table: pa.Table) -> bytes:
    """The Parquet file of ``table`` built in memory (Arrow writes a file in many small pieces).

    A shard holds one document: dictionary pages and min/max statistics pay off for ``doc_id``
    alone (readers of ``staging/<table>/*.parquet`` skip other documents' files by it). Leaving
    them out for the other columns makes a shard ~20 % cheaper to write and to load.
    """
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=["doc_id"], write_statistics=["doc_id"])
    return sink.getvalue().to_pybytes()


def write_shards(layout: KbLayout, doc_id: str, rows: dict[str, list[dict]]) -> list[Path]:
    """Write the shards of ``doc_id``: ``documents`` always, other tables only where they have rows.

    A table without rows has no shard, and an older shard of it is removed: the loader replaces
    all of a document's rows, so a stale file would bring back rows the document no longer has.
    """
    written = []
    for table in SHARD_TABLES:
        path = layout.shard(table, doc_id)
        table_rows = rows.get(table, [])
        if not table_rows and table != "documents":
            path.unlink(missing_ok=True)
            continue
        written.append(write_bytes_atomic(path, _parquet_bytes(to_arrow(table, table_rows))))
    return written
