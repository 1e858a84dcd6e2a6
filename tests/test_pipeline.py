"""End to end without Airflow: samples (and corpus files) → staged rows → DuckDB."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from kb_query import documents_by_name, kb_rows

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout

OPTIONS = IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0, workers=2))


def _content_hashes(kb: Path) -> dict[str, tuple]:
    """Row count and an order-independent hash of every column of every KB table."""
    con = connect(KbLayout(kb), read_only=True)
    run_columns = {"ingested_at", "first_seen", "run_id", "updated_at"}  # when and by which run
    try:
        hashes = {}
        for t in DOCUMENT_TABLES:
            left_out = [c for (c, *_) in con.execute(f"DESCRIBE {t}").fetchall() if c in run_columns]
            columns = f"* EXCLUDE ({', '.join(left_out)})" if left_out else "*"
            hashes[t] = con.execute(f"SELECT count(*), bit_xor(hash(COLUMNS({columns}))) FROM {t}").fetchall()
        return hashes
    finally:
        con.close()


@pytest.fixture(scope="module")
def sample_kb(tmp_path_factory, samples) -> tuple[Path, object]:
    kb = tmp_path_factory.mktemp("kb")
    summary = run(samples, kb, OPTIONS)
    return kb, summary


def test_samples_land_in_duckdb_with_routes_and_statuses(sample_kb):
    kb, summary = sample_kb
    docs = dict(kb_rows(kb, "SELECT file_name, status FROM documents"))
    assert docs == {
        "report.pdf": "ingested",
        "scanned_memo.pdf": "ingested",
        "mixed.pdf": "ingested",
        "broken.pdf": "quarantined",
    }
    routes = kb_rows(
        kb,
        "SELECT d.file_name, p.page_no, p.route, p.engine, p.status FROM pages p "
        "JOIN documents d USING (doc_id) ORDER BY 1, 2",
    )
    assert routes == [
        ("mixed.pdf", 1, "text", "text", "ok"),
        ("mixed.pdf", 2, "ocr", "cpu", "ok"),
        ("report.pdf", 1, "text", "text", "ok"),
        ("report.pdf", 2, "text", "text", "ok"),
        ("scanned_memo.pdf", 1, "ocr", "cpu", "ok"),
    ]
    assert summary.statuses == {"ingested": 3, "quarantined": 1}


def test_run_record_counts_the_pages_read_not_the_quarantined_files(sample_kb):
    """broken.pdf is planned as one page but never read: the run's page count is the pages table's."""
    kb, summary = sample_kb
    ((n_pages, n_docs),) = kb_rows(kb, "SELECT n_pages, n_documents FROM runs")
    assert n_pages == summary.pages == kb_rows(kb, "SELECT count(*) FROM pages")[0][0]
    assert n_docs == kb_rows(kb, "SELECT count(*) FROM documents")[0][0]


def test_run_record_is_written_with_the_last_load_and_times_it(sample_kb):
    """The record is made inside the last load's transaction: its stages include that load."""
    kb, summary = sample_kb
    ((metrics,),) = kb_rows(kb, "SELECT metrics FROM runs")
    metrics = json.loads(metrics)
    stages = metrics["stage_seconds"]
    assert set(stages) >= {"extract", "assemble", "load"} and stages["load"] > 0
    assert sum(stages.values()) <= metrics["seconds"] <= summary.seconds
    assert metrics["prompt_tokens"] == metrics["output_tokens"] == 0  # no VLM page here


def test_scanned_text_is_read_and_chunked_with_provenance(sample_kb):
    kb, _ = sample_kb
    text = " ".join(
        r[0]
        for r in kb_rows(
            kb,
            "SELECT c.text FROM chunks c JOIN documents d USING (doc_id) "
            "WHERE d.file_name = 'scanned_memo.pdf'",
        )
    )
    assert "ledgers" in text.lower() and "archive" in text.lower()
    for page_start, page_end, n_boxes in kb_rows(kb, "SELECT page_start, page_end, len(bboxes) FROM chunks"):
        assert 1 <= page_start <= page_end and n_boxes >= 1


def test_headings_become_header_paths(sample_kb):
    kb, _ = sample_kb
    paths = {
        tuple(r[0])
        for r in kb_rows(
            kb,
            "SELECT header_path FROM chunks c JOIN documents d USING (doc_id) "
            "WHERE d.file_name = 'report.pdf'",
        )
    }
    assert ("Regional Water Quality Report 2025", "Methods") in paths


