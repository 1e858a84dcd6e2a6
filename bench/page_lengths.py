"""Output lengths of real pages: the text-layer token counts of the corpus's born-digital pages.

    .venv/bin/python -m bench.page_lengths --tokenizer bench/.work/h200/models/qwen2_5_vl_7b

An OCR model writes back about what the page holds, so the text layer of born-digital pages gives
a realistic distribution of output lengths — heavy-tailed: most pages are a few hundred tokens,
dense tables and small print run to thousands. Counted with a tokenizer trained like the real
one (``bench/models/build.py``); pages with fewer than ``MIN_TOKENS`` (blank, picture-only) are
left out. Writes ``bench/results/page_lengths.json``; the GPU benchmark draws each page's
``max_tokens`` from it (``gpu_scheduling.LengthDistribution``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
# Real documents written by people (papers, manuals, reports, forms, tables), not parser edge cases.
FOLDERS = (
    "docling/tests/data/pdf/sources",
    "pdfplumber/tests/pdfs",
    "camelot/tests/files",
    "pypdf",
    "sample-files",
)
MIN_TOKENS = 20
MAX_PAGES_PER_FILE = 40  # a long manual must not stand for the whole corpus


def page_token_counts(corpus: Path, tokenizer) -> list[dict]:
    """One row per kept page: file (relative), page number, text-layer tokens."""
    import pymupdf

    rows = []
    for folder in FOLDERS:
        for path in sorted((corpus / folder).rglob("*.pdf")):
            try:
                doc = pymupdf.open(path)
            except Exception:  # broken or encrypted files say nothing about page lengths
                continue
            with doc:
                if doc.needs_pass:
                    continue
                for no, page in enumerate(doc, start=1):
                    if no > MAX_PAGES_PER_FILE:
                        break
                    try:
                        text = page.get_text()
                    except Exception:
                        continue
                    n = len(tokenizer(text)["input_ids"])
                    if n >= MIN_TOKENS:
                        rows.append({"file": str(path.relative_to(corpus)), "page": no, "tokens": n})
    return rows


def summary(tokens: list[int]) -> dict:
    s = sorted(tokens)
    q = {f"p{p}": s[min(len(s) - 1, int(p / 100 * len(s)))] for p in (10, 25, 50, 75, 90, 95, 99)}
    return {"pages": len(s), "mean": round(statistics.fmean(s), 1), "min": s[0], "max": s[-1]} | q


def main() -> None:
    from transformers import AutoTokenizer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizer", required=True, help="a model folder of bench/models/build.py")
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "page_lengths.json")
    args = p.parse_args()
    rows = page_token_counts(args.corpus, AutoTokenizer.from_pretrained(args.tokenizer))
    tokens = sorted(r["tokens"] for r in rows)
    record = {
        "what": "text-layer tokens per born-digital corpus page (pages under "
        f"{MIN_TOKENS} tokens left out, at most {MAX_PAGES_PER_FILE} pages a file)",
        "folders": FOLDERS,
        "files": len({r["file"] for r in rows}),
        "summary": summary(tokens),
        "tokens_sorted": tokens,
    }
    args.out.write_text(json.dumps(record) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "tokens_sorted"}, indent=1))


if __name__ == "__main__":
    main()
