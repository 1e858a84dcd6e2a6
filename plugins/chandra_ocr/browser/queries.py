"""What the browser reads from kb.duckdb: bounded, parameterised queries on a read-only connection.

Every list is paged (``LIMIT`` plus a keyset cursor where it can grow with the KB); a page view
reads one page's rows, which the Parquet files (sorted by doc_id) find by their statistics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from chandra_ocr.errors import NotFoundError
from chandra_ocr.vector.lexical import STOPWORDS

PAGE_SIZE = 50  # documents per page of the list
REVIEW_LIMIT = 200  # pages / documents the review queue shows of each kind
SEARCH_LIMIT = 50
DOC_STATUSES = ("ingested", "partial", "quarantined")
_DOC_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_WORDS = re.compile(r"[^\W_]+")  # letters and digits only: safe to join into a regular expression


def check_doc_id(doc_id: str) -> str:
    """``doc_id`` if it looks like one (a sha256 hex digest, or a test's short id); else NotFoundError."""
    if not _DOC_ID.fullmatch(doc_id):
        raise NotFoundError("no such document")
    return doc_id


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | dict[str, Any]) -> list[dict]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any], missing: str) -> dict:
    """The one row ``sql`` finds; NotFoundError(``missing``) when it finds none."""
    rows = _rows(con, sql, params)
    if not rows:
        raise NotFoundError(missing)
    return rows[0]


@dataclass(frozen=True)
class Cursor:
    """Where the next page of the document list starts: after this (ingested_at, doc_id)."""

    ingested_at: datetime
    doc_id: str

    def token(self) -> str:
        return f"{self.ingested_at.isoformat()}~{self.doc_id}"

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """The cursor of ``token``; ValueError when it is not one."""
        when, _, doc_id = token.rpartition("~")
        return cls(datetime.fromisoformat(when), check_doc_id(doc_id))


_PAGE_COUNTS = """
SELECT doc_id,
       count(*) FILTER (WHERE route = 'text') AS text_pages,
       count(*) FILTER (WHERE route = 'ocr') AS ocr_pages,
       count(*) FILTER (WHERE status = 'fallback') AS fallback_pages,
       count(*) FILTER (WHERE status = 'failed') AS failed_pages,
       count(*) FILTER (WHERE attempts > 1) AS retried_pages
FROM pages WHERE doc_id IN (SELECT unnest($ids)) GROUP BY doc_id"""


