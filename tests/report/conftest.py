"""A knowledge base built by a real pipeline run (bundled samples, Tesseract for OCR pages)."""

from __future__ import annotations

import shutil

import pytest
from ingested import ODD_NAME, IngestedKb

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run


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


@pytest.fixture(scope="session")
def one_document_kb(tmp_path_factory, samples) -> IngestedKb:
    """The smallest knowledge base: one born-digital document, one run, every page ``ok``."""
    landing = tmp_path_factory.mktemp("one-landing")
    shutil.copyfile(samples / "report.pdf", landing / "report.pdf")
    kb = tmp_path_factory.mktemp("one-kb")
    options = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, workers=1))
    return IngestedKb(kb, run(landing, kb, options))