def test_exports_are_written(sample_kb):
    kb, _ = sample_kb
    (doc_id,) = kb_rows(kb, "SELECT doc_id FROM documents WHERE file_name = 'report.pdf'")[0]
    layout = KbLayout(kb)
    assert "# Regional Water Quality Report 2025" in layout.export(doc_id, ".md").read_text()
    assert layout.export(doc_id, ".json").stat().st_size > 0


def test_broken_file_is_quarantined_with_a_reason_and_nothing_else(sample_kb):
    kb, _ = sample_kb
    ((status, error, n_pages),) = kb_rows(
        kb, "SELECT status, error, n_pages FROM documents WHERE file_name='broken.pdf'"
    )
    assert status == "quarantined" and error and n_pages == 0
    assert kb_rows(
        kb, "SELECT count(*) FROM pages p JOIN documents d USING (doc_id) WHERE d.file_name = 'broken.pdf'"
    ) == [(0,)]


def test_second_run_adds_nothing_and_changes_nothing(sample_kb, samples):
    kb, _ = sample_kb
    before = _content_hashes(kb)
    summary = run(samples, kb, OPTIONS)
    assert summary.discovery.new == [] and summary.batches == []
    assert _content_hashes(kb) == before


def test_original_files_are_never_modified(tmp_path, samples):
    src = tmp_path / "in"
    shutil.copytree(samples, src)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()}
    run(src, tmp_path / "kb", OPTIONS)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()} == before


def test_duplicates_are_reported_not_reprocessed(tmp_path, samples):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(samples / "report.pdf", src / "a.pdf")
    shutil.copy(samples / "report.pdf", src / "copy of a.PDF")
    summary = run(src, tmp_path / "kb", OPTIONS)
    assert len(summary.discovery.new) == 1 and len(summary.discovery.duplicates) == 1
    assert kb_rows(tmp_path / "kb", "SELECT count(*) FROM documents") == [(1,)]


def _long_pdf(path: Path, pages: int, scan: Path | None = None) -> None:
    """``pages`` pages of born-digital text, then the pages of ``scan`` (a scanned PDF) if given."""
    import pymupdf

    with pymupdf.open() as doc:
        for n in range(pages):  # one call per page (a call per line took a minute for 400 pages, busy)
            lines = [f"Page {n} line {line}: born-digital text to chunk." for line in range(40)]
            doc.new_page().insert_text((50, 60), lines, lineheight=17 / 11)  # 17 pt apart at 11 pt
        if scan is not None:
            with pymupdf.open(scan) as scanned:
                doc.insert_pdf(scanned)
        doc.save(path)


def test_a_document_whose_assembly_times_out_is_quarantined_and_the_batch_goes_on(tmp_path, samples):
    """A 401-page document (400 text pages, one scanned) is not assembled within a limit that a short one
    meets: it is quarantined with the reason, and the batch goes on: its other document loads.

    The limit lies between the two documents' assembly times measured here first (their geometric
    mean), so a busy machine, which slows both, moves it with them; the workers are forked from this
    process (the text engine's pool), as warm as the measurement, not fresh interpreters importing."""
    import dataclasses
    import math
    import time
    from datetime import UTC, datetime

    from chandra_ocr.stages import Assemble, Compress, Discover, Extract, Load, RunContext, build_run_engine
    from chandra_ocr.stages.assemble import assemble_and_write

    src = tmp_path / "in"
    src.mkdir()
    _long_pdf(src / "long.pdf", 400, scan=samples / "scanned_memo.pdf")
    shutil.copy(samples / "report.pdf", src)  # born-digital and short: assembled within the limit
    options = IngestOptions(
        engine="cpu",
        batch_pages=1000,
        pdf=PdfOptions(settle_seconds=0, compress=False, native_tables=False),
        engine_options={"dpi": 100},
    )
    ctx = RunContext.new(tmp_path / "kb", options, engine=build_run_engine(options))
    ctx.ocr.start()
    try:
        (batch,) = Discover(ctx)(src).batches
        Extract(ctx)(Compress(ctx)(batch))
    finally:
        ctx.ocr.close()
    seconds = {}
    for ref in batch.docs:  # staged under a run of their own, which nothing loads
        t0 = time.perf_counter()
        assemble_and_write(ref, ctx.layout, options, batch.engine, batch.model, "measure", datetime.now(UTC))
        seconds[Path(ref.source).name] = time.perf_counter() - t0
    assert seconds["long.pdf"] > 4 * seconds["report.pdf"], seconds  # far enough apart to set a limit between
    limit = math.sqrt(seconds["long.pdf"] * seconds["report.pdf"])
    # one worker: with a second one idle after the short document, pebble was seen to let the long
    # one run past its limit (it stops a worker only once it holds the pool channel's lock)
    hurried = dataclasses.replace(
        options, pdf=dataclasses.replace(options.pdf, doc_timeout_s=limit, workers=1)
    )
    forked = build_run_engine(IngestOptions(engine="text"))  # threads False: workers forked from here
    Assemble(dataclasses.replace(ctx, options=hurried, engine=forked))(batch)
    Load(ctx)([batch])
    docs = documents_by_name(ctx.layout.root)
    pages = kb_rows(
        ctx.layout.root, "SELECT d.file_name, count(*) FROM pages JOIN documents d USING (doc_id) GROUP BY 1"
    )
    status, error = docs["long.pdf"]
    assert status == "quarantined" and error.startswith("assembly failed:") and "limit" in error, seconds
    assert docs["report.pdf"] == ("ingested", None), seconds
    assert [name for name, n in pages] == ["report.pdf"]


