"""Bad input never stops a run: each bad file is quarantined with a readable reason, the rest is ingested."""

from __future__ import annotations

import shutil

import pytest
from kb_query import documents_by_name, kb_rows

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run

pytestmark = pytest.mark.corpus

# corpus file (relative to the corpus root) → words its quarantine reason must contain
BAD = {
    "ocrmypdf/tests/resources/invalid.pdf": "cannot open",  # corrupt (44 bytes)
    "pdfplumber/tests/pdfs/empty.pdf": "0 bytes",  # 0-byte file
    "qpdf/qpdf/qtest/qpdf/empty.pdf": "no pages",  # zero-page PDF
    "pdfplumber/tests/pdfs/password-example.pdf": "password",  # encrypted, no password given
}


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
