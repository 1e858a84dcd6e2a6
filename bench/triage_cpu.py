"""Triage CPU per born-digital page (``time.process_time``, in-process), optionally against another tree.

    .venv/bin/python bench/triage_cpu.py [--repeats 5] [--rounds 3] [--against OTHER/plugins]

Pages: docling's born-digital sources and pypdf's prose samples (crazyones, the two-column
LaTeX sample) of ``shared/corpus``, triaged with the default ``PdfOptions`` (tables on). Each
measurement is one process that triages every file ``--repeats`` times and keeps the fastest
pass (the least disturbed by other work on the machine). With ``--against``, processes for this
tree and for the other ``plugins`` folder take turns for ``--rounds`` rounds, and the ratio of
their median (and fastest) CPU per page is printed: the change's cost, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
PROSE = ["pypdf/resources/crazyones.pdf", "sample-files/026-latex-multicolumn/multicolumn.pdf"]


def sources(corpus: Path) -> list[Path]:
    return sorted((corpus / "docling/tests/data/pdf/sources").glob("*.pdf")) + [corpus / p for p in PROSE]


def measure(corpus: Path, repeats: int) -> dict:
    """CPU seconds per page of the fastest of ``repeats`` passes over the files, in this process."""
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.triage import triage_document

    files, options = sources(corpus), PdfOptions()
    pages = sum(triage_document(str(f), options).n_pages for f in files)  # also warms MuPDF up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for f in files:
            triage_document(str(f), options)
        best = min(best, time.process_time() - t0)
    return {"pages": pages, "cpu_s_per_page": best / pages}


def child(plugins: Path, corpus: Path, repeats: int) -> float:
    env = os.environ | {"PYTHONPATH": str(plugins)}
    cmd = [sys.executable, __file__, "--corpus", str(corpus), "--repeats", str(repeats), "--json"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["cpu_s_per_page"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", type=Path, help="another tree's plugins folder")
    ap.add_argument("--json", action="store_true", help="print this process' measurement as JSON")
    args = ap.parse_args()
    if args.against is None:
        result = measure(args.corpus, args.repeats)
        print(json.dumps(result) if args.json else f"{result['cpu_s_per_page'] * 1e3:.2f} ms/page")
        return
    mine, other = [], []
    for _ in range(args.rounds):
        other.append(child(args.against, args.corpus, args.repeats))
        mine.append(child(REPO / "plugins", args.corpus, args.repeats))
    a, b = statistics.median(mine), statistics.median(other)
    print(f"this tree {a * 1e3:.2f} ms/page, other {b * 1e3:.2f} ms/page, ratio {a / b:.3f}")
    fast, slow = min(mine), min(other)
    print(f"fastest: this tree {fast * 1e3:.2f}, other {slow * 1e3:.2f}, ratio {fast / slow:.3f}")
    runs = {"this": [round(x * 1e3, 2) for x in mine], "other": [round(x * 1e3, 2) for x in other]}
    print("runs (ms/page):", runs)


if __name__ == "__main__":
    main()
