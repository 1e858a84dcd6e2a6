"""Small knowledge bases for tests: documents of given chunk texts, written and loaded for real."""

from __future__ import annotations

from datetime import UTC, datetime

from chandra_ocr.document import Block, Chunk, Document, Page
from chandra_ocr.store.duckdb_store import connect, load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged

ASSEMBLED = datetime(2026, 1, 1, tzinfo=UTC)  # the staged rows' own timestamp (assembly time)


def write_document(layout: KbLayout, doc_id: str, texts: list[str]) -> None:
    """Stage the rows of a one-page document whose chunks are ``texts`` (chunk_id ``<doc_id>-<text>``)."""
    blocks = [Block(i, "text", (10, 10 + 20 * i, 100, 25 + 20 * i), t) for i, t in enumerate(texts)]
    doc = Document(
        doc_id,
        f"/in/{doc_id}.pdf",
        f"{doc_id}.pdf",
        100,
        n_pages=1,
        pages=[Page(1, 612, 792, "text", "text", blocks=blocks)],
    )
    chunks = [
        Chunk(f"{doc_id}-{t}", doc_id, i, "text", t, 1, ("H",), 1, 1, ((1, 1.0, 2.0, 3.0, 4.0),))
        for i, t in enumerate(texts)
    ]
    write_staged(layout, "r", doc_id, document_rows(doc, chunks, run_id="r", now=ASSEMBLED))


def ingest(layout: KbLayout, docs: dict[str, list[str]]) -> None:
    """Write and load ``docs`` (doc_id → chunk texts) into the knowledge base."""
    for doc_id, texts in docs.items():
        write_document(layout, doc_id, texts)
    load_documents(layout, "r", list(docs))


def kb_chunks(layout: KbLayout) -> dict[str, str]:
    """chunk_id → text of the knowledge base's current chunks."""
    con = connect(layout, read_only=True)
    try:
        return dict(con.execute("SELECT chunk_id, text FROM chunks").fetchall())
    finally:
        con.close()