def test_the_text_engine_skips_compression(tmp_path, samples):
    """The text engine renders no page: no compressed copy is made, the original is read."""
    from chandra_ocr.pdf.compress import compress_pdf

    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(samples / "mixed.pdf", src)
    probe = compress_pdf(src / "mixed.pdf", tmp_path / "probe.pdf", min_dpi=200, timeout_s=60)
    if not probe.kept:  # Ghostscript shrinks it; PyMuPDF's rewrite (no gs installed) may not
        pytest.skip(f"compression does not shrink mixed.pdf on this machine: {probe.note}")
    summary = run(src, tmp_path / "kb", IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0)))
    (doc,) = summary.batches[0].docs
    assert doc.compress_method == "none" and doc.work_pdf == doc.source
    assert not list((tmp_path / "kb" / "work").rglob("compressed.pdf"))


def test_the_cli_loads_every_load_pages_and_at_the_end(tmp_path, samples, monkeypatch):
    """Loads come after at least LOAD_PAGES written pages, and once more for the rest."""
    import chandra_ocr.pipeline as pipeline
    import chandra_ocr.stages.load as load_stage

    src = tmp_path / "in"
    src.mkdir()
    for name in ("report.pdf", "mixed.pdf"):
        shutil.copy(samples / name, src)
    loads: list[int] = []
    real = load_stage.load_documents

    def counted(layout, run_id, doc_ids, *args):
        doc_ids = list(doc_ids)
        loads.append(len(doc_ids))
        return real(layout, run_id, doc_ids, *args)

    monkeypatch.setattr(load_stage, "load_documents", counted)
    monkeypatch.setattr(pipeline, "LOAD_PAGES", 1)
    options = IngestOptions(engine="text", batch_pages=1, pdf=PdfOptions(settle_seconds=0))
    summary = run(src, tmp_path / "kb", options)
    assert len(summary.batches) == 2 and loads == [1, 1]  # one document per batch, each loaded on its own
    monkeypatch.setattr(pipeline, "LOAD_PAGES", 1000)
    loads.clear()
    for name in ("report.pdf", "mixed.pdf"):
        (src / name).write_bytes((src / name).read_bytes() + b"\n% again\n")  # new doc_ids
    summary = run(src, tmp_path / "kb", options)
    assert len(summary.batches) == 2 and loads == [2]  # both batches in one load at the end
    # the rewritten files replaced the first versions at their locations: those are forgotten once loaded
    assert kb_rows(tmp_path / "kb", "SELECT count(*) FROM documents") == [(2,)]