def documents(
    con: duckdb.DuckDBPyConnection,
    *,
    status: str | None = None,
    flagged: bool = False,
    after: Cursor | None = None,
    limit: int = PAGE_SIZE,
) -> tuple[list[dict], Cursor | None]:
    """Newest documents first (``limit`` of them, after ``after``), with their pages' route and
    status counts; ``flagged``: only those with a fallback or failed page. Returns the rows and the
    cursor of the next page (None on the last)."""
    where = ["($status IS NULL OR status = $status)"]
    params: dict[str, Any] = {"status": status, "limit": limit + 1}
    if flagged:
        where.append("doc_id IN (SELECT DISTINCT doc_id FROM pages WHERE status <> 'ok')")
    if after is not None:
        where.append("(ingested_at, doc_id) < ($at, $id)")
        params |= {"at": after.ingested_at, "id": after.doc_id}
    rows = _rows(
        con,
        "SELECT doc_id, file_name, status, n_pages, engine, model, error, run_id, ingested_at "
        f"FROM documents WHERE {' AND '.join(where)} ORDER BY ingested_at DESC, doc_id DESC LIMIT $limit",
        params,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    counts = {r["doc_id"]: r for r in _rows(con, _PAGE_COUNTS, {"ids": [r["doc_id"] for r in rows]})}
    empty = {"text_pages": 0, "ocr_pages": 0, "fallback_pages": 0, "failed_pages": 0, "retried_pages": 0}
    for row in rows:
        row.update({k: v for k, v in counts.get(row["doc_id"], empty).items() if k != "doc_id"})
    nxt = Cursor(rows[-1]["ingested_at"], rows[-1]["doc_id"]) if more else None
    return rows, nxt


def status_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Documents by status."""
    return dict(
        con.execute("SELECT status, count(*) FROM documents GROUP BY status ORDER BY status").fetchall()
    )


def recent_runs(con: duckdb.DuckDBPyConnection, limit: int = 5) -> list[dict]:
    """The newest runs that loaded something."""
    return _rows(
        con,
        "SELECT run_id, started_at, finished_at, n_documents, n_pages FROM runs "
        "ORDER BY finished_at DESC LIMIT ?",
        [limit],
    )


def document(con: duckdb.DuckDBPyConnection, doc_id: str) -> dict:
    """One document's row with its pages (route, engine, status, attempts); NotFoundError if absent."""
    doc = _one(con, "SELECT * FROM documents WHERE doc_id = ?", [check_doc_id(doc_id)], "no such document")
    doc["pages"] = _rows(
        con,
        "SELECT page_no, route, engine, model, status, attempts, finish_reason, fallback_reason, error "
        "FROM pages WHERE doc_id = ? ORDER BY page_no",
        [doc_id],
    )
    return doc


def page(con: duckdb.DuckDBPyConnection, doc_id: str, page_no: int) -> dict:
    """One page: its row, its blocks in reading order, its tables and their cells; NotFoundError if absent."""
    args = [check_doc_id(doc_id), int(page_no)]
    out = _one(
        con,
        "SELECT p.*, d.file_name, d.source_uri, d.bytes AS source_bytes, d.n_pages, d.status AS doc_status, "
        "d.error AS doc_error "
        "FROM pages p JOIN documents d USING (doc_id) WHERE p.doc_id = ? AND p.page_no = ?",
        args,
        "no such page",
    )
    out["blocks"] = _rows(
        con,
        "SELECT block_no, label, x0, y0, x1, y1, text, level FROM blocks "
        "WHERE doc_id = ? AND page_no = ? ORDER BY block_no",
        args,
    )
    tables = _rows(
        con,
        "SELECT table_no, n_rows, n_cols, header, source, caption, x0, y0, x1, y1 FROM tables "
        "WHERE doc_id = ? AND page_no = ? ORDER BY table_no",
        args,
    )
    cells = _rows(
        con,
        'SELECT table_no, "row", col, rowspan, colspan, is_header, text FROM table_cells '
        'WHERE doc_id = ? AND page_no = ? ORDER BY table_no, "row", col',
        args,
    )
    for table in tables:
        table["rows"] = _grid([c for c in cells if c["table_no"] == table["table_no"]])
        table["block_no"] = _block_at(out["blocks"], (table["x0"], table["y0"], table["x1"], table["y1"]))
    out["tables"] = tables
    return out


def _grid(cells: list[dict]) -> list[list[dict]]:
    """The cells by row, in column order (a spanned cell appears once, at its top-left)."""
    rows: dict[int, list[dict]] = {}
    for cell in cells:
        rows.setdefault(cell["row"], []).append(cell)
    return [rows[r] for r in sorted(rows)]


def _block_at(blocks: list[dict], box: tuple) -> int | None:
    """The block whose box is ``box`` (to a tenth of a point): where a table or a chunk came from."""
    if None in box:
        return None
    for block in blocks:
        if block["x0"] is not None and all(
            abs(a - b) < 0.1
            for a, b in zip((block["x0"], block["y0"], block["x1"], block["y1"]), box, strict=True)
        ):
            return block["block_no"]
    return None


def review(con: duckdb.DuckDBPyConnection, limit: int = REVIEW_LIMIT) -> dict[str, Any]:
    """Pages that fell back, failed or were retried, and documents partial or quarantined, newest first."""
    pages = _rows(
        con,
        "SELECT p.doc_id, d.file_name, p.page_no, p.status, p.route, p.engine, p.attempts, "
        "p.finish_reason, p.fallback_reason, p.error FROM pages p JOIN documents d USING (doc_id) "
        "WHERE p.status <> 'ok' OR p.attempts > 1 "
        "ORDER BY d.ingested_at DESC, p.doc_id, p.page_no LIMIT ?",
        [limit],
    )
    docs = _rows(
        con,
        "SELECT doc_id, file_name, status, n_pages, error, ingested_at FROM documents "
        "WHERE status <> 'ingested' ORDER BY ingested_at DESC, doc_id LIMIT ?",
        [limit],
    )
    totals = con.execute(
        "SELECT (SELECT count(*) FROM pages WHERE status <> 'ok' OR attempts > 1), "
        "(SELECT count(*) FROM documents WHERE status <> 'ingested')"
    ).fetchall()[0]
    return {"pages": pages, "documents": docs, "n_pages": totals[0], "n_documents": totals[1]}


_TABLE_SEARCH = """
WITH hit AS (
    SELECT doc_id, page_no, table_no, unnest(regexp_extract_all(lower(text), $words)) AS word
    FROM table_cells WHERE regexp_matches(lower(text), $words)
    UNION
    SELECT doc_id, page_no, table_no,
           unnest(regexp_extract_all(lower(concat_ws(' ', array_to_string(header, ' | '), caption)), $words))
    FROM tables
    UNION
    SELECT t.doc_id, t.page_no, t.table_no, unnest(regexp_extract_all(lower(d.file_name), $words))
    FROM tables t JOIN documents d USING (doc_id)
),
scored AS (SELECT doc_id, page_no, table_no, count(DISTINCT word) AS matched FROM hit GROUP BY ALL),
found AS (
    SELECT t.*, d.file_name, s.matched FROM scored s
    JOIN tables t USING (doc_id, page_no, table_no) JOIN documents d USING (doc_id)
    ORDER BY s.matched DESC, d.file_name, t.doc_id, t.page_no, t.table_no LIMIT $limit
)
SELECT f.doc_id, f.file_name, f.page_no, f.table_no, f.n_rows, f.n_cols, f.caption, f.header, f.matched,
       min(b.block_no) AS block_no
FROM found f
LEFT JOIN blocks b ON b.doc_id = f.doc_id AND b.page_no = f.page_no AND b.label = 'table'
    AND abs(b.x0 - f.x0) < 0.1 AND abs(b.y0 - f.y0) < 0.1
    AND abs(b.x1 - f.x1) < 0.1 AND abs(b.y1 - f.y1) < 0.1
GROUP BY ALL ORDER BY f.matched DESC, f.file_name, f.doc_id, f.page_no, f.table_no"""


def table_search(con: duckdb.DuckDBPyConnection, text: str, limit: int = SEARCH_LIMIT) -> list[dict]:
    """Tables whose file name, caption, header or cells contain the words of ``text`` (case-insensitive,
    function words left out), those holding the most of them first, with the block each was read from.
    Cells are searched one by one in one pass (not the view's joined ``cell_text``, which it builds for
    every table of the KB: 20x slower at 100,000)."""
    words = sorted({w for w in _WORDS.findall(text.lower()) if w not in STOPWORDS})
    if not words:
        return []
    return _rows(con, _TABLE_SEARCH, {"words": "(" + "|".join(words) + ")", "limit": limit})


def chunk_blocks(con: duckdb.DuckDBPyConnection, chunk_ids: list[str]) -> dict[str, tuple[int, int | None]]:
    """chunk_id → (page, block_no) of the first block each chunk was made from (block None if unmatched)."""
    rows = con.execute(
        "WITH c AS (SELECT chunk_id, doc_id, page_start, bboxes[1] AS b FROM chunks "
        "           WHERE chunk_id IN (SELECT unnest($ids))) "
        "SELECT c.chunk_id, coalesce(c.b.page_no, c.page_start), min(k.block_no) FROM c "
        "LEFT JOIN blocks k ON k.doc_id = c.doc_id AND k.page_no = c.b.page_no "
        "AND abs(k.x0 - c.b.x0) < 0.1 AND abs(k.y0 - c.b.y0) < 0.1 "
        "AND abs(k.x1 - c.b.x1) < 0.1 AND abs(k.y1 - c.b.y1) < 0.1 GROUP BY ALL",
        {"ids": chunk_ids},
    ).fetchall()
    return {chunk_id: (page_no, block_no) for chunk_id, page_no, block_no in rows}
