"""Heading and running-header labels of the text route against docling's ground truth.

    .venv/bin/python -m bench.headings_accuracy [--corpus DIR] [--out F]

For each docling born-digital PDF with a ground-truth JSON, the text route's blocks
(``pdf/triage.py``) labelled ``section_header``/``title`` are our headings, those labelled
``page_header``/``page_footer`` our running headers. A heading is right when its normalised text
(NFKC, case-folded, whitespace collapsed) is, holds or is held by a ground-truth ``section_header``
or ``title`` text of the same document; precision = right / ours, recall = ground-truth headings
matched / ground-truth headings. Headings taken for running headers are counted too: ours labelled
as headings whose text the ground truth has as ``page_header``/``page_footer``.
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

from chandra_ocr.config import PdfOptions
from chandra_ocr.pdf.triage import triage_document

REPO = Path(__file__).resolve().parents[1]
DOCLING = "docling/tests/data/pdf/"
HEADINGS = {"section_header", "title"}
RUNNING = {"page_header", "page_footer"}


def norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _found(text: str, pool: set[str]) -> bool:
    """Whether ``text`` is, holds or is held by a text of ``pool`` (4 characters at least)."""
    return bool(text) and any(
        text == t or (len(text) >= 4 and text in t) or (len(t) >= 4 and t in text) for t in pool
    )


def score(corpus: Path) -> dict:
    per_doc = {}
    totals = {"ours": 0, "right": 0, "truth": 0, "matched": 0, "running_as_heading": 0}
    for truth in sorted((corpus / DOCLING / "groundtruth").glob("*.json")):
        pdf = corpus / DOCLING / "sources" / f"{truth.stem}.pdf"
        if not pdf.exists():
            continue
        texts = json.loads(truth.read_text())["texts"]
        heads = {norm(t["text"]) for t in texts if t["label"] in HEADINGS}
        running = {norm(t["text"]) for t in texts if t["label"] in RUNNING}
        triage = triage_document(str(pdf), PdfOptions())
        ours = [norm(b.text) for blocks in triage.text_blocks.values() for b in blocks if b.label in HEADINGS]
        right = sum(_found(h, heads) for h in ours)
        matched = sum(_found(h, set(ours)) for h in heads)
        as_heading = sum(_found(h, running) and not _found(h, heads) for h in ours)
        per_doc[pdf.name] = {"ours": len(ours), "right": right, "truth": len(heads), "matched": matched}
        for k, v in (("ours", len(ours)), ("right", right), ("truth", len(heads)), ("matched", matched)):
            totals[k] += v
        totals["running_as_heading"] += as_heading
    return {
        "precision": round(totals["right"] / totals["ours"], 3) if totals["ours"] else None,
        "recall": round(totals["matched"] / totals["truth"], 3) if totals["truth"] else None,
        "totals": totals,
        "documents": per_doc,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "headings_accuracy.json")
    args = ap.parse_args()
    result = score(args.corpus.resolve())
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("precision", "recall", "totals")}))


if __name__ == "__main__":
    main()