def test_the_next_batch_is_triaged_before_the_last_one_is_assembled(tmp_path, samples):
    """The CLI keeps its workers busy across batches (``pipeline.overlapped``): with one worker, which
    runs tasks in the order they were submitted, the second batch's document is triaged (its record
    written) before the first one's is assembled (its Markdown written); each document gets its status."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("report.pdf", "mixed.pdf", "scanned_memo.pdf"):
        shutil.copy(samples / name, src)
    options = IngestOptions(engine="text", batch_pages=1, pdf=PdfOptions(settle_seconds=0, workers=1))
    summary = run(src, tmp_path / "kb", options)
    layout = KbLayout(tmp_path / "kb")
    docs = [doc for batch in summary.batches for doc in batch.docs]
    assert len(docs) == len(summary.batches) == 3
    assembled = [layout.export(d.doc_id, ".md").stat().st_mtime_ns for d in docs]
    triaged = [layout.document_checkpoint(d.doc_id).stat().st_mtime_ns for d in docs]
    assert triaged[1] < assembled[0] and triaged[2] < assembled[1]
    statuses = kb_rows(tmp_path / "kb", "SELECT file_name, status FROM documents ORDER BY file_name")
    # the text engine finds no text in the scanned memo: partial, as any document without text
    assert statuses == [
        ("mixed.pdf", "ingested"),
        ("report.pdf", "ingested"),
        ("scanned_memo.pdf", "partial"),
    ]


def test_documents_read_from_the_text_layer_alone_go_through_assemble_like_the_others(tmp_path, samples):
    """Extract checkpoints every document, one whose every page takes the text route included (state
    ``extracted``, nothing written yet); assemble writes them all."""
    from chandra_ocr.stages import Assemble, Discover, Extract, Load, RunContext, build_run_engine

    src = tmp_path / "in"
    src.mkdir()
    for name in ("report.pdf", "mixed.pdf"):
        shutil.copy(samples / name, src)
    options = IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0, compress=False))
    ctx = RunContext.new(tmp_path / "kb", options, "r1", engine=build_run_engine(options))
    layout, engine = ctx.layout, ctx.ocr
    engine.start()
    try:
        with ctx.pool():
            (batch,) = Discover(ctx)(src).batches
            Extract(ctx)(batch)
            born, mixed = sorted(batch.docs, key=lambda d: Path(d.source).name, reverse=True)
            assert (born.status, mixed.status) == (None, None)
            assert (born.state, mixed.state) == ("extracted", "extracted")
            for doc in (born, mixed):
                assert layout.document_checkpoint(doc.doc_id).exists()
                assert not layout.staged("r1", doc.doc_id).exists()
            Assemble(ctx)(batch)
    finally:
        engine.close()
    assert (born.state, mixed.state) == ("written", "written")
    assert layout.staged("r1", born.doc_id).exists() and layout.export(born.doc_id, ".md").exists()
    Load(ctx)([batch])
    rows = kb_rows(layout.root, "SELECT file_name, status, run_id FROM documents ORDER BY file_name")
    assert rows == [("mixed.pdf", "ingested", "r1"), ("report.pdf", "ingested", "r1")]


@pytest.mark.corpus
def test_a_large_document_triaged_in_parts_ingests_as_triaged_whole(tmp_path, corpus):
    """Two workers triage a 57-page filing in parts (``extract._parts``), joined and checkpointed by
    the extract stage; the knowledge base holds the rows of one worker triaging it whole."""
    from dataclasses import replace

    from chandra_ocr.stages.extract import _parts

    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(corpus / "rag-dev" / "pdfs" / "AMCOR_2023Q2_10Q.pdf", src)
    two = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, workers=2))
    assert len(_parts([57], 2)[0]) > 1
    run(src, tmp_path / "parts", two)
    run(src, tmp_path / "whole", replace(two, pdf=replace(two.pdf, workers=1)))
    assert _content_hashes(tmp_path / "parts") == _content_hashes(tmp_path / "whole")


def test_forked_workers_write_staged_without_starting_duckdb(tmp_path, samples, monkeypatch):
    """The text and cpu engines fork their workers after deriving the Arrow schemas: no worker opens
    an in-memory DuckDB for them (each paid ~0.15 s on its first document, and DuckDB in a child forked
    from a process that ran DuckDB's threads is not something to rely on)."""
    import os

    import chandra_ocr.store.staging as staging

    calls = tmp_path / "duckdb-connects"
    real = staging.duckdb

    class Recording:
        def connect(self, *args, **kwargs):
            with calls.open("a") as f:
                f.write(f"{os.getpid()}\n")
            return real.connect(*args, **kwargs)

    monkeypatch.setattr(staging, "duckdb", Recording())
    staging.arrow_schemas.cache_clear()
    src = tmp_path / "in"
    src.mkdir()
    for name in ("report.pdf", "mixed.pdf"):
        shutil.copy(samples / name, src)
    summary = run(src, tmp_path / "kb", IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0)))
    assert summary.statuses == {"ingested": 2}
    assert calls.read_text().split() == [str(os.getpid())]  # once, here; none in the workers


_WITHOUT_AIRFLOW = """
import importlib.abc, sys

class NoAirflow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "airflow" or name.startswith("airflow."):
            raise ImportError(f"{name} is absent in this test")

sys.meta_path.insert(0, NoAirflow())
from chandra_ocr.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_core_ingests_with_airflow_absent(tmp_path, samples):
    """The library and CLI never import Airflow: a process in which importing it fails ingests."""
    kb = tmp_path / "kb"
    args = ["run", str(samples), "--kb", str(kb), "--engine", "text", "--settle-seconds", "0"]
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_AIRFLOW, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-2000:]
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    statuses = dict(con.execute("SELECT status, count(*) FROM documents GROUP BY ALL").fetchall())
    con.close()
    # the text engine reads no scan: scanned_memo.pdf has no text on any page
    assert statuses == {"ingested": 2, "partial": 1, "quarantined": 1}, statuses
