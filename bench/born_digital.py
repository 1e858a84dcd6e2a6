"""Born-digital throughput: the whole pipeline (discover → DuckDB) vs raw PyMuPDF vs pymupdf4llm.

    .venv/bin/python bench/born_digital.py [--pages 200] [--steady-pages 2000] [--corpus DIR] [--out F]
                                           [--work DIR]

Uses the docling born-digital PDFs of the corpus, copied (each copy made unique by an appended
PDF comment, so its doc_id differs) until at least ``--pages`` pages. One run of each method on
the same files. pymupdf4llm is measured when installed (`pip install pymupdf4llm`), in a child
process: importing it switches PyMuPDF features on for the whole process. The same is repeated
(without pymupdf4llm) on ``--steady-pages`` pages, where a run's fixed cost (worker start,
schema, run record) is spread over ten times more pages.

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


def measure(sources: list[Path], pages: int, workers: int, work: Path, *, with_llm: bool) -> dict:
    """Every method once on unique copies of ``sources`` holding at least ``pages`` pages, in ``work``."""
    src = work / "in"
    src.mkdir(parents=True)
    files, pages = make_copies(sources, pages, src)
    full = pipeline(src, work / "kb", workers, native_tables=True)
    text_only = pipeline(src, work / "kb-text-only", workers, native_tables=False)
    raw = raw_pymupdf(files)
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
    }


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
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "born_digital.json")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    args = parser.parse_args()
    sources = sorted((args.corpus / "docling" / "tests" / "data" / "pdf" / "sources").glob("*.pdf"))
    # Everything is deleted at the end, not between runs: ext4 (without a journal, as here) makes
    # each new file skip the inodes freed in the last minutes, one inode-table lookup apiece, so
    # the files of a run deleted just before would slow the next run's file creation.
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="born-digital-", dir=args.work))
    try:
        runs = [measure(sources, args.pages, args.workers, work / "small", with_llm=True)]
        if args.steady_pages:
            runs.append(measure(sources, args.steady_pages, args.workers, work / "steady", with_llm=False))
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
        "target_ratio": 0.5,
        "runs": runs,
        "load_average_at_end": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
