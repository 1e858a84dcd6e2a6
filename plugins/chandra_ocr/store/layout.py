"""Where things live inside a knowledge-base folder (``--kb DIR``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCUMENT_TABLES = ("documents", "pages", "blocks", "tables", "table_cells", "chunks")


@dataclass(frozen=True)
class KbLayout:
    """Paths of one knowledge base: kb.duckdb, the Parquet dataset, staged rows, work files, exports."""

    root: Path

    @property
    def duckdb_path(self) -> Path:
        return self.root / "kb.duckdb"

    @property
    def write_lock(self) -> Path:
        """The lock file that serialises writers (loads, forget, compaction, feed exports)."""
        return self.root / ".write.lock"

    @property
    def next_duckdb_path(self) -> Path:
        """The next kb.duckdb, built by a writer and renamed onto ``duckdb_path`` when complete."""
        return self.root / ".kb.duckdb.next"

    def dataset_dir(self, table: str) -> Path:
        """The loaded rows of ``table``: a few large Parquet files listed in kb.duckdb's ``kb_files``."""
        return self.root / "parquet" / table

    def snapshot_dir(self, table: str) -> Path:
        """Second names (hard links) of the dataset files, the ones kb.duckdb's views read: kept for a
        while after compaction replaced a file, for readers of an older kb.duckdb."""
        return self.root / "snapshots" / table

    @property
    def staging_root(self) -> Path:
        """One folder per run (``staging_dir``): staged rows and the run's owner record."""
        return self.root / "staging"

    def staging_dir(self, run_id: str) -> Path:
        """What one run staged (store/staging.py) and its owner record (store/claims.py): no run reads
        or deletes another's."""
        return self.staging_root / run_folder(run_id)

    def staged(self, run_id: str, doc_id: str) -> Path:
        """The rows of one document for every table, staged by ``run_id`` and kept until it loads them."""
        return self.staging_dir(run_id) / f"{doc_id}.arrows"

    @property
    def claims_dir(self) -> Path:
        """Which run works on which document (store/claims.py): one small file per claimed document."""
        return self.root / "claims"

    def claim(self, doc_id: str) -> Path:
        return self.claims_dir / doc_id

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

    def source_copy(self, doc_id: str) -> Path:
        """The copy of a remote source object that the batch reads (deleted once it is loaded)."""
        return self.work_dir(doc_id) / "source.pdf"

    @property
    def fetch_spool(self) -> Path:
        """Where remote objects are streamed while they are hashed, before they have a doc_id."""
        return self.root / "work" / "fetch"

    @property
    def source_entries(self) -> Path:
        """What discovery saw per location: size, mtime, ETag → doc_id (sources/entries_table.py)."""
        return self.root / "sources" / "entries.parquet"

    def export(self, doc_id: str, suffix: str) -> Path:
        """Per-document exports: ``.md`` (Markdown) and ``.json`` (the document model)."""
        return self.root / "documents" / f"{doc_id}{suffix}"

    def outbox(self) -> Path:
        """Vector-feed outbox: one Parquet file per export batch."""
        return self.root / "outbox"


def run_folder(run_id: str) -> str:
    """A run id as a folder name: Airflow's run ids (``manual__2026-01-01T00:00:00+00:00``) pass as they
    are; any other character, and a leading dot, become ``_``."""
    return re.sub(r"^\.|[^A-Za-z0-9_.:+~-]", "_", run_id) or "_"
