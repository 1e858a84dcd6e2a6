"""A knowledge base built by a real pipeline run (bundled samples, Tesseract for OCR pages)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import RunSummary, run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

# A file name that must be escaped in HTML (and still be a valid file name).
ODD_NAME = 'memo <b>&"copy".pdf'


@dataclass(frozen=True)
class IngestedKb:
    kb: Path
    summary: RunSummary

    def rows(self, sql: str) -> list[tuple]:
        con = connect(KbLayout(self.kb), read_only=True)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()


@pytest.fixture(scope="session")
def ingested_kb(tmp_path_factory, samples) -> IngestedKb:
    """The samples plus a renamed copy of the scan, in batches of two pages, loaded by ``pipeline.run``."""
    landing = tmp_path_factory.mktemp("landing")
    for pdf in samples.glob("*.pdf"):
        shutil.copyfile(pdf, landing / pdf.name)
    (landing / ODD_NAME).write_bytes((samples / "scanned_memo.pdf").read_bytes() + b"\n% another copy\n")
    kb = tmp_path_factory.mktemp("kb")
    options = IngestOptions(engine="cpu", batch_pages=2, pdf=PdfOptions(settle_seconds=0, workers=2))
    return IngestedKb(kb, run(landing, kb, options))
