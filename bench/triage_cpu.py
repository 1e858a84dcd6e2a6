"""Triage CPU per born-digital page (``time.process_time``, in-process), optionally against another tree.

    .venv/bin/python -m bench.triage_cpu [--repeats 5] [--rounds 5] [--against OTHER/plugins] [--parts]
                                         [--set docling|filings]

Pages: docling's born-digital sources and pypdf's prose samples (crazyones, the two-column
LaTeX sample) of ``shared/corpus``, or with ``--set filings`` the 16 SEC filings of
``rag-dev/pdfs`` (1,884 table-dense pages), triaged with the default ``PdfOptions`` (tables on). A
measurement triages every file ``--repeats`` times and keeps the fastest pass (the least
disturbed by other work on the machine). With ``--against``, this tree's ``chandra_ocr`` and the
other ``plugins`` folder's are measured in turn, each in a child process with that folder first on
``PYTHONPATH``, for ``--rounds`` rounds, and the ratio of their fastest and median CPU per page is
printed: the change's cost, measured in one run.

``--parts`` splits a page's triage CPU into MuPDF's text pass, reading the text blocks from it,
MuPDF's drawing list and the rest of the table search, beside raw PyMuPDF ``get_text()`` on the
same pages (fastest of ``--repeats`` passes each) → ``bench/results/triage_cpu_parts.json``
(``triage_cpu_parts_filings.json``). The table search is split further by reader (``readers``:
the ruled, partly ruled and unruled readers of ``tables/page.py``, timed in one more pass each),
with the pages each reader searched and those where it found a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pymupdf

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
PROSE = ["pypdf/resources/crazyones.pdf", "sample-files/026-latex-multicolumn/multicolumn.pdf"]


def sources(corpus: Path, documents: str = "docling") -> list[Path]:
    if documents == "filings":
        return sorted((corpus / "rag-dev" / "pdfs").glob("*.pdf"))
    return sorted((corpus / "docling/tests/data/pdf/sources").glob("*.pdf")) + [corpus / p for p in PROSE]


def measured_in(plugins: Path, corpus: Path, repeats: int, documents: str) -> float:
    """``measure`` in a child process whose ``chandra_ocr`` comes from ``plugins``."""
    env = os.environ | {"PYTHONPATH": str(plugins)}
    argv = [sys.executable, "-m", __spec__.name, "--corpus", str(corpus), "--repeats", str(repeats), "--raw"]
    argv += ["--set", documents]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(corpus: Path, repeats: int, documents: str = "docling") -> float:
    """CPU seconds per page of the fastest of ``repeats`` passes over the files."""
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.triage import triage_document

    files, options = [str(f) for f in sources(corpus, documents)], PdfOptions()
    pages = sum(triage_document(f, options).n_pages for f in files)  # also warms the imports up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for f in files:
            triage_document(f, options)
        best = min(best, time.process_time() - t0)
    return best / pages


def parts(corpus: Path, repeats: int, documents: str = "docling") -> dict[str, float]:
    """CPU ms per page of each part of triage and of raw ``get_text()`` (fastest of ``repeats`` passes)."""
    from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
    from chandra_ocr.tables.page import page_tables

    files = [str(f) for f in sources(corpus, documents)]
    clock = time.process_time

    def one_pass() -> dict[str, float]:
        names = ("text_pass", "text_blocks", "drawing_list", "table_search", "raw_get_text")
        spent = dict.fromkeys(names, 0.0)
        for f in files:
            with pymupdf.open(f) as doc:
                for page in doc:
                    t0 = clock()
                    textpage = page.get_textpage(flags=TEXT_FLAGS)
                    t1 = clock()
                    read = read_page(page, textpage)
                    t2 = clock()
                    page.get_cdrawings()
                    t3 = clock()
                    page_tables(page, read.blocks, textpage, read.stats.row_splits)  # draws the list again
                    t4 = clock()
                    spent["text_pass"] += t1 - t0
                    spent["text_blocks"] += t2 - t1
                    spent["drawing_list"] += t3 - t2
                    spent["table_search"] += t4 - t3 - (t3 - t2)
            t0 = clock()
            with pymupdf.open(f) as doc:
                for page in doc:
                    page.get_text()
            spent["raw_get_text"] += clock() - t0
        return spent

    n_pages = sum(pymupdf.open(f).page_count for f in files)
    one_pass()  # imports, MuPDF's first use
    best: dict[str, float] = {}
    for _ in range(repeats):
        for part, seconds in one_pass().items():
            best[part] = min(best.get(part, float("inf")), seconds)
    return {part: round(seconds * 1e3 / n_pages, 3) for part, seconds in best.items()}


READERS = ("ruled_tables", "partly_ruled_tables", "stream_tables")


def readers(corpus: Path, documents: str) -> dict[str, dict[str, float]]:
    """For each table reader ``tables/page.py`` calls: CPU ms per page (over all pages), the pages it
    searched and those where it found a table, in one pass with the readers wrapped in timers."""
    import chandra_ocr.tables.page as table_page
    from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page

    spent = {name: {"ms_per_page": 0.0, "pages_searched": 0, "pages_with_tables": 0} for name in READERS}
    originals = {name: getattr(table_page, name) for name in READERS}

    def timed(name: str):
        def reader(*args, **kwargs):
            t0 = time.process_time()
            found = list(originals[name](*args, **kwargs))
            spent[name]["ms_per_page"] += time.process_time() - t0
            spent[name]["pages_searched"] += 1
            spent[name]["pages_with_tables"] += bool(found)
            return found

        return reader

    n_pages = 0
    for name in READERS:
        setattr(table_page, name, timed(name))
    try:
        for f in sources(corpus, documents):
            with pymupdf.open(f) as doc:
                for page in doc:
                    textpage = page.get_textpage(flags=TEXT_FLAGS)
                    read = read_page(page, textpage)
                    table_page.page_tables(page, read.blocks, textpage, read.stats.row_splits)
                    n_pages += 1
    finally:
        for name, reader in originals.items():
            setattr(table_page, name, reader)
    for numbers in spent.values():
        numbers["ms_per_page"] = round(numbers["ms_per_page"] * 1e3 / n_pages, 3)
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another tree's plugins folder")
    ap.add_argument("--parts", action="store_true", help="triage CPU per part → triage_cpu_parts.json")
    ap.add_argument("--set", dest="documents", choices=("docling", "filings"), default="docling")
    ap.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)  # a child: seconds per page only
    args = ap.parse_args()
    if args.raw:
        print(measure(args.corpus, args.repeats, args.documents))
        return
    if args.parts:
        ms = parts(args.corpus, args.repeats, args.documents)
        machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "pymupdf": pymupdf.version[0]}
        filings = args.documents == "filings"
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine,
            "command": "python -m bench.triage_cpu --parts" + (" --set filings" if filings else ""),
            "repeats": args.repeats,
            "pages": sum(pymupdf.open(f).page_count for f in sources(args.corpus, args.documents)),
            "ms_per_page": ms,
            "readers": readers(args.corpus, args.documents),
            "load_average": os.getloadavg()[0],
        }
        out = REPO / "bench" / "results" / f"triage_cpu_parts{'_filings' if filings else ''}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return
    if args.against is None:
        print(f"{measure(args.corpus, args.repeats, args.documents) * 1e3:.2f} ms/page")
        return
    mine, other = [], []
    for _ in range(args.rounds):
        other.append(measured_in(args.against.resolve(), args.corpus, args.repeats, args.documents))
        mine.append(measured_in(REPO / "plugins", args.corpus, args.repeats, args.documents))
    a, b = statistics.median(mine), statistics.median(other)
    print(f"median: this tree {a * 1e3:.2f} ms/page, other {b * 1e3:.2f}, ratio {a / b:.3f}")
    fast, slow = min(mine), min(other)
    print(f"fastest: this tree {fast * 1e3:.2f} ms/page, other {slow * 1e3:.2f}, ratio {fast / slow:.3f}")
    runs = {"this": [round(x * 1e3, 2) for x in mine], "other": [round(x * 1e3, 2) for x in other]}
    print("runs (ms/page):", runs)


if __name__ == "__main__":
    main()
