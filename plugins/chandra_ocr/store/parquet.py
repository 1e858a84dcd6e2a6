"""Per-document Parquet shards, typed by the SQL schema and written atomically."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from chandra_ocr.store.atomic import write_atomic
from chandra_ocr.store.layout import SHARD_TABLES, KbLayout
from chandra_ocr.store.schema import apply_schema


@lru_cache(maxsize=1)
def _typed() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding empty tables of the KB schema: it casts rows to the declared types."""
    con = duckdb.connect(":memory:")
    apply_schema(con)
    return con


def to_arrow(table: str, rows: list[dict]) -> pa.Table:
    """Rows → an Arrow table with exactly the columns and types of ``table`` in sql/001_schema.sql."""
    if table not in SHARD_TABLES:
        raise ValueError(f"not a shard table: {table}")
    con = _typed().cursor()
    empty = con.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table()
    if not rows:
        return empty
    return _cast(con, table, pa.Table.from_pylist(rows))


def _cast(con: duckdb.DuckDBPyConnection, table: str, incoming: pa.Table) -> pa.Table:
    con.execute(f"CREATE OR REPLACE TEMP TABLE staged AS SELECT * FROM {table} LIMIT 0")
    con.register("incoming_rows", incoming)
    try:
        con.execute("INSERT INTO staged BY NAME SELECT * FROM incoming_rows")
    finally:
        con.unregister("incoming_rows")
    return con.sql("SELECT * FROM staged").to_arrow_table()


def write_shards(layout: KbLayout, doc_id: str, rows: dict[str, list[dict]]) -> list[Path]:
    """Write one shard per table for ``doc_id`` (empty tables too, so the loader replaces old rows)."""
    written = []
    for table in SHARD_TABLES:
        arrow = to_arrow(table, rows.get(table, []))
        path = layout.shard(table, doc_id)
        written.append(write_atomic(path, lambda tmp, a=arrow: pq.write_table(a, tmp)))
    return written
