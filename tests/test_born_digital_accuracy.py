"""Born-digital text route vs docling's ground-truth Markdown (corpus).

Metric: order-aware word similarity, ``metrics.order_similarity`` = 1 − word-level Levenshtein
distance / the longer word count, after normalisation (NFKC, case-folded, punctuation and
Markdown/HTML syntax removed). We hold a mean ≥ 0.9 over the left-to-right documents, ≥ 0.8 for
each, and bag-of-words F1 ≥ 0.95 for each. The right-to-left samples are held only to word
F1 ≥ 0.7 (a guard against losing their text, e.g. table cells read in visual order): MuPDF's
reading order across mixed-direction lines differs from the ground truth's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from metrics import order_similarity, word_f1

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

pytestmark = pytest.mark.corpus
RIGHT_TO_LEFT = ("right_to_left_",)


@pytest.fixture(scope="module")
def scores(corpus, tmp_path_factory) -> dict[str, tuple[float, float]]:
    root = corpus / "docling" / "tests" / "data" / "pdf"
    kb = tmp_path_factory.mktemp("kb")
    run(root / "sources", kb, IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False)))
    layout = KbLayout(kb)
    con = connect(layout, read_only=True)
    try:
        docs = con.execute("SELECT doc_id, file_name, status FROM documents").fetchall()
    finally:
        con.close()
    out = {}
    for doc_id, name, status in docs:
        truth = root / "groundtruth" / f"{Path(name).stem}.md"
        if not truth.exists():
            continue
        assert status == "ingested", name
        ours = layout.export(doc_id, ".md").read_text(encoding="utf-8")
        gt = truth.read_text(encoding="utf-8")
        out[name] = (order_similarity(ours, gt), word_f1(ours, gt))
    for name, (order, f1) in sorted(out.items()):
        print(f"{name:40s} order={order:.3f} f1={f1:.3f}")
    return out


def test_left_to_right_documents_match_the_ground_truth(scores):
    held = {n: s for n, s in scores.items() if not n.startswith(RIGHT_TO_LEFT)}
    assert len(held) >= 8
    mean_order = sum(order for order, _ in held.values()) / len(held)
    assert mean_order >= 0.9, held
    for name, (order, f1) in held.items():
        assert order >= 0.8, (name, order)
        assert f1 >= 0.95, (name, f1)


def test_right_to_left_documents_keep_their_words(scores):
    held = {n: s for n, s in scores.items() if n.startswith(RIGHT_TO_LEFT)}
    assert len(held) == 3
    for name, (_order, f1) in held.items():
        assert f1 >= 0.7, (name, f1)
