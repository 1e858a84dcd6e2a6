"""Document + chunks → plain row dicts per knowledge-base table (column names as in sql/001_schema.sql)."""

from __future__ import annotations

import hashlib
from datetime import datetime

from chandra_ocr.document import Chunk, Document
from chandra_ocr.store.exports import page_markdown


def document_rows(
    doc: Document, chunks: list[Chunk], *, run_id: str | None, now: datetime
) -> dict[str, list[dict]]:
    """All rows one document contributes, keyed by table name."""
    rows: dict[str, list[dict]] = {
        "documents": [
            {
                "doc_id": doc.doc_id,
                "source_uri": doc.source_uri,
                "file_name": doc.file_name,
                "bytes": doc.bytes,
                "compressed_bytes": doc.compressed_bytes,
                "compress_method": doc.compress_method,
                "n_pages": doc.n_pages,
                "status": doc.status,
                "error": doc.error,
                "pipeline_version": doc.pipeline_version,
                "engine": doc.engine,
                "model": doc.model,
                "run_id": run_id,
                "first_seen": now,
                "ingested_at": now,
            }
        ],
        "pages": [],
        "blocks": [],
        "tables": [],
        "table_cells": [],
        "chunks": [],
    }
    for page in doc.pages:
        key = {"doc_id": doc.doc_id, "page_no": page.page_no}
        rows["pages"].append(
            key
            | {
                "width_pt": page.width_pt,
                "height_pt": page.height_pt,
                "route": page.route,
                "route_reason": page.route_reason,
                "engine": page.engine,
                "model": page.model,
                "status": page.status,
                "attempts": page.attempts,
                "finish_reason": page.finish_reason,
                "fallback_reason": page.fallback_reason,
                "error": page.error,
                "prompt_tokens": page.prompt_tokens,
                "output_tokens": page.output_tokens,
                "latency_ms": page.latency_ms,
                "markdown": page_markdown(page),
                "raw": page.raw,
            }
        )
        for b in page.blocks:
            x0, y0, x1, y1 = b.bbox if b.bbox else (None, None, None, None)
            rows["blocks"].append(
                key
                | {
                    "block_no": b.block_no,
                    "label": b.label,
                    "x0": x0,
                    "y0": y0,
                    "x1": x1,
                    "y1": y1,
                    "text": b.text,
                    "html": b.html,
                    "level": b.level,
                }
            )
        for t in page.tables:
            x0, y0, x1, y1 = t.bbox if t.bbox else (None, None, None, None)
            tkey = key | {"table_no": t.table_no}
            rows["tables"].append(
                tkey
                | {
                    "x0": x0,
                    "y0": y0,
                    "x1": x1,
                    "y1": y1,
                    "n_rows": t.n_rows,
                    "n_cols": t.n_cols,
                    "header": list(t.header),
                    "source": t.source,
                    "caption": t.caption,
                    "html": t.html,
                    "header_rows": t.header_rows,
                    "stub_head": t.stub_head,
                }
            )
            rows["table_cells"].extend(
                tkey
                | {
                    "row": c.row,
                    "col": c.col,
                    "rowspan": c.rowspan,
                    "colspan": c.colspan,
                    "is_header": c.is_header,
                    "text": c.text,
                    "header_level": c.header_level,
                }
                for c in t.cells
            )
    for c in chunks:
        rows["chunks"].append(
            {
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "chunk_no": c.chunk_no,
                "kind": c.kind,
                "text": c.text,
                "n_tokens": c.n_tokens,
                "header_path": list(c.header_path),
                "page_start": c.page_start,
                "page_end": c.page_end,
                "bboxes": [dict(zip(("page_no", "x0", "y0", "x1", "y1"), b, strict=True)) for b in c.bboxes],
                "content_hash": hashlib.sha256(c.indexed_text.encode("utf-8")).hexdigest(),
                "updated_at": now,
                "context": c.context,
            }
        )
    return rows
