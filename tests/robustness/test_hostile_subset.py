"""A representative handful of the hostile corpus through the whole pipeline (the full sweep is
``bench/hostile_corpus.py``): the run finishes, and every file ends ingested, partial or
quarantined with the reason its defect calls for."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from kb_query import documents_by_name, kb_rows
from pace import scaled

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.ocr.registry import build_engine
from chandra_ocr.pipeline import run
from chandra_ocr.stages import Assemble, Compress, Discover, Extract, Load, RunContext

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

# corpus file → (status, pattern its reason must match; None: no reason), from what the file is
# (see the corpus MANIFEST.tsv).
EXPECTED = {
    # decompression bomb (pdf.js bomb_giant): MuPDF decodes it within the worker's memory cap
    "pdfjs/test/pdfs/bomb_giant.pdf": ("ingested", None),
    # giant pages: 35000 px JBIG2 on an 8400 pt page, an enormous MediaBox; rendered at the pixel cap
    "ocrmypdf/tests/resources/hugemono.pdf": ("ingested", None),
    "ocrmypdf/tests/resources/enormous.pdf": ("ingested", None),
    # cyclic Type3 content streams: MuPDF's recursion guard holds; the page's only glyphs are those
    # Type3 ones, so nothing is read from it
    "pdfjs/test/pdfs/ContentStreamCycleType3insideType3.pdf": (
        "partial",
        r"^no text found on any page \(1 page\)$",
    ),
    # page trees with a cycle: the affected page fails, with the cycle named
    "format-corpus/pdf-handbuilt-test-corpus/T02-02_002_page-tree-kids-links-recursive.pdf": (
        "partial",
        r"1 of 1 pages .*cycle in page tree",
    ),
    "pdfjs/test/pdfs/Pages-tree-refs.pdf": ("partial", r"1 of 2 pages .*page 2: .*cycle in page tree"),
    # an xref chain that loops: nothing to read
    "qpdf/qpdf/qtest/qpdf/append-xref-loop.pdf": ("quarantined", r"no pages"),
    # fuzzed files: one beyond repair, one that MuPDF repairs (to a page with no text left on it)
    "pdfjs/test/pdfs/poppler-742-0-fuzzed.pdf": ("quarantined", r"^cannot open"),
    "pdfjs/test/pdfs/PDFBOX-3148-2-fuzzed.pdf": ("partial", r"^no text found on any page \(1 page\)$"),
    "pdfplumber/tests/pdfs/empty.pdf": ("quarantined", r"^empty file \(0 bytes\)$"),
    "qpdf/qpdf/qtest/qpdf/bad1.pdf": (
        "quarantined",
        r"^not a PDF \(no %PDF header\)",
    ),  # the 5 bytes "oops\n"
    "qpdf/qpdf/qtest/qpdf/empty.pdf": ("quarantined", r"^document has no pages$"),
    # encrypted: AES-256 R6 with its user password given → read; an unknown password → quarantined
    "qpdf/qpdf/qtest/qpdf/enc-XI-R6,V5,U=view,O=master.pdf": ("ingested", None),
    "format-corpus/pdfCabinetOfHorrors/encryption_openpassword.pdf": (
        "quarantined",
        r"^encrypted: a password is required",
    ),
}


def _name(i: int, rel: str) -> str:
    return f"{i:02d}-{Path(rel).name}"  # two corpus files are called empty.pdf


@pytest.mark.timeout(900)
def test_hostile_files_end_with_a_status_and_the_right_reason(corpus: Path, tmp_path: Path):
    src = tmp_path / "in"
    src.mkdir()
    for i, rel in enumerate(EXPECTED):
        shutil.copy(corpus / rel, src / _name(i, rel))
    secrets = tmp_path / "passwords.json"
    encrypted = next(i for i, rel in enumerate(EXPECTED) if rel.endswith("U=view,O=master.pdf"))
    secrets.write_text(json.dumps({_name(encrypted, list(EXPECTED)[encrypted]): "view"}), encoding="utf-8")
    pdf = PdfOptions(settle_seconds=0, doc_timeout_s=120, passwords_file=str(secrets))
    options = IngestOptions(engine="cpu", pdf=pdf, engine_options={"dpi": 100})  # low dpi: quick OCR

    bound = scaled(600)
    started = time.monotonic()
    summary = run(src, tmp_path / "kb", options)
    elapsed = time.monotonic() - started

    docs = documents_by_name(tmp_path / "kb")
    ((potato,),) = kb_rows(
        tmp_path / "kb",
        "SELECT string_agg(b.text, ' ') FROM blocks b JOIN documents d USING (doc_id) "
        "WHERE d.file_name LIKE '%enc-XI-R6,V5,U=view,O=master.pdf'",
    )
    assert len(docs) == len(EXPECTED)
    for i, (rel, (status, reason)) in enumerate(EXPECTED.items()):
        got_status, got_reason = docs[_name(i, rel)]
        assert got_status == status, (rel, got_status, got_reason)
        if reason is None:
            assert got_reason is None, (rel, got_reason)
        else:
            assert got_reason and re.search(reason, got_reason), (rel, got_reason)
    assert "Potato" in potato  # qpdf's encryption test files say "Potato N"
    assert sum(summary.statuses.values()) == len(EXPECTED)
    assert elapsed < bound, "the time limits must keep a hostile batch short"


@pytest.mark.timeout(300)
def test_a_page_beyond_the_worker_memory_cap_is_refused_with_a_reason(corpus: Path, tmp_path: Path):
    """With a small address-space cap, rendering the enormous page fails in its worker (MemoryError, not
    the OOM killer), the batch goes on and the document says why. Stage by stage, the capped workers
    doing only the extract stage: planning and assembly import pyarrow, which does not fit in 300 MB
    of address space."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(corpus / "ocrmypdf/tests/resources/enormous.pdf", src / "enormous.pdf")
    shutil.copy(corpus / "derived/phototest.scan.pdf", src / "phototest.pdf")
    options = IngestOptions(
        engine="cpu", pdf=PdfOptions(settle_seconds=0, memory_limit_mb=300, compress=False)
    )
    engine = build_engine("cpu", options.preset)
    roomy = dataclasses.replace(options, pdf=dataclasses.replace(options.pdf, memory_limit_mb=3072))
    capped = RunContext.new(tmp_path / "kb", options, "memory-cap", engine=engine)
    ctx = dataclasses.replace(capped, options=roomy)
    layout = ctx.layout
    engine.start()
    try:
        (batch,) = Discover(ctx)(src).batches
        Extract(capped)(Compress(capped)(batch))
    finally:
        engine.close()
    Assemble(ctx)(batch)
    Load(ctx)([batch])

    docs = documents_by_name(layout.root)
    assert docs["phototest.pdf"] == ("ingested", None)
    status, reason = docs["enormous.pdf"]
    assert status == "partial" and re.search(
        r"page 1: render: .*ran out of memory \(worker limit 300 MB\)", reason
    )


