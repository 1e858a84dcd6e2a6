"""Born-digital throughput: the whole pipeline (discover → DuckDB) vs raw PyMuPDF vs pymupdf4llm.

    .venv/bin/python -m bench.born_digital [--pages 200] [--steady-pages 2000] [--repeats 3]
                                           [--set docling|filings] [--corpus DIR] [--out F] [--work DIR]

``--set docling`` (the default) uses the docling born-digital PDFs of the corpus, copied (each copy
made unique by an appended PDF comment, so its doc_id differs) until at least ``--pages`` pages.
``--set filings`` uses the 16 SEC filings of ``rag-dev/pdfs`` instead (10-K, 10-Q, 8-K: 1,884
table-dense pages), each once, one size, without pymupdf4llm or the fixed cost →
``born_digital_filings.json``. Each method runs
``--repeats`` times on the same files, the methods taking turns (each pipeline run into a new
knowledge base); pages/s and ratios are of the median times, every time is in the file. Before
that, one untimed pass of each over a few files pays the process's one-time costs (DuckDB's and
MuPDF's first use), which a fresh ``chandra-ingest`` pays once per process like its imports.
pymupdf4llm is measured once when installed (`pip install pymupdf4llm`), in a child process:
importing it switches PyMuPDF features on for the whole process. The same is repeated (without
pymupdf4llm) on ``--steady-pages`` pages, where a run's fixed cost (worker start, schema, load,
run record) is spread over ten times more pages; that fixed cost itself is measured as the
run over one 1-page document (``fixed_cost``). Each full pipeline run also records its CPU seconds
in this process and in the workers, the core-seconds left idle and the wall seconds of each stage
over its batches (``pipeline_cpu_s``; the CLI overlaps batches, so the stages' seconds overlap);
raw ``get_text()`` records its CPU seconds too (``raw_cpu_s``), and ``ratio_bound_two_idle_cores``
is the ratio the pipeline's CPU seconds would give spread over ``--workers`` whole cores with none
idle (the median CPU seconds of raw ``get_text()`` × workers / the pipeline's): an upper bound that
other load on the machine does not move, beside the timed ratio that it does; and how
much two processes speed raw ``get_text()`` up on this machine is measured last
(``two_process_speedup``: 2.0 when its two cores are whole), as the pipeline's two workers are
held against one raw process.

Files go under ``--work`` (default ``bench/.work``, not /tmp): on this machine /tmp sits on a
journal-less ext4 where the test suite creates and deletes files by the thousand, and creating a
file for about a minute after that costs 0.3-1 ms instead of ~0.03 ms (``recently_deleted`` in
ext4's inode allocator); each load deletes the files it staged, so a run slows the next one's
writes. Before every timed pipeline run the cost of creating a file in the work folder is probed
and the run waits (at most ``--settle-s``) until it is back under ``SETTLED_MS``; the probes and
waits are in the results (``file_creation``).

``--against OTHER/plugins`` compares this tree with another one in the same run instead: both
run the whole pipeline on the same ``--pages`` pages (with ``--set filings``: the filings) in child
processes (each warmed up on a few files first), taking turns ``--repeats`` times, beside raw
``get_text()`` on the same pages; the ratio of their median times is printed and written to
``--out`` (default ``bench/results/born_digital_against.json``, ``born_digital_filings_against.json``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
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
SETTLED_MS = 0.1  # a file creation costs ~0.03 ms on a quiet folder of this machine
PROBE_FILES = 100


def creation_ms(folder: Path) -> float:
    """Milliseconds to create an empty file in ``folder``, over ``PROBE_FILES`` new files (kept:
    deleting them would slow the next creations)."""
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=folder))
    t0 = time.perf_counter()
    for i in range(PROBE_FILES):
        (probe / str(i)).touch()
    return (time.perf_counter() - t0) * 1000 / PROBE_FILES


class Settle:
    """Waits before each timed run until file creation in ``folder`` is cheap again (at most ``limit_s``);
    keeps what it saw."""

    def __init__(self, folder: Path, limit_s: float) -> None:
        self.folder, self.limit_s, self.seen = folder, limit_s, []

    def __call__(self) -> None:
        started = time.monotonic()
        while (ms := creation_ms(self.folder)) > SETTLED_MS and time.monotonic() - started < self.limit_s:
            time.sleep(5)
        self.seen.append({"create_ms": round(ms, 4), "waited_s": round(time.monotonic() - started, 1)})


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


def raw_pymupdf(files: list[Path], cpu: list[float] | None = None) -> float:
    """Seconds of raw ``get_text()`` over ``files``; ``cpu`` gets its CPU seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    for f in files:
        with pymupdf.open(f) as doc:
            for page in doc:
                page.get_text()
    if cpu is not None:
        cpu.append(time.process_time() - c0)
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


