"""The knowledge-base browser on a big KB: how long its views take to answer.

    .venv/bin/python -m bench.browser_latency [--docs 100000] [--baseline-docs 1000] [--flagged 200]
                                              [--tries 5] [--out F] [--work DIR]

Two KBs are built like bench/archive_scale.py builds its synthetic one (one template one-page
document with 3 blocks, a 3×2 table and 2 chunks, repeated with fresh ids, written as dataset
files): ``--docs`` documents, and ``--baseline-docs`` as the baseline in the same run. Into each,
``--flagged`` documents whose page fell back are then loaded the way a run loads (staged rows,
``load_documents``), so the review queue and the "has fallback/failed pages" filter have rows to find.
Each KB is served by ``chandra-ingest serve`` (a separate process, as a user runs it) and every view
is requested over HTTP: the first request (``cold_s``: a fresh server process, nothing cached) and
the median of ``--tries`` more. The document list is also paged through its keyset cursor
(``PAGED`` pages followed, then the page reached is timed). The synthetic documents' sources do
not exist, so the page view's time is the HTML without rendering; rendering a real page
(samples/report.pdf, first and cached) is timed apart with the same ``PageImages`` the app uses.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from bench.archive_scale import doc_id, grow_synthetic, one_page_document
from chandra_ocr.browser.images import PageImages
from chandra_ocr.store.duckdb_store import load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import write_staged

REPO = Path(__file__).resolve().parents[1]
PAGED = 20  # pages of the document list followed through the cursor
TARGET_S = 1.0  # "well under a second": every view's median must be below this
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def build(root: Path, n_docs: int, n_flagged: int) -> KbLayout:
    """``n_docs`` synthetic documents, then ``n_flagged`` with a fallback page loaded as a run loads them."""
    layout = KbLayout(root)
    step = 25_000
    grow_synthetic(layout, 0, 0)
    for start in range(0, n_docs, step):
        grow_synthetic(layout, start, min(n_docs, start + step))
    ids = [doc_id("flagged", i) for i in range(n_flagged)]
    for i, one in enumerate(ids):
        doc, chunks = one_page_document(one, i)
        page = doc.pages[0]
        page.status, page.attempts, page.fallback_reason = "fallback", 3, "vllm: output cut at max_tokens"
        doc.status, doc.error = "partial", "1 of 1 pages fell back"
        write_staged(layout, one, document_rows(doc, chunks, run_id="flagged", now=datetime.now(UTC)))
    load_documents(layout, ids)
    return layout


def get(url: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    with _OPENER.open(url, timeout=120) as reply:
        body = reply.read().decode()
        assert reply.status == 200, (url, reply.status)
    return time.perf_counter() - t0, body


def timed(url: str, tries: int) -> dict:
    cold, _ = get(url)
    warm = [get(url)[0] for _ in range(tries)]
    return {
        "cold_s": round(cold, 4),
        "median_s": round(statistics.median(warm), 4),
        "max_s": round(max(warm), 4),
    }


def serve(layout: KbLayout) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "chandra_ocr.cli", "serve", "--kb", str(layout.root), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    ready, _, _ = select.select([process.stdout], [], [], 120)
    line = process.stdout.readline() if ready else ""
    found = re.search(r"http://[0-9.]+:\d+", line)
    assert found, line
    return process, found.group(0)


def views(layout: KbLayout, tries: int) -> dict:
    """Every view's latency on one KB, through a fresh ``chandra-ingest serve``."""
    con = duckdb.connect(str(layout.duckdb_path), read_only=True)
    n_docs = con.execute("SELECT count(*) FROM documents").fetchall()[0][0]
    middle = con.execute(
        "SELECT doc_id FROM documents ORDER BY doc_id LIMIT 1 OFFSET ?", [n_docs // 2]
    ).fetchall()
    con.close()
    doc = middle[0][0]
    process, base = serve(layout)
    try:
        out = {"documents": n_docs}
        out["document_list"] = timed(f"{base}/", tries)
        url, pages, t0 = f"{base}/", 1, time.perf_counter()
        while pages <= PAGED:  # follow "older »" to page PAGED + 1 (or the last page)
            older = re.search(r'id="next" href="([^"]+)"', get(url)[1])
            if not older:
                break
            url, pages = base + older.group(1).replace("&amp;", "&"), pages + 1
        out["document_list_paging"] = {"pages_followed": pages - 1, "s": round(time.perf_counter() - t0, 4)}
        out["document_list_last_page_reached"] = timed(url, tries)
        out["document_list_status_partial"] = timed(f"{base}/?status=partial", tries)
        out["document_list_flagged"] = timed(f"{base}/?flagged=true", tries)
        out["document"] = timed(f"{base}/doc/{doc}", tries)
        out["page_view"] = timed(f"{base}/doc/{doc}/page/1", tries)
        out["review"] = timed(f"{base}/review", tries)
        out["table_search"] = timed(f"{base}/search?q=Millbrook+7", tries)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return out


def render_times(tries: int) -> dict:
    """One real page drawn by the app's PageImages: first time, then from its cache."""
    pdf = REPO / "samples" / "report.pdf"
    images = PageImages()
    t0 = time.perf_counter()
    import pymupdf  # noqa: F401  (`serve` imports it before it listens)

    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    png = images.png("report", 1, str(pdf), pdf.stat().st_size)
    first = time.perf_counter() - t0
    cached = []
    for _ in range(tries):
        t0 = time.perf_counter()
        images.png("report", 1, str(pdf), pdf.stat().st_size)
        cached.append(time.perf_counter() - t0)
    return {
        "pymupdf_import_s": round(import_s, 4),
        "first_s": round(first, 4),
        "cached_median_s": round(statistics.median(cached), 6),
        "png_bytes": len(png),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--baseline-docs", type=int, default=1_000)
    parser.add_argument("--flagged", type=int, default=200)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "browser_latency.json"))
    parser.add_argument("--work", help="folder for the KBs (default: a temporary one, removed)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="browser-bench-"))
    t_all = time.perf_counter()
    try:
        result: dict = {
            "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                        "duckdb": duckdb.__version__},
            "command": " ".join(["bench/browser_latency.py", *sys.argv[1:]]),
            "target_s": TARGET_S,
        }  # fmt: skip
        for name, n in (("baseline", args.baseline_docs), ("big", args.docs)):
            t0 = time.perf_counter()
            layout = build(work / name, n, args.flagged)
            result[f"{name}_build_s"] = round(time.perf_counter() - t0, 2)
            result[name] = views(layout, args.tries)
            print(json.dumps({name: result[name]}), flush=True)
        result["page_image_render"] = render_times(args.tries)
        checked = [k for k, v in result["big"].items() if isinstance(v, dict) and "median_s" in v]
        result["big_vs_baseline_median"] = {
            k: round(result["big"][k]["median_s"] / result["baseline"][k]["median_s"], 2) for k in checked
        }
        result["slowest_median_s"] = max(result["big"][k]["median_s"] for k in checked)
        result["met"] = result["slowest_median_s"] < TARGET_S
        result["wall_s"] = round(time.perf_counter() - t_all, 1)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("slowest_median_s", "met", "big_vs_baseline_median")}, indent=2))


if __name__ == "__main__":
    main()
