"""What the no-hang fix costs the cpu engine: PDF workers from the forkserver vs forked from the CLI.

    .venv/bin/python -m bench.cpu_engine_workers [--pages 24] [--repeats 2] [--out F]

The whole pipeline (discover → DuckDB) with the cpu engine (Tesseract) over unique copies of the
corpus's scanned PDFs (``derived/*.scan.pdf``, ocrmypdf's multipage and cardinal) until ``--pages``
pages, into a new knowledge base each time. Two ways, taking turns: the default since the fix
(``CpuEngine.threads`` is True, so the workers come from the forkserver) and the old choice (workers
forked from the process whose threads run Tesseract — the race that hung runs; measured here only
for its cost). pages/s of the median times; every time is in the results file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.born_digital import make_copies
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.ocr.cpu_engine import CpuEngine
from chandra_ocr.pipeline import run

REPO = Path(__file__).resolve().parents[1]
SCANS = [
    "derived/8071_093.3B.scan.pdf",
    "derived/8087_054.3B.scan.pdf",
    "derived/eurotext.scan.pdf",
    "derived/phototest.scan.pdf",
    "ocrmypdf/tests/resources/multipage.pdf",
    "ocrmypdf/tests/resources/cardinal.pdf",
]


class ForkedCpuEngine(CpuEngine):
    """The cpu engine as the pipeline treated it before the fix: its workers forked from this process."""

    threads = False


def one_run(src: Path, kb: Path, forked: bool) -> tuple[float, int]:
    shutil.rmtree(kb, ignore_errors=True)
    options = IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0))
    engine = ForkedCpuEngine() if forked else CpuEngine()
    started = time.perf_counter()
    summary = run(src, kb, options, engine=engine)
    engine.close()
    return time.perf_counter() - started, summary.pages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_corpus = Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus"))
    parser.add_argument("--corpus", type=Path, default=default_corpus)
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work" / "cpu_engine")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "cpu_engine_workers.json")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    src = args.work / "in"
    src.mkdir(parents=True)
    files, pages = make_copies([args.corpus / s for s in SCANS], args.pages, src)
    times: dict[str, list[float]] = {"forkserver": [], "forked": []}
    for _ in range(args.repeats):
        for way in times:
            seconds, read = one_run(src, args.work / "kb", forked=way == "forked")
            assert read == pages, f"{read} of {pages} pages read"
            times[way].append(round(seconds, 2))
            print(f"{way}: {seconds:.1f} s for {pages} pages", flush=True)
    median = {way: statistics.median(t) for way, t in times.items()}
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "documents": len(files),
        "pages": pages,
        "repeats": args.repeats,
        "seconds": times,
        "pages_per_s": {way: round(pages / m, 3) for way, m in median.items()},
        "ratio_forkserver_vs_forked": round(median["forked"] / median["forkserver"], 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result["pages_per_s"]), "ratio", result["ratio_forkserver_vs_forked"])
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