def pipeline(src: Path, kb: Path, workers: int, native_tables: bool, cpu: list[dict] | None = None) -> float:
    """Seconds of one run; ``cpu`` gets its CPU seconds in this process and in the (reaped) workers,
    and each stage's wall seconds summed over the batches."""
    pdf = PdfOptions(settle_seconds=0, workers=workers, native_tables=native_tables)
    options = IngestOptions(engine="text", pdf=pdf)
    before = _cpu_seconds()
    t0 = time.perf_counter()
    summary = run(src, kb, options)
    seconds = time.perf_counter() - t0
    if cpu is not None:
        main, workers_cpu = (a - b for a, b in zip(_cpu_seconds(), before, strict=True))
        idle = workers * seconds - main - workers_cpu  # core-seconds none of the processes used
        stages: dict[str, float] = {}
        for batch in summary.batches:
            for stage, s in batch.seconds.items():
                stages[stage] = stages.get(stage, 0.0) + s
        cpu.append(
            {
                "main": round(main, 3),
                "workers": round(workers_cpu, 3),
                "idle_core_s": round(idle, 3),
                "stage_s": {k: round(v, 3) for k, v in stages.items()},
            }
        )
    return seconds


def _cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user + system CPU seconds."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


_RAW_PASSES = """
import sys, time
import pymupdf
start_at, passes, files = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
while time.time() < start_at:
    time.sleep(0.001)
for _ in range(passes):
    for f in files:
        with pymupdf.open(f) as doc:
            for page in doc:
                page.get_text()
print(time.time() - start_at)
"""


def two_process_speedup(files: list[Path], repeats: int) -> list[float]:
    """How much faster two processes make two passes of raw ``get_text()`` over ``files`` than one
    process (2.0: the two cores are whole), ``repeats`` times. Children start together at a set time,
    so their imports are not timed."""

    def timed(procs: int, passes: int) -> float:
        start_at = time.time() + 1.5
        argv = [sys.executable, "-c", _RAW_PASSES, str(start_at), str(passes), *map(str, files)]
        children = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
        return max(float(c.communicate(timeout=600)[0].strip()) for c in children)

    return [round(timed(1, 2) / timed(2, 1), 2) for _ in range(repeats)]


def warm_up(sources: list[Path], workers: int, work: Path) -> None:
    """One untimed pass of each method over a few files."""
    src = work / "in"
    src.mkdir(parents=True)
    files, _ = make_copies(sources, 20, src)
    for native_tables in (True, False):
        pipeline(src, work / f"kb-{native_tables}", workers, native_tables)
    raw_pymupdf(files)


def measure(
    sources: list[Path], pages: int, workers: int, work: Path, settle: Settle, *, repeats: int, with_llm: bool
) -> dict:
    """Every method ``repeats`` times, taking turns, on unique copies of ``sources`` holding at least
    ``pages`` pages, in ``work``."""
    src = work / "in"
    src.mkdir(parents=True)
    files, pages = make_copies(sources, pages, src)
    seconds: dict[str, list[float]] = {"raw": [], "full": [], "text_only": []}
    cpu: list[dict] = []
    raw_cpu: list[float] = []
    for i in range(repeats):
        settle()
        seconds["full"].append(pipeline(src, work / f"kb-{i}", workers, native_tables=True, cpu=cpu))
        settle()
        seconds["text_only"].append(pipeline(src, work / f"kb-text-only-{i}", workers, native_tables=False))
        seconds["raw"].append(raw_pymupdf(files, raw_cpu))
    raw, full, text_only = (statistics.median(seconds[k]) for k in ("raw", "full", "text_only"))
    full_cpu = statistics.median(c["main"] + c["workers"] for c in cpu)
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
        "pipeline_cpu_s": cpu,
        "raw_cpu_s": [round(x, 3) for x in raw_cpu],
        "ratio_bound_two_idle_cores": workers * statistics.median(raw_cpu) / full_cpu,
    }


def fixed_cost(sources: list[Path], workers: int, work: Path, settle: Settle, repeats: int) -> dict:
    """A run's fixed cost: the pipeline over one 1-page document, ``repeats`` times (median)."""
    one = next(p for p in sources if pymupdf.open(p).page_count == 1)
    src = work / "in"
    src.mkdir(parents=True)
    shutil.copy(one, src / one.name)
    seconds = []
    for i in range(repeats):
        settle()
        seconds.append(pipeline(src, work / f"kb-{i}", workers, native_tables=True))
    rounded = [round(x, 3) for x in seconds]
    return {"document": one.name, "median_s": statistics.median(seconds), "seconds": rounded}


