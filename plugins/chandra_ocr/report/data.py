"""What the run report shows, read from the knowledge base's DuckDB file (read-only) into plain rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from chandra_ocr.errors import StoreError
from chandra_ocr.store.duckdb_store import connect, incomplete_documents
from chandra_ocr.store.layout import KbLayout

STAGES = ("compress", "extract", "assemble", "load")
DOCUMENT_STATUSES = ("ingested", "partial", "quarantined")
INCOMPLETE_SHOWN = 100  # the latest quarantined or partial documents the report lists
# Run metrics that are the run's own accounting, not the engine's paging values.
_RUN_KEYS = frozenset(
    {"seconds", "pages_per_s", "prompt_tokens", "output_tokens", "output_tokens_per_s", "batches",
     "engines", "engine", "model", "ocr_pages", "fallback_pages", "quarantined", "stage_seconds",
     "backfill", "model_use"}
)  # fmt: skip


def run_incomplete(layout: KbLayout, run_id: str) -> list[tuple[str, str, str, str]]:
    """(file, status, reason, run) of the documents the run ``run_id`` left quarantined or partial."""
    con = connect(layout, read_only=True)
    try:
        return incomplete_documents(con, run_id)
    finally:
        con.close()


@dataclass(frozen=True)
class RunRow:
    """One row of the ``runs`` table with its metrics split up."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    n_documents: int
    n_pages: int
    metrics: dict[str, Any]

    @property
    def seconds(self) -> float:
        return max((self.finished_at - self.started_at).total_seconds(), 0.0)

    @property
    def pages_per_s(self) -> float:
        return self.n_pages / self.seconds if self.seconds else 0.0

    @property
    def stage_seconds(self) -> dict[str, float]:
        return {k: float(v) for k, v in (self.metrics.get("stage_seconds") or {}).items()}

    @property
    def paging(self) -> dict[str, Any]:
        """The engine's values (paging, KV capacity, limits) recorded for the run."""
        return {k: v for k, v in self.metrics.items() if k not in _RUN_KEYS}


@dataclass
class ReportData:
    """Everything the report draws; each list holds plain tuples in display order."""

    kb: str
    generated_at: datetime
    documents_by_status: list[tuple[str, int, int]] = field(default_factory=list)  # status, docs, pages
    incomplete: list[tuple[str, str, str, str]] = field(default_factory=list)  # file, status, reason, run
    pages_by_route: list[tuple[str, str, str, int]] = field(default_factory=list)  # route, engine, status, n
    ingested: list[tuple[datetime, int]] = field(default_factory=list)  # per document: time, pages
    runs: list[RunRow] = field(default_factory=list)  # oldest first
    retries: list[tuple[str, int, int]] = field(default_factory=list)  # finish reason, pages, extra attempts
    fallbacks: list[tuple[str, str, int]] = field(default_factory=list)  # status, reason, pages
    compression: list[tuple[str, int, int, int]] = field(default_factory=list)  # method, docs, bytes, after
    biggest: list[tuple[str, int, int, int | None, str]] = field(default_factory=list)
    slowest: list[tuple[str, int, int, float]] = field(default_factory=list)  # file, pages, ocr pages, s
    totals: dict[str, int] = field(default_factory=dict)  # documents, pages, chunks, runs


def collect(layout: KbLayout, top: int = 10) -> ReportData:
    """Read the report's numbers from ``layout``'s DuckDB file; raises StoreError when there is none."""
    if not layout.duckdb_path.exists():
        raise StoreError(f"no knowledge base at {layout.duckdb_path}")
    con = connect(layout, read_only=True)
    try:
        return _collect(con, str(layout.root), top)
    except duckdb.CatalogException as e:
        raise StoreError(f"{layout.duckdb_path} has no knowledge-base tables yet: {e}") from e
    finally:
        con.close()


def _collect(con: duckdb.DuckDBPyConnection, kb: str, top: int) -> ReportData:
    data = ReportData(kb=kb, generated_at=datetime.now(UTC))
    data.documents_by_status = _rows(
        con, "SELECT status, count(*), coalesce(sum(n_pages), 0) FROM documents GROUP BY 1 ORDER BY 2 DESC"
    )
    data.incomplete = incomplete_documents(con, limit=INCOMPLETE_SHOWN)
    data.pages_by_route = _rows(
        con, "SELECT route, engine, status, count(*) FROM pages GROUP BY ALL ORDER BY route, engine, status"
    )
    data.ingested = _rows(con, "SELECT ingested_at, n_pages FROM documents ORDER BY ingested_at")
    data.runs = [
        RunRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if isinstance(r[5], str) else dict(r[5]))
        for r in _rows(con, "SELECT * FROM runs ORDER BY started_at")
    ]
    data.retries = _rows(
        con,
        "SELECT coalesce(finish_reason, '-'), count(*), sum(attempts - 1) FROM pages WHERE attempts > 1 "
        "GROUP BY 1 ORDER BY 3 DESC",
    )
    # Reasons carry details after a colon (the exception text); the part before it names the reason.
    data.fallbacks = _rows(
        con,
        "SELECT status, left(split_part(coalesce(CASE WHEN status = 'fallback' THEN fallback_reason END, "
        "error, fallback_reason, '-'), ':', 1), 60) AS reason, count(*) FROM pages "
        "WHERE status <> 'ok' GROUP BY ALL ORDER BY 3 DESC",
    )
    data.compression = _rows(
        con,
        "SELECT coalesce(compress_method, 'none'), count(*), sum(bytes), "
        "sum(coalesce(compressed_bytes, bytes)) FROM documents GROUP BY 1 ORDER BY 3 DESC",
    )
    data.biggest = _rows(
        con,
        "SELECT file_name, n_pages, bytes, compressed_bytes, status FROM documents "
        f"ORDER BY bytes DESC, file_name LIMIT {int(top)}",
    )
    data.slowest = _rows(
        con,
        "SELECT d.file_name, d.n_pages, count(*) FILTER (WHERE p.route = 'ocr'), sum(p.latency_ms) / 1000 "
        "FROM documents d JOIN pages p USING (doc_id) GROUP BY d.doc_id, d.file_name, d.n_pages "
        f"ORDER BY 4 DESC, 1 LIMIT {int(top)}",
    )
    names = ("documents", "pages", "chunks", "runs")
    counts = _rows(con, "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in names))[0]
    data.totals = dict(zip(names, counts, strict=True))
    return data


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return [tuple(r) for r in con.execute(sql).fetchall()]
