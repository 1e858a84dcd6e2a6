"""The SQL files that define the knowledge base (``sql/*.sql``), applied in name order."""

from __future__ import annotations

from pathlib import Path

import duckdb


def sql_dir() -> Path:
    """``sql/`` shipped beside the package (a symlink in the repo, real files in a wheel)."""
    return Path(__file__).resolve().parents[1] / "sql"


def apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Run every ``sql/*.sql`` file; each is idempotent (CREATE … IF NOT EXISTS / OR REPLACE)."""
    for path in sorted(sql_dir().glob("*.sql")):
        con.execute(path.read_text(encoding="utf-8"))