@pytest.mark.timeout(300)
def test_a_page_that_renders_forever_is_killed_at_the_page_time_limit(
    corpus: Path, tmp_path: Path, ingest_path
):
    """pdf.js's operator_list_cycle draws a form that draws itself: MuPDF ignores Python signals while it
    renders, so only killing the worker process ends it (here after 2 s on a quiet machine, scaled with
    its slowdown on a busy one, so that the other page renders within it; at 300 dpi it runs for
    minutes). Through the CLI runner and through the Airflow operators."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(corpus / "pdfjs/test/pdfs/operator_list_cycle.pdf", src / "cycle.pdf")
    shutil.copy(corpus / "derived/phototest.scan.pdf", src / "phototest.pdf")
    limit = round(scaled(2.0), 1)
    pdf = PdfOptions(settle_seconds=0, page_timeout_s=limit, compress=False)

    options = IngestOptions(engine="cpu", pdf=pdf)
    bound = scaled(120)
    started = time.monotonic()
    ingest_path(src, tmp_path / "kb", options, build_engine("cpu", options.preset))

    docs = documents_by_name(tmp_path / "kb")
    assert docs["phototest.pdf"] == ("ingested", None)
    status, reason = docs["cycle.pdf"]
    assert status == "partial" and re.search(
        rf"page 1: render: rendering page 1 exceeded its {re.escape(f'{limit:g}')} s limit", reason
    )
    assert time.monotonic() - started < bound