_CHILD = """
import sys, time
from pathlib import Path
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
warm, src, kb, workers = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
options = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, workers=workers))
run(warm, kb.with_name(kb.name + "-warm"), options)
t0 = time.perf_counter()
run(src, kb, options)
print(time.perf_counter() - t0)
"""


def against(
    sources: list[Path],
    warm_sources: list[Path],
    other: Path,
    args: argparse.Namespace,
    work: Path,
    settle: Settle,
) -> dict:
    """This tree's and ``other``'s whole pipeline on the same pages, in child processes, taking turns
    (each warmed up on a few of ``warm_sources``), and raw ``get_text()`` on them after each turn."""
    src, warm = work / "in", work / "warm"
    src.mkdir(parents=True)
    warm.mkdir()
    files, pages = make_copies(sources, args.pages, src)
    make_copies(warm_sources[:3], 3, warm)
    trees = {"this": REPO / "plugins", "other": other.resolve()}
    seconds: dict[str, list[float]] = {k: [] for k in [*trees, "raw"]}
    for i in range(args.repeats):
        for name, plugins in trees.items():
            settle()
            env = os.environ | {"PYTHONPATH": str(plugins)}
            argv = [sys.executable, "-c", _CHILD, str(warm), str(src), str(work / f"kb-{name}-{i}")]
            out = subprocess.run(
                [*argv, str(args.workers)], env=env, check=True, capture_output=True, text=True
            )
            seconds[name].append(float(out.stdout.strip().splitlines()[-1]))
        seconds["raw"].append(raw_pymupdf(files))
    this, that, raw = (statistics.median(seconds[k]) for k in [*trees, "raw"])
    return {
        "other": str(trees["other"]),
        "documents": len(files),
        "pages": pages,
        "ratio_other_time_vs_this": that / this,
        "ratio_vs_raw": {"this": raw / this, "other": raw / that},
        "seconds": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=200, help="docling set: pages of the first size")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus")),
    )
    parser.add_argument(
        "--set", dest="documents", choices=("docling", "filings"), default="docling", help="which PDFs"
    )
    parser.add_argument("--steady-pages", type=int, default=2000, help="0: skip the larger run (docling)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    parser.add_argument("--settle-s", type=float, default=90.0, help="longest wait for cheap file creation")
    parser.add_argument("--against", type=Path, help="another tree's plugins folder to compare with")
    args = parser.parse_args()
    filings = args.documents == "filings"
    name = ("born_digital_filings" if filings else "born_digital") + ("_against" if args.against else "")
    out = args.out or REPO / "bench" / "results" / f"{name}.json"
    docling = sorted((args.corpus / "docling" / "tests" / "data" / "pdf" / "sources").glob("*.pdf"))
    sources = sorted((args.corpus / "rag-dev" / "pdfs").glob("*.pdf")) if filings else docling
    if filings:  # each filing once
        args.pages = sum(pymupdf.open(p).page_count for p in sources)
    # Everything is deleted at the end, not between runs: ext4 (without a journal, as here) makes
    # each new file skip the inodes freed in the last minutes, one inode-table lookup apiece, so
    # the files of a run deleted just before would slow the next run's file creation.
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="born-digital-", dir=args.work))
    settle = Settle(work, args.settle_s)
    load_at_start = os.getloadavg()[0]
    result: dict = {"documents": args.documents}
    try:
        if args.against:
            result["against"] = against(sources, docling, args.against, args, work / "against", settle)
        else:
            warm_up(docling, args.workers, work / "warm-up")
            if not filings:
                result["fixed_cost"] = fixed_cost(
                    sources, args.workers, work / "fixed", settle, repeats=max(args.repeats, 5)
                )
            sizes = [(args.pages, "filings" if filings else "small", not filings)] + (
                [(args.steady_pages, "steady", False)] if args.steady_pages and not filings else []
            )
            result["runs"] = [
                measure(sources, n, args.workers, work / name, settle, repeats=args.repeats, with_llm=llm)
                for n, name, llm in sizes
            ]
            (work / "speedup").mkdir()
            files, _ = make_copies(sources, args.pages, work / "speedup")
            result["two_process_speedup"] = two_process_speedup(files, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench.born_digital", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "pymupdf": pymupdf.__version__,
        },
        "workers": args.workers,
        "repeats": args.repeats,
        "target_ratio": 0.25 if filings else 0.5,
        **result,
        "file_creation": {"settled_ms": SETTLED_MS, "before_each_run": settle.seen},
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg()[0],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
