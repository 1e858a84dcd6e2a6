"""Checkpoints of the extract stage, so a crashed batch resumes where it stopped.

The document record (`ExtractRecord`) holds the triage and the text-route pages (read all at
once); each OCR page has its own file, written as the engine returns it.

A checkpoint is valid only for the engine key it was written under (pipeline version, engine,
model): a different model or pipeline version redoes the page.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.document import Page, PageTriage
from chandra_ocr.store.atomic import write_text_atomic
from chandra_ocr.store.layout import KbLayout


def checkpoint_key(engine: str, model: str | None) -> str:
    """What a checkpoint is valid for: pipeline version, engine and model."""
    return f"{PIPELINE_VERSION}|{engine}|{model or '-'}"


@dataclass
class ExtractRecord:
    """The extract stage's record of one document: returned by the worker that triaged it and
    checkpointed, so that a retry and the assemble stage find it.

    ``outcome`` is ``quarantined`` (``error`` says why) or ``triaged`` (``triage`` routes every page; the
    stored record also holds the text-route pages, the OCR pages have their own checkpoints)."""

    engine_key: str  # what the record is valid for: `checkpoint_key`
    outcome: Literal["quarantined", "triaged"]
    n_pages: int | None = None  # None when quarantined
    error: str | None = None
    triage: list[PageTriage] = field(default_factory=list)
    text_pages: list[Page] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The stored form."""
        if self.outcome == "quarantined":
            return {"status": "quarantined", "engine_key": self.engine_key, "error": self.error}
        return {
            "status": "ok",
            "engine_key": self.engine_key,
            "n_pages": self.n_pages,
            "pages": [asdict(pt) for pt in self.triage],
            "text_pages": [p.to_dict() for p in self.text_pages],
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ExtractRecord:
        """Inverse of ``to_dict``."""
        if value["status"] == "quarantined":
            return cls(value["engine_key"], "quarantined", error=value["error"])
        return cls(
            value["engine_key"],
            "triaged",
            n_pages=value["n_pages"],
            triage=[PageTriage(**pt) for pt in value["pages"]],
            text_pages=[Page.from_dict(p) for p in value["text_pages"]],
        )


def write_page(layout: KbLayout, doc_id: str, page: Page, engine_key: str) -> None:
    """Atomically checkpoint one finished page (blocks and tables included) with the key it is valid for."""
    value = {"engine_key": engine_key, "page": page.to_dict()}
    write_text_atomic(layout.page_checkpoint(doc_id, page.page_no), json.dumps(value, ensure_ascii=False))


def read_page(layout: KbLayout, doc_id: str, page_no: int, engine_key: str | None = None) -> Page | None:
    """The checkpointed page, or None if absent (or written under another engine key when one is given)."""
    path = layout.page_checkpoint(doc_id, page_no)
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if engine_key is not None and data.get("engine_key") != engine_key:
        return None
    return Page.from_dict(data["page"])


def write_document_record(layout: KbLayout, doc_id: str, record: ExtractRecord) -> None:
    """Checkpoint the extract stage's record of a document."""
    write_text_atomic(layout.document_checkpoint(doc_id), json.dumps(record.to_dict(), ensure_ascii=False))


def read_document_record(layout: KbLayout, doc_id: str) -> ExtractRecord | None:
    """The checkpointed record of a document, or None when it has none."""
    path = layout.document_checkpoint(doc_id)
    if not path.exists():
        return None
    return ExtractRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
