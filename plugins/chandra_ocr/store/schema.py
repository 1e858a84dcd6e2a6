"""The SQL files that define the knowledge base (``sql/*.sql``), applied in name order.

``001`` defines the six dataset tables (the columns of the Parquet files), ``002`` the catalog
tables kept inside kb.duckdb, and every later file the views and macros over both.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import duckdb


def sql_dir() -> Path:
    """``sql/`` shipped beside the package (a symlink in the repo, real files in a wheel)."""
    return Path(__file__).resolve().parents[1] / "sql"


def _files() -> list[Path]:
    return sorted(sql_dir().glob("*.sql"))


def dataset_ddl(schema: str | None = None) -> str:
    """CREATE TABLE statements of the six dataset tables (sql/001_schema.sql), in ``schema`` when given
    (a fixed identifier: ``kb_shape``, or ``staging``, the in-memory database a load attaches)."""
    ddl = _files()[0].read_text(encoding="utf-8")
    if schema is None:
        return ddl
    return ddl.replace("CREATE TABLE IF NOT EXISTS ", f"CREATE TABLE IF NOT EXISTS {schema}.")


def apply_catalog(con: duckdb.DuckDBPyConnection) -> None:
    """The catalog tables kept inside kb.duckdb (sql/002_catalog.sql)."""
    con.execute(_files()[1].read_text(encoding="utf-8"))


def apply_helpers(con: duckdb.DuckDBPyConnection) -> None:
    """The views and macros over the dataset views (003 and later); each is idempotent."""
    for path in _files()[2:]:
        con.execute(path.read_text(encoding="utf-8"))


@cache
def sql_digest() -> str:
    """sha256 over every SQL file: a kb.duckdb that recorded it has this schema already."""
    digest = hashlib.sha256()
    for path in _files():
        digest.update(path.read_bytes())
    return digest.hexdigest()
