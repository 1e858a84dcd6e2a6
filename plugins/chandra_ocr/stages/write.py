"""A finished document → its chunks, staged rows and Markdown/JSON exports.

Called by the assemble stage for documents rebuilt from their checkpoints.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import NamedTuple

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.chunking import chunk_document
from chandra_ocr.config import IngestOptions
from chandra_ocr.document import DocStatus, Document
from chandra_ocr.manifest import DocRef
from chandra_ocr.store.atomic import write_text_atomic
from chandra_ocr.store.exports import document_json, document_markdown
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged


class Written(NamedTuple):
    """What writing one document tells the manifest."""

    status: DocStatus
    prompt_tokens: int
    output_tokens: int
    error: str | None = None  # why it is partial or quarantined


def new_document(ref: DocRef, engine: str, model: str | None) -> Document:
    """The document of ``ref`` under this pipeline version, before any page is added."""
    return Document(
        ref.doc_id,
        ref.source,
        os.path.basename(ref.source),
        ref.bytes,
        compressed_bytes=ref.compressed_bytes,
        compress_method=ref.compress_method,
        pipeline_version=PIPELINE_VERSION,
        engine=engine,
        model=model,
    )


def write_document(
    doc: Document, layout: KbLayout, options: IngestOptions, run_id: str, now: datetime
) -> Written:
    """Chunk ``doc``, stage its rows and (unless quarantined) its exports; returns its status and tokens."""
    chunks = chunk_document(doc, options.chunk) if doc.status != "quarantined" else []
    write_staged(layout, run_id, doc.doc_id, document_rows(doc, chunks, run_id=run_id, now=now))
    if doc.status != "quarantined":
        write_text_atomic(layout.export(doc.doc_id, ".md"), document_markdown(doc))
        write_text_atomic(layout.export(doc.doc_id, ".json"), document_json(doc))
    prompt = sum(p.prompt_tokens for p in doc.pages)
    return Written(doc.status, prompt, sum(p.output_tokens for p in doc.pages), doc.error)
