"""The pipeline on the real vLLM engine: invalid pages retry, fall back, and the document is ingested."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pymupdf
import pytest
from vlm_checks import preset_swapped

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.ocr.presets import Sampling
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _scan_with_caption(path, scan) -> None:
    """A scanned page plus a short real text line: OCR route (full-page image), text layer non-empty."""
    with pymupdf.open(scan) as src:
        pix = src[0].get_pixmap(dpi=100)
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_image(page.rect, pixmap=pix)
    page.insert_text((72, 400), "Scanned memo, archive copy", fontsize=9)
    doc.save(path)


def test_length_failures_retry_then_fall_back_and_the_document_is_ingested(vllm_engine, samples, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(samples / "scanned_memo.pdf", src / "memo.pdf")  # no text layer → CPU fallback
    _scan_with_caption(src / "captioned.pdf", samples / "scanned_memo.pdf")  # → text-layer fallback
    always_cut = Sampling(max_tokens=2, temperatures=(0.0, 0.4, 0.8), stop=())
    with preset_swapped(vllm_engine, dataclasses.replace(vllm_engine.preset, sampling=always_cut)):
        summary = run(
            src, tmp_path / "kb", IngestOptions(pdf=PdfOptions(settle_seconds=0)), engine=vllm_engine
        )

    assert summary.statuses == {"ingested": 2}
    con = connect(KbLayout(tmp_path / "kb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT d.file_name, p.route, p.engine, p.status, p.attempts, p.finish_reason, "
            "p.fallback_reason, p.output_tokens FROM pages p JOIN documents d USING (doc_id) ORDER BY 1"
        ).fetchall()
        (metrics,) = con.execute("SELECT metrics FROM runs").fetchall()[0]
        chunks = dict(
            con.execute(
                "SELECT file_name, count(*) FROM chunks JOIN documents USING (doc_id) GROUP BY 1"
            ).fetchall()
        )
    finally:
        con.close()
    assert rows == [
        ("captioned.pdf", "ocr", "text", "fallback", 3, "length", "length", 6),
        ("memo.pdf", "ocr", "cpu", "fallback", 3, "length", "length", 6),
    ]
    assert chunks["captioned.pdf"] >= 1 and chunks["memo.pdf"] >= 1
    run_metrics = json.loads(metrics)  # per run: pages/s, tokens/s and the KV capacity vLLM reported
    assert run_metrics["output_tokens"] == 12 and run_metrics["output_tokens_per_s"] > 0
    assert run_metrics["pages_per_s"] > 0 and run_metrics["kv_cache_tokens"] > 0
