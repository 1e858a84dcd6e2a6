"""The vector feed end to end on real PDFs: ingest → ``chandra-ingest feed`` (outbox export, embeddings
in the index, progress on stderr) → search; forgetting a document removes its vectors. Real DuckDB,
the real bundled model, the real CLI in a child process."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from chandra_ocr.cli import main
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect, forget_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.table_view import resolve_document
from chandra_ocr.vector.consumer import apply_outbox, search_index
from chandra_ocr.vector.index import count, open_index
from chandra_ocr.vector.outbox import export_changes

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

SOURCES = "docling/tests/data/pdf/sources"
FILES = ["multi_page.pdf", "redp5110_sampled.pdf", "2305.03393v1-pg9.pdf", "amt_handbook_sample.pdf"]
# A sentence of multi_page.pdf as docling's ground truth (groundtruth/multi_page.md) gives it.
KNOWN = (
    "Patented in 1868 by Christopher Latham Sholes, the typewriter revolutionized written "
    "communication by enabling people to produce legible, professional documents more efficiently."
)
OPTIONS = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False, workers=2))


@pytest.fixture(scope="module")
def fed(corpus, tmp_path_factory):
    """(layout, the feed's JSON, its stderr): the corpus files ingested, then ``chandra-ingest feed``."""
    src = tmp_path_factory.mktemp("src")
    for name in FILES:
        shutil.copy(corpus / SOURCES / name, src / name)
    layout = KbLayout(tmp_path_factory.mktemp("kb"))
    run(src, layout.root, OPTIONS)
    done = subprocess.run(
        [sys.executable, "-m", "chandra_ocr.cli", "feed", "--kb", str(layout.root), "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return layout, json.loads(done.stdout), done.stderr


def _kb_chunks(layout: KbLayout, doc_id: str | None = None) -> int:
    con = connect(layout, read_only=True)
    try:
        sql = "SELECT count(*) FROM chunks WHERE ?::VARCHAR IS NULL OR doc_id = ?"
        return con.execute(sql, [doc_id, doc_id]).fetchall()[0][0]
    finally:
        con.close()


def test_every_chunk_gets_one_vector_and_a_replay_changes_nothing(fed, embedder):
    layout, feed, _ = fed
    counts = feed["index_counts"]
    n_chunks = _kb_chunks(layout)
    assert 50 <= n_chunks <= 600
    assert (counts["files"], counts["upserts"], counts["deletes"]) == (1, feed["upserts"], 0)
    assert counts["vectors"] == n_chunks == counts["embedded"]
    again = apply_outbox(layout, layout.root / "vector", embedder=embedder)
    assert (again.files, again.embedded, again.vectors) == (0, 0, n_chunks)


def test_the_feed_shows_its_progress_on_stderr(fed):
    """The last progress line counts every chunk, with the rate; intermediate ones come every 10 s."""
    layout, feed, stderr = fed
    lines = [line for line in stderr.splitlines() if "chandra_ocr.vector.consumer: vector feed" in line]
    n = feed["upserts"]
    assert lines and re.search(rf": {n}/{n} chunks, [0-9.]+ chunks/s, ETA 0s$", lines[-1]), stderr[-2000:]


def test_a_known_sentence_finds_its_chunk_in_the_top_3(fed, embedder):
    layout, _, _ = fed
    hits = search_index(layout.root / "vector", KNOWN, embedder, k=3)
    assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score
    match = [h for h in hits if "Christopher Latham Sholes" in h.text]
    assert match, [h.text[:80] for h in hits]
    assert match[0].file_name == "multi_page.pdf" and match[0].page_start >= 1
    assert match[0].score > 0.5


def test_cli_search_prints_doc_pages_and_score(fed):
    layout, _, _ = fed
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            main(["search", "--kb", str(layout.root), "who patented the typewriter in 1868?", "-k", "3"]) == 0
        )
    first = out.getvalue().splitlines()[0]
    assert first.startswith("1. 0.") and "multi_page.pdf" in first and "p. " in first


def test_forgetting_a_document_deletes_its_vectors(fed, embedder):
    layout, _, _ = fed
    con = connect(layout, read_only=True)
    try:
        doc_id = resolve_document(con, "2305.03393v1-pg9.pdf")
    finally:
        con.close()
    n_doc = _kb_chunks(layout, doc_id)
    index = open_index(layout.root / "vector", embedder.name, embedder.dim, read_only=True)
    try:
        assert count(index, doc_id) == n_doc > 0
        total = count(index)
    finally:
        index.close()
    forget_documents(layout, [doc_id])
    assert _kb_chunks(layout, doc_id) == 0
    export = export_changes(layout)
    assert (export.upserts, export.deletes) == (0, n_doc)
    counts = apply_outbox(layout, layout.root / "vector", embedder=embedder)
    assert (counts.files, counts.deletes, counts.vectors) == (1, n_doc, total - n_doc)
    index = open_index(layout.root / "vector", embedder.name, embedder.dim, read_only=True)
    try:
        assert count(index, doc_id) == 0
    finally:
        index.close()
