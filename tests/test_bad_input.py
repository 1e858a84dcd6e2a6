"""Bad input never stops a run: each bad file is quarantined with a readable reason, a file with nothing to
read is partial with its reason, the rest is ingested."""

from __future__ import annotations

import shutil

import pymupdf
import pytest
from kb_query import documents_by_name, kb_rows

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

# corpus file (relative to the corpus root) → words its quarantine reason must contain
BAD = {
    "ocrmypdf/tests/resources/invalid.pdf": "cannot open",  # corrupt (44 bytes)
    "pdfplumber/tests/pdfs/empty.pdf": "0 bytes",  # 0-byte file
    "qpdf/qpdf/qtest/qpdf/empty.pdf": "no pages",  # zero-page PDF
    "pdfplumber/tests/pdfs/password-example.pdf": "password",  # encrypted, no password given
}


@pytest.mark.corpus
def test_bad_files_are_quarantined_and_the_good_one_ingested(corpus, samples, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i, rel in enumerate(BAD):
        shutil.copy(corpus / rel, src / f"bad{i}.pdf")
    (src / "not_a_pdf.pdf").write_bytes(b"PK\x03\x04 this is a zip archive, not a PDF")
    (src / "truncated.pdf").write_bytes((samples / "report.pdf").read_bytes()[:700])
    shutil.copy(samples / "report.pdf", src / "good.pdf")

    summary = run(src, tmp_path / "kb", IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0)))

    docs = documents_by_name(tmp_path / "kb")
    pages = kb_rows(tmp_path / "kb", "SELECT DISTINCT file_name FROM pages JOIN documents USING (doc_id)")
    assert docs.pop("good.pdf") == ("ingested", None)
    assert pages == [("good.pdf",)]
    for i, words in enumerate(BAD.values()):
        status, error = docs.pop(f"bad{i}.pdf")
        assert status == "quarantined" and words in error.lower(), (i, error)
    assert docs.pop("not_a_pdf.pdf")[0] == "quarantined"
    status, error = docs.pop("truncated.pdf")
    assert status == "quarantined" and error
    assert docs == {}
    assert summary.statuses == {"ingested": 1, "quarantined": 6}


def test_a_document_without_text_on_any_page_is_partial_and_listed_for_review(samples, tmp_path):
    """Blank pages (no text layer, nothing for OCR to read) make no chunk: the document is not
    silently ``ingested`` but ``partial`` with a reason to filter on, and the browser's Review lists it."""
    from chandra_ocr.browser.queries import review

    src = tmp_path / "in"
    src.mkdir()
    with pymupdf.open() as blank:
        for _ in range(2):
            blank.new_page()
        blank.save(src / "blank.pdf")
    shutil.copy(samples / "report.pdf", src / "good.pdf")

    summary = run(src, tmp_path / "kb", IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0)))

    docs = documents_by_name(tmp_path / "kb")
    assert docs == {"good.pdf": ("ingested", None),
                    "blank.pdf": ("partial", "no text found on any page (2 pages)")}  # fmt: skip
    assert summary.statuses == {"ingested": 1, "partial": 1}
    con = connect(KbLayout(tmp_path / "kb"))
    try:
        listed = review(con)["documents"]
        found = con.execute("SELECT file_name FROM documents WHERE error LIKE 'no text found%'").fetchall()
    finally:
        con.close()
    assert [(d["file_name"], d["status"]) for d in listed] == [("blank.pdf", "partial")]
    assert found == [("blank.pdf",)]
