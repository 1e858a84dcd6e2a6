"""Reading a knowledge base's DuckDB file in tests (read-only, waiting while a loader holds it)."""

from __future__ import annotations

from pathlib import Path

from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout


def kb_rows(kb: Path, sql: str, *params: object) -> list[tuple]:
    """All rows of ``sql`` (with ``params``) against the knowledge base at ``kb``."""
    con = connect(KbLayout(Path(kb)), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def documents_by_name(kb: Path) -> dict[str, tuple]:
    """file name → (status, error) of every document."""
    return {
        name: (status, error)
        for name, status, error in kb_rows(kb, "SELECT file_name, status, error FROM documents")
    }
