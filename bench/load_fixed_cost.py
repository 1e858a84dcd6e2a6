"""A load's fixed cost: this tree's store against a baseline commit's, taking turns in one run.

    .venv/bin/python -m bench.load_fixed_cost [--baseline 51ce3cf] [--docs 1,59] [--repeats 15]
                                              [--out F] [--work DIR]

The baseline's ``plugins/`` and ``sql/`` are exported (``git archive``) into ``--work``; one child
process per tree imports that tree's ``chandra_ocr`` and waits for orders. For each size in
``--docs`` (59: the documents of the born-digital benchmark's 209 pages) and each repeat, the two
children in turn stage that many one-page documents (untimed) and time what a run does with a
knowledge base: ``known_documents`` (discovery's read), ``load_documents`` and, in a tree that has
it, ``compact_if_due`` (the Load stage's last step), into a new KB and
then again into that KB (a second run). Taking turns, both trees see the same load of this shared
machine; the medians and minima of each are in the file, with every time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import inspect, json, sys, time
from datetime import UTC, datetime
from pathlib import Path
from chandra_ocr.document import Block, Chunk, Document, Page, Table, TableCell
from chandra_ocr.store.duckdb_store import known_documents, load_documents
from chandra_ocr.store.layout import KbLayout
try:  # rows staged per document (store/staging.py), or one Parquet shard per table in older trees
    from chandra_ocr.store.staging import write_staged
except ImportError:
    from chandra_ocr.store.parquet import write_shards as write_staged
from chandra_ocr.store.rows import document_rows
try:  # what the Load stage does after a run's last load, in trees that compact
    from chandra_ocr.store.compact import compact_if_due
except ImportError:
    compact_if_due = lambda layout: None

NOW = datetime(2026, 1, 1, tzinfo=UTC)

def one_page(doc_id, n):
    para = " ".join(("river", "station", "sample", "nitrate")[(n + i) % 4] for i in range(100))
    blocks = [Block(0, "section-header", (50, 40, 500, 60), f"Report {n}", level=1),
              Block(1, "text", (50, 80, 560, 300), para)]
    cells = (TableCell(0, 0, "Station", is_header=True), TableCell(0, 1, "Nitrate", is_header=True),
             TableCell(1, 0, f"Millbrook {n}"), TableCell(1, 1, "4.2"))
    table = Table(1, (50, 520, 560, 600), 2, 2, ("Station", "Nitrate"), "native", cells)
    page = Page(1, 612, 792, "text", "text", blocks=blocks, tables=[table])
    doc = Document(doc_id, f"/a/{doc_id}.pdf", f"{doc_id}.pdf", 4800, n_pages=1, pages=[page])
    chunks = [Chunk(f"{doc_id}-0", doc_id, 0, "text", para, 100, ("Report",), 1, 1, ((1, 50, 80, 560, 300),))]
    return document_rows(doc, chunks, run_id="bench", now=NOW)

RUN = ["bench"] if "run_id" in inspect.signature(load_documents).parameters else []  # per-run staging

def timed_run(layout, ids):
    for n, d in enumerate(ids):
        write_staged(layout, *RUN, d, one_page(d, n))
    t0 = time.perf_counter()
    known_documents(layout)
    load_documents(layout, *RUN, ids)
    compact_if_due(layout)
    return time.perf_counter() - t0

work = Path(sys.argv[1])
for line in sys.stdin:
    tag, n = line.split()
    layout = KbLayout(work / tag)
    first = timed_run(layout, [f"a{tag}{i:06d}".rjust(64, "0") for i in range(int(n))])
    second = timed_run(layout, [f"b{tag}{i:06d}".rjust(64, "0") for i in range(int(n))])
    print(json.dumps({"new_kb_s": first, "second_run_s": second}), flush=True)
"""


def export_tree(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "plugins", "sql"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def child(tree: Path, work: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(tree / "plugins")}
    work.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(work)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def ask(proc: subprocess.Popen, tag: str, n: int) -> dict:
    proc.stdin.write(f"{tag} {n}\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def summary(times: list[float]) -> dict:
    return {"median_s": statistics.median(times), "min_s": min(times), "all_s": [round(t, 4) for t in times]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="51ce3cf")
    ap.add_argument("--docs", default="1,59")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "load_fixed_cost.json")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="load-cost-", dir=args.work))
    try:
        trees = {"baseline": export_tree(args.baseline, work / "baseline-tree"), "this_tree": REPO}
        procs = {name: child(tree, work / name) for name, tree in trees.items()}
        for proc in procs.values():  # one untimed round: imports, DuckDB's first use
            ask(proc, "warm", 3)
        runs = []
        for n in (int(x) for x in args.docs.split(",")):
            seen: dict[str, dict[str, list[float]]] = {k: {"new_kb_s": [], "second_run_s": []} for k in procs}
            for i in range(args.repeats):
                order = list(procs) if i % 2 == 0 else list(reversed(procs))
                for name in order:
                    for key, value in ask(procs[name], f"{n}-{i}", n).items():
                        seen[name][key].append(value)
            row = {"documents": n}
            for name, keys in seen.items():
                row[name] = {key: summary(times) for key, times in keys.items()}
            for key in ("new_kb_s", "second_run_s"):
                row[f"{key}_ratio_this_vs_baseline"] = (
                    row["this_tree"][key]["median_s"] / row["baseline"][key]["median_s"]
                )
            print(json.dumps({k: v for k, v in row.items() if "ratio" in k} | {"documents": n}), flush=True)
            runs.append(row)
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "baseline": args.baseline,
        "repeats": args.repeats,
        "runs": runs,
        "load_average_at_end": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
