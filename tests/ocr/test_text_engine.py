"""The text engine on real corpus PDFs: text against docling's ground truth, failures as results."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from metrics import word_f1

from chandra_ocr.document import PageRequest
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.text_engine import TextEngine

pytestmark = pytest.mark.corpus

DOCLING = "docling/tests/data/pdf"


def _requests(path: Path, doc_id: str) -> list[PageRequest]:
    doc = pymupdf.open(path)
    return [PageRequest(doc_id, p.number + 1, str(path), p.rect.width, p.rect.height) for p in doc]


@pytest.mark.parametrize("name", ["multi_page", "2305.03393v1-pg9", "right_to_left_01"])
def test_text_matches_groundtruth_and_boxes_lie_on_the_page(corpus: Path, name: str) -> None:
    path = corpus / DOCLING / "sources" / f"{name}.pdf"
    requests = _requests(path, name)
    engine = TextEngine()
    assert isinstance(engine, OcrEngine) and engine.name == "text" and engine.model is None
    engine.start()
    try:
        results = list(engine.run(iter(requests)))
    finally:
        engine.close()
    assert [(r.doc_id, r.page_no) for r in results] == [(q.doc_id, q.page_no) for q in requests]
    for request, result in zip(requests, results, strict=True):
        assert (result.status, result.finish_reason, result.engine) == ("ok", "stop", "text")
        assert result.blocks and result.text == "\n\n".join(b.text for b in result.blocks)
        for b in result.blocks:
            x0, y0, x1, y1 = b.bbox
            assert 0 <= x0 <= x1 <= request.width_pt + 1 and 0 <= y0 <= y1 <= request.height_pt + 1
    truth = (corpus / DOCLING / "groundtruth" / f"{name}.md").read_text()
    assert word_f1("\n".join(r.text for r in results), truth) >= 0.8
    assert engine.metrics() == {"pages": len(requests), "failed": 0}


def test_empty_pages_are_ok_and_failures_are_results(corpus: Path) -> None:
    scan = corpus / "derived/eurotext.scan.pdf"
    locked = corpus / "pdfplumber/tests/pdfs/password-example.pdf"
    requests = [
        PageRequest("scan", 1, str(scan), 0, 0),
        PageRequest("scan", 2, str(scan), 0, 0),
        PageRequest("locked", 1, str(locked), 0, 0),
        PageRequest("missing", 1, str(corpus / "no/such.pdf"), 0, 0),
    ]
    engine = TextEngine()
    results = {(r.doc_id, r.page_no): r for r in engine.run(requests)}
    assert results[("scan", 1)].status == "ok" and results[("scan", 1)].blocks == []
    for key, needle in [
        (("scan", 2), "does not exist"),
        (("locked", 1), "password"),
        (("missing", 1), "cannot"),
    ]:
        assert results[key].status == "failed" and needle in results[key].error
    assert engine.metrics() == {"pages": 4, "failed": 3}
    unlocked = TextEngine(passwords={"locked": "test"}).read(requests[2])
    assert unlocked.status == "ok" and unlocked.blocks
    engine.close()
