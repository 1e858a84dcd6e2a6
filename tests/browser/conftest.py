"""The browser's test bench, built once per session: a knowledge base made by a real pipeline run
(the samples, a PDF whose text and table cells are script payloads, Tesseract for the scan), one
document whose page fell back (written as a load writes rows: no engine here makes a page fall back
on demand), the vector index; ``chandra-ingest serve`` on 127.0.0.1; one headless Chromium."""

from __future__ import annotations

import shutil

import pytest
from browser_kb import XSS_FILE, BrowserKb, fallback_document, xss_pdf
from cdp import Browser
from serving import serving, url_of

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.layout import KbLayout


@pytest.fixture(scope="session")
def browser_kb(tmp_path_factory, samples) -> BrowserKb:
    landing = tmp_path_factory.mktemp("browser-landing")
    for name in ("report.pdf", "scanned_memo.pdf", "broken.pdf"):
        shutil.copyfile(samples / name, landing / name)
    xss_pdf(landing / XSS_FILE)
    root = tmp_path_factory.mktemp("browser-kb")
    run(landing, root, IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0, workers=2)))
    layout = KbLayout(root)
    fallback_document(layout)
    from chandra_ocr.vector.feed import VectorFeed
    from chandra_ocr.vector.outbox import export_changes

    export_changes(layout)
    VectorFeed(None)(layout)
    return BrowserKb(root, layout)


@pytest.fixture(scope="session")
def served(browser_kb):
    """The session's ``chandra-ingest serve`` of the test bench's KB: the line with its URL."""
    with serving(browser_kb.root) as line:
        yield line


@pytest.fixture(scope="session")
def base_url(served) -> str:
    return url_of(served)


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """The one Chromium of the test run."""
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()
