"""Where things live inside a knowledge-base folder (``--kb DIR``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SHARD_TABLES = ("documents", "pages", "blocks", "tables", "table_cells", "chunks")


@dataclass(frozen=True)
class KbLayout:
    """Paths of one knowledge base: the DuckDB file, Parquet shards, work files and exports."""

    root: Path

    @property
    def duckdb_path(self) -> Path:
        return self.root / "kb.duckdb"

    def shard(self, table: str, doc_id: str) -> Path:
        """The deterministic Parquet shard of one document for one table."""
        return self.root / "parquet" / table / f"{doc_id}.parquet"

    def work_dir(self, doc_id: str) -> Path:
        """Scratch space of one document: compressed copy and page checkpoints."""
        return self.root / "work" / doc_id[:2] / doc_id

    def compressed_pdf(self, doc_id: str) -> Path:
        return self.work_dir(doc_id) / "compressed.pdf"

    def page_checkpoint(self, doc_id: str, page_no: int) -> Path:
        return self.work_dir(doc_id) / "pages" / f"{page_no:05d}.json"

    def document_checkpoint(self, doc_id: str) -> Path:
        """The document-level record (page count, quarantine reason) written by the extract stage."""
        return self.work_dir(doc_id) / "document.json"

    def export(self, doc_id: str, suffix: str) -> Path:
        """Per-document exports: ``.md`` (Markdown) and ``.json`` (the document model)."""
        return self.root / "documents" / f"{doc_id}{suffix}"

    def outbox(self) -> Path:
        """Vector-feed outbox: one Parquet file per export batch."""
        return self.root / "outbox"
