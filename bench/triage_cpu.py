"""Triage CPU per born-digital page (``time.process_time``, in-process), optionally against another tree.

    .venv/bin/python bench/triage_cpu.py [--repeats 5] [--rounds 5] [--against OTHER/plugins]

Pages: docling's born-digital sources and pypdf's prose samples (crazyones, the two-column
LaTeX sample) of ``shared/corpus``, triaged with the default ``PdfOptions`` (tables on). A
measurement triages every file ``--repeats`` times and keeps the fastest pass (the least
disturbed by other work on the machine). With ``--against``, this tree's ``chandra_ocr`` and the
other ``plugins`` folder's are imported in turn into this one process (modules dropped between
them) for ``--rounds`` rounds, and the ratio of their fastest and median CPU per page is
printed: the change's cost, measured in one run.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
PROSE = ["pypdf/resources/crazyones.pdf", "sample-files/026-latex-multicolumn/multicolumn.pdf"]


def sources(corpus: Path) -> list[Path]:
    return sorted((corpus / "docling/tests/data/pdf/sources").glob("*.pdf")) + [corpus / p for p in PROSE]


def use(plugins: Path) -> None:
    """Make ``chandra_ocr`` import from ``plugins`` (dropping any copy already imported)."""
    for name in [m for m in sys.modules if m == "chandra_ocr" or m.startswith("chandra_ocr.")]:
        del sys.modules[name]
    sys.path[:] = [str(plugins)] + [p for p in sys.path if not p.endswith("plugins")]
    importlib.invalidate_caches()


def measure(corpus: Path, repeats: int) -> float:
    """CPU seconds per page of the fastest of ``repeats`` passes over the files."""
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.triage import triage_document

    files, options = [str(f) for f in sources(corpus)], PdfOptions()
    pages = sum(triage_document(f, options).n_pages for f in files)  # also warms the imports up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for f in files:
            triage_document(f, options)
        best = min(best, time.process_time() - t0)
    return best / pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another tree's plugins folder")
    args = ap.parse_args()
    if args.against is None:
        use(REPO / "plugins")
        print(f"{measure(args.corpus, args.repeats) * 1e3:.2f} ms/page")
        return
    mine, other = [], []
    for _ in range(args.rounds):
        use(args.against.resolve())
        other.append(measure(args.corpus, args.repeats))
        use(REPO / "plugins")
        mine.append(measure(args.corpus, args.repeats))
    a, b = statistics.median(mine), statistics.median(other)
    print(f"median: this tree {a * 1e3:.2f} ms/page, other {b * 1e3:.2f}, ratio {a / b:.3f}")
    fast, slow = min(mine), min(other)
    print(f"fastest: this tree {fast * 1e3:.2f} ms/page, other {slow * 1e3:.2f}, ratio {fast / slow:.3f}")
    runs = {"this": [round(x * 1e3, 2) for x in mine], "other": [round(x * 1e3, 2) for x in other]}
    print("runs (ms/page):", runs)


if __name__ == "__main__":
    main()
