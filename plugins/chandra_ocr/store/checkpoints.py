"""Checkpoints of the extract stage, so a crashed batch resumes where it stopped.

The document record holds the triage and the text-route pages (read all at once); each OCR
page has its own file, written as the engine returns it.

A checkpoint is valid only for the engine key it was written under (pipeline version, engine,
model): a different model or pipeline version redoes the page.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from chandra_ocr.document import Block, ExtractRecord, Page, PageTriage, Table, TableCell
from chandra_ocr.store.atomic import write_text_atomic
from chandra_ocr.store.layout import KbLayout


def page_to_json(page: Page, engine_key: str) -> str:
    """Serialise a page (blocks and tables included) with the key it is valid for."""
    return json.dumps({"engine_key": engine_key, "page": page.to_dict()}, ensure_ascii=False)


def page_from_dict(value: dict[str, Any]) -> Page:
    """Inverse of ``page.to_dict()``."""
    value = dict(value)
    value["blocks"] = [Block(**{**b, "bbox": _tuple(b["bbox"])}) for b in value.get("blocks", [])]
    value["tables"] = [
        Table(
            **{
                **t,
                "bbox": _tuple(t["bbox"]),
                "header": tuple(t["header"]),
                "cells": tuple(TableCell(**c) for c in t["cells"]),
            }
        )
        for t in value.get("tables", [])
    ]
    return Page(**value)


def _tuple(v: list | None) -> tuple | None:
    return tuple(v) if v is not None else None


def write_page(layout: KbLayout, doc_id: str, page: Page, engine_key: str) -> None:
    """Atomically checkpoint one finished page."""
    write_text_atomic(layout.page_checkpoint(doc_id, page.page_no), page_to_json(page, engine_key))


def read_page(layout: KbLayout, doc_id: str, page_no: int, engine_key: str | None = None) -> Page | None:
    """The checkpointed page, or None if absent (or written under another engine key when one is given)."""
    path = layout.page_checkpoint(doc_id, page_no)
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if engine_key is not None and data.get("engine_key") != engine_key:
        return None
    return page_from_dict(data["page"])


def write_document_record(layout: KbLayout, doc_id: str, record: ExtractRecord) -> None:
    """Checkpoint the extract stage's record of a document (a ``written`` one is never stored)."""
    if record.outcome == "written":
        raise ValueError("a written document has no extract checkpoint")
    value: dict[str, Any] = {
        "status": "quarantined" if record.outcome == "quarantined" else "ok",
        "engine_key": record.engine_key,
    }
    if record.outcome == "quarantined":
        value["error"] = record.error
    else:
        value |= {
            "n_pages": record.n_pages,
            "pages": [asdict(pt) for pt in record.triage],
            "text_pages": [p.to_dict() for p in record.text_pages],
        }
    write_text_atomic(layout.document_checkpoint(doc_id), json.dumps(value, ensure_ascii=False))


def read_document_record(layout: KbLayout, doc_id: str) -> ExtractRecord | None:
    """The checkpointed record of a document, or None when it has none."""
    path = layout.document_checkpoint(doc_id)
    if not path.exists():
        return None
    value = json.loads(path.read_text(encoding="utf-8"))
    if value["status"] == "quarantined":
        return ExtractRecord(value["engine_key"], "quarantined", error=value["error"])
    return ExtractRecord(
        value["engine_key"],
        "triaged",
        n_pages=value["n_pages"],
        triage=[PageTriage(**pt) for pt in value["pages"]],
        text_pages=[page_from_dict(p) for p in value["text_pages"]],
    )
