"""Born-digital throughput: the whole pipeline (discover → DuckDB) vs raw PyMuPDF vs pymupdf4llm.

    .venv/bin/python bench/born_digital.py [--pages 200] [--steady-pages 2000] [--repeats 3]
                                           [--corpus DIR] [--out F] [--work DIR]

Uses the docling born-digital PDFs of the corpus, copied (each copy made unique by an appended
PDF comment, so its doc_id differs) until at least ``--pages`` pages. Each method runs
``--repeats`` times on the same files, the methods taking turns (each pipeline run into a new
knowledge base); pages/s and ratios are of the median times, every time is in the file. Before
that, one untimed pass of each over a few files pays the process's one-time costs (DuckDB's and
MuPDF's first use), which a fresh ``chandra-ingest`` pays once per process like its imports.
pymupdf4llm is measured once when installed (`pip install pymupdf4llm`), in a child process:
importing it switches PyMuPDF features on for the whole process. The same is repeated (without
pymupdf4llm) on ``--steady-pages`` pages, where a run's fixed cost (worker start, schema, load,
run record) is spread over ten times more pages; that fixed cost itself is measured as the
run over one 1-page document (``fixed_cost``).

Files go under ``--work`` (default ``bench/.work``, not /tmp): on this machine /tmp sits on a
journal-less ext4 where the test suite creates and deletes files by the thousand, and creating a
file right after that costs up to a millisecond (``recently_deleted`` in ext4's inode allocator);
the runs should measure the pipeline, not the churn of the folder they happen to share.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pymupdf

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run

REPO = Path(__file__).resolve().parents[1]


def make_copies(sources: list[Path], pages: int, dest: Path) -> tuple[list[Path], int]:
    """Unique copies of ``sources``, round robin, until they hold at least ``pages`` pages."""
    counts = {p: pymupdf.open(p).page_count for p in sources}
    files, total, i = [], 0, 0
    while total < pages:
        src = sources[i % len(sources)]
        out = dest / f"{i:04d}-{src.name}"
        out.write_bytes(src.read_bytes() + f"\n% copy {i}\n".encode())
        files.append(out)
        total += counts[src]
        i += 1
    return files, total


def raw_pymupdf(files: list[Path]) -> float:
    t0 = time.perf_counter()
    for f in files:
        with pymupdf.open(f) as doc:
            for page in doc:
                page.get_text()
    return time.perf_counter() - t0


_LLM_TIMING = """
import sys, time
import pymupdf4llm
t0 = time.perf_counter()
for f in sys.argv[1:]:
    pymupdf4llm.to_markdown(f, use_ocr=False)
print(time.perf_counter() - t0)
"""


def with_pymupdf4llm(files: list[Path]) -> float | None:
    """Seconds pymupdf4llm takes, in a child process (importing it changes PyMuPDF for the process)."""
    if importlib.util.find_spec("pymupdf4llm") is None:
        return None
    out = subprocess.run(
        [sys.executable, "-c", _LLM_TIMING, *map(str, files)], check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def pipeline(src: Path, kb: Path, workers: int, native_tables: bool) -> float:
    pdf = PdfOptions(settle_seconds=0, workers=workers, native_tables=native_tables)
    options = IngestOptions(engine="text", pdf=pdf)
    t0 = time.perf_counter()
    run(src, kb, options)
    return time.perf_counter() - t0


def warm_up(sources: list[Path], workers: int, work: Path) -> None:
    """One untimed pass of each method over a few files."""
    src = work / "in"
    src.mkdir(parents=True)
    files, _ = make_copies(sources, 20, src)
    for native_tables in (True, False):
        pipeline(src, work / f"kb-{native_tables}", workers, native_tables)
    raw_pymupdf(files)


def measure(
    sources: list[Path], pages: int, workers: int, work: Path, *, repeats: int, with_llm: bool
) -> dict:
    """Every method ``repeats`` times, taking turns, on unique copies of ``sources`` holding at least
    ``pages`` pages, in ``work``."""
    src = work / "in"
    src.mkdir(parents=True)
    files, pages = make_copies(sources, pages, src)
    seconds: dict[str, list[float]] = {"raw": [], "full": [], "text_only": []}
    for i in range(repeats):
        seconds["full"].append(pipeline(src, work / f"kb-{i}", workers, native_tables=True))
        seconds["text_only"].append(pipeline(src, work / f"kb-text-only-{i}", workers, native_tables=False))
        seconds["raw"].append(raw_pymupdf(files))
    raw, full, text_only = (statistics.median(seconds[k]) for k in ("raw", "full", "text_only"))
    llm = with_pymupdf4llm(files) if with_llm else None
    return {
        "documents": len(files),
        "pages": pages,
        "pages_per_s": {
            "raw_pymupdf_get_text": pages / raw,
            "pymupdf4llm_to_markdown": pages / llm if llm else None,
            "pipeline_end_to_end": pages / full,
            "pipeline_end_to_end_without_native_tables": pages / text_only,
        },
        "ratio_pipeline_vs_raw": raw / full,
        "ratio_pipeline_without_native_tables_vs_raw": raw / text_only,
        "seconds": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
    }


def fixed_cost(sources: list[Path], workers: int, work: Path, repeats: int) -> dict:
    """A run's fixed cost: the pipeline over one 1-page document, ``repeats`` times (median)."""
    one = next(p for p in sources if pymupdf.open(p).page_count == 1)
    src = work / "in"
    src.mkdir(parents=True)
    shutil.copy(one, src / one.name)
    seconds = [pipeline(src, work / f"kb-{i}", workers, native_tables=True) for i in range(repeats)]
    rounded = [round(x, 3) for x in seconds]
    return {"document": one.name, "median_s": statistics.median(seconds), "seconds": rounded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus")),
    )
    parser.add_argument("--steady-pages", type=int, default=2000, help="0: skip the larger run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "born_digital.json")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    args = parser.parse_args()
    sources = sorted((args.corpus / "docling" / "tests" / "data" / "pdf" / "sources").glob("*.pdf"))
    # Everything is deleted at the end, not between runs: ext4 (without a journal, as here) makes
    # each new file skip the inodes freed in the last minutes, one inode-table lookup apiece, so
    # the files of a run deleted just before would slow the next run's file creation.
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="born-digital-", dir=args.work))
    load_at_start = os.getloadavg()[0]
    try:
        warm_up(sources, args.workers, work / "warm-up")
        fixed = fixed_cost(sources, args.workers, work / "fixed", repeats=max(args.repeats, 5))
        runs = [
            measure(sources, args.pages, args.workers, work / "small", repeats=args.repeats, with_llm=True)
        ]
        if args.steady_pages:
            steady = work / "steady"
            runs.append(
                measure(
                    sources, args.steady_pages, args.workers, steady, repeats=args.repeats, with_llm=False
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "pymupdf": pymupdf.__version__,
        },
        "workers": args.workers,
        "repeats": args.repeats,
        "target_ratio": 0.5,
        "fixed_cost": fixed,
        "runs": runs,
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
