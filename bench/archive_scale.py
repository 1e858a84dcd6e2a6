"""The knowledge base at archive scale: loading 1,000 new documents into KBs of growing size.

    .venv/bin/python -m bench.archive_scale [--sizes 0,1000,10000,30000,100000] [--new 1000]
                                            [--nights 50] [--night-docs 200] [--out F] [--work DIR]

One KB grows through ``--sizes`` documents. The bulk of it is synthetic and written fast: one
template one-page document (3 blocks, a 3×2 table, 2 chunks, ~1.4 kB of page Markdown) repeated
with fresh doc_ids and chunk_ids as Arrow tables, its texts replaced by per-row text of the same
length (so files have realistic sizes), written as dataset files in one write session per step
(as a load would write them, without staging rows per document). At each size the
measured ingest is that of ``--new`` new one-page documents as the pipeline does it after
assembly: their rows are staged (``write_staged``, timed apart: it does not depend on the KB),
then ``known_documents`` (the pipeline's first read) and ``load_documents`` are timed. Also, at
each size: the load's bytes written and read (``wchar``/``rchar`` of /proc/self/io: every write
and read call, the copy of kb.duckdb included), the Parquet files under kb/parquet/ and the size
of kb.duckdb after the load, whether the compaction a run does after its load (``compact_if_due``,
in a write session of its own, after the load is published) had work to do, and its time and I/O
(``compaction_s``, not part of ``ingest_s``), the median latency of one ``table_search`` query (a
new read-only connection, 3 tries), and the slowest connect (``slowest_connect_s``) and connect +
``count(*)`` (``slowest_s``) of a reader process that connects in a loop during the load. A
second process holds a read-only connection on kb.duckdb for the whole run and must still answer
at the end. The baseline: at each size, right before, the same staged rows are loaded into an
empty KB (``ingest_vs_empty_kb``; the shared 2 cores make loads minutes apart vary more than the
KB's size does); ``ingest_vs_first_step`` compares with size 0.

Then ``--nights`` loads of ``--night-docs`` staged documents each go into a new KB (the nightly
case): the most Parquet files any table had after any night, and the first and last load times.
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
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from chandra_ocr.document import Block, Chunk, Document, Page, Table, TableCell
from chandra_ocr.store.compact import compact_if_due
from chandra_ocr.store.dataset import add_files, next_gen, write_file
from chandra_ocr.store.duckdb_store import connect, known_documents, load_documents
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.session import write_session
from chandra_ocr.store.staging import arrow_schema, write_staged

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SEARCH = (
    "SELECT count(*) FROM table_search WHERE header_text ILIKE '%nitrate%' OR cell_text ILIKE '%Millbrook 7%'"
)
_WORDS = ("river", "station", "sample", "nitrate", "phosphate", "flow", "survey", "report", "annual", "basin")


def arrow_rows(table: str, rows: list[dict]) -> pa.Table:
    """Rows of ``table`` as Arrow, with the columns and types of its schema."""
    return pa.Table.from_pylist(rows, schema=arrow_schema(table))


def one_page_document(doc_id: str, n: int) -> tuple[Document, list[Chunk]]:
    """A one-page document with a heading, two paragraphs, a 3×2 table and two chunks."""
    para = " ".join(_WORDS[(n + i) % len(_WORDS)] for i in range(100))
    blocks = [
        Block(0, "section-header", (50, 40, 500, 60), f"Report {n}", level=1),
        Block(1, "text", (50, 80, 560, 300), para),
        Block(2, "text", (50, 320, 560, 500), para[::-1]),
    ]
    cells = tuple(
        [TableCell(0, 0, "Station", is_header=True), TableCell(0, 1, "Nitrate mg/L", is_header=True)]
        + [
            c
            for r in (1, 2)
            for c in (TableCell(r, 0, f"Millbrook {n % 97 + r}"), TableCell(r, 1, f"{r}.{n % 10}"))
        ]
    )
    table = Table(1, (50, 520, 560, 600), 3, 2, ("Station", "Nitrate mg/L"), "native", cells)
    page = Page(1, 612, 792, "text", "text", blocks=blocks, tables=[table])
    doc = Document(doc_id, f"/archive/{doc_id}.pdf", f"{doc_id}.pdf", 48_000, n_pages=1, pages=[page])
    chunks = [
        Chunk(
            f"{doc_id}-{i}",
            doc_id,
            i,
            kind,
            text,
            len(text.split()),
            ("Report",),
            1,
            1,
            ((1, 50, 80, 560, 300),),
        )
        for i, (kind, text) in enumerate([("text", para), ("table", "Station | Nitrate mg/L")])
    ]
    return doc, chunks


def doc_id(prefix: str, i: int) -> str:
    return f"{prefix}{i:09d}".rjust(64, "0")  # doc_ids are 64 hex characters (sha256)


def _noise(column: str, key: str) -> str:
    """SQL: text as long as ``column`` that differs per row (md5 hex, about as compressible as
    prose: repeating the template would make the KB's files unrealistically small)."""
    return (
        f"array_to_string(list_transform(range(length({column}) // 32 + 1), "
        f"lambda i: md5(doc_id || {key}::VARCHAR || i::VARCHAR)), '')[:length({column})] AS {column}"
    )


_UNIQUE_TEXT = {
    "pages": f"REPLACE ({_noise('markdown', 'page_no')})",
    "blocks": f"REPLACE ({_noise('text', 'block_no')})",
    "chunks": f"REPLACE ({_noise('text', 'chunk_id')})",
}


def grow_synthetic(layout: KbLayout, start: int, stop: int) -> None:
    """Add documents ``start`` .. ``stop - 1``: the template's rows with new ids, one file per table."""
    doc, chunks = one_page_document("template", 0)
    template = {
        t: arrow_rows(t, rows) for t, rows in document_rows(doc, chunks, run_id="synthetic", now=NOW).items()
    }
    ids = pa.array([doc_id("b", i) for i in range(start, stop)], pa.string())
    with write_session(layout) as session:
        gen = next_gen(session.con)
        for table in DOCUMENT_TABLES:
            rows = template[table]
            per_doc = rows.num_rows
            which = pa.array([i // per_doc for i in range(per_doc * len(ids))], pa.int64())
            big = rows.take(pa.array([i % per_doc for i in range(per_doc * len(ids))], pa.int64()))
            big = big.set_column(big.schema.get_field_index("doc_id"), "doc_id", ids.take(which))
            if table == "chunks":
                unique = pc.binary_join_element_wise(big["doc_id"], big["chunk_id"], "-")
                big = big.set_column(big.schema.get_field_index("chunk_id"), "chunk_id", unique)
            session.con.register("synthetic", big)
            query = f"SELECT * {_UNIQUE_TEXT.get(table, '')} FROM synthetic ORDER BY doc_id"
            add_files(session.con, [write_file(session.con, layout, table, query, gen)])
            session.con.unregister("synthetic")


def stage(layout: KbLayout, ids: list[str]) -> float:
    t0 = time.perf_counter()
    for n, d in enumerate(ids):
        doc, chunks = one_page_document(d, n)
        write_staged(layout, "bench", d, document_rows(doc, chunks, run_id="bench", now=NOW))
    return time.perf_counter() - t0


def _io() -> dict[str, int]:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


_PROBE = """
import duckdb, json, os, sys, time
path, stop = sys.argv[1], sys.argv[2]
slowest, slowest_connect, n, counts = 0.0, 0.0, 0, set()
while not os.path.exists(stop) or n == 0:
    t0 = time.perf_counter()
    con = duckdb.connect(path, read_only=True)
    slowest_connect = max(slowest_connect, time.perf_counter() - t0)
    counts.add(con.execute("SELECT count(*) FROM documents").fetchall()[0][0])
    con.close()
    slowest = max(slowest, time.perf_counter() - t0)
    n += 1
print(json.dumps({"connects": n, "slowest_connect_s": slowest_connect, "slowest_s": slowest,
                  "counts_seen": sorted(counts)}))
"""


def measured_load(layout: KbLayout, ids: list[str], work: Path) -> dict:
    """Time known_documents + load_documents of ``ids`` with a reader connecting in a loop meanwhile."""
    stop = work / "probe.stop"
    stop.unlink(missing_ok=True)
    probe = subprocess.Popen(
        [sys.executable, "-c", _PROBE, str(layout.duckdb_path), str(stop)], stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)  # the probe is connecting before the load starts
    io0, t0 = _io(), time.perf_counter()
    known_documents(layout)
    load_documents(layout, "bench", ids)
    elapsed, io1 = time.perf_counter() - t0, _io()
    compacted = compact_if_due(layout)  # what a run does next, in a session of its own
    compaction_s, io2 = time.perf_counter() - t0 - elapsed, _io()
    stop.touch()
    probe_result = json.loads(probe.communicate(timeout=60)[0])
    return {
        "ingest_s": elapsed,
        "bytes_written": io1["wchar"] - io0["wchar"],
        "bytes_read": io1["rchar"] - io0["rchar"],
        "compaction_after_load": compacted is not None,
        "compaction_s": compaction_s if compacted is not None else 0.0,
        "compaction_bytes_written": io2["wchar"] - io1["wchar"],
        "compaction_bytes_read": io2["rchar"] - io1["rchar"],
        "reader_during_load": probe_result,
    }


def table_search_s(layout: KbLayout) -> float:
    times = []
    for _ in range(3):
        con = connect(layout)
        t0 = time.perf_counter()
        con.execute(SEARCH).fetchall()
        times.append(time.perf_counter() - t0)
        con.close()
    return statistics.median(times)


def parquet_files(layout: KbLayout) -> dict[str, int]:
    return {t: len(list(layout.dataset_dir(t).glob("*.parquet"))) for t in DOCUMENT_TABLES}


def holder(layout: KbLayout) -> subprocess.Popen:
    script = textwrap.dedent("""
        import duckdb, sys
        con = duckdb.connect(sys.argv[1], read_only=True)
        print(con.execute("SELECT count(*) FROM documents").fetchall()[0][0], flush=True)
        sys.stdin.readline()
        print(con.execute("SELECT count(*) FROM documents").fetchall()[0][0], flush=True)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(layout.duckdb_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    proc.stdout.readline()
    return proc


def growing_kb(work: Path, sizes: list[int], n_new: int) -> tuple[list[dict], dict]:
    layout = KbLayout(work / "growing")
    grow_synthetic(layout, 0, 0)  # an empty kb.duckdb for the reader to hold
    held = holder(layout)
    rows, synthetic, loaded = [], 0, 0
    for step, size in enumerate(sizes):
        t0 = time.perf_counter()
        if size > synthetic + loaded:
            grow_synthetic(layout, synthetic, size - loaded)
            synthetic = size - loaded
        build_s = time.perf_counter() - t0
        ids = [doc_id(f"n{step}", i) for i in range(n_new)]
        stage_s = stage(layout, ids)
        empty = KbLayout(work / f"empty-{step}")  # the baseline next to it: the same staged rows, an empty KB
        grow_synthetic(empty, 0, 0)
        shutil.copytree(layout.root / "staging", empty.root / "staging")
        baseline = measured_load(empty, ids, work)
        shutil.rmtree(empty.root)
        row = {"kb_documents": synthetic + loaded, "synthetic_build_s": build_s, "stage_s": stage_s}
        row |= measured_load(layout, ids, work)
        row |= {
            "empty_kb_ingest_s": baseline["ingest_s"],
            "ingest_vs_empty_kb": row["ingest_s"] / baseline["ingest_s"],
        }
        loaded += n_new
        row |= {
            "parquet_files": parquet_files(layout),
            "kb_duckdb_bytes": layout.duckdb_path.stat().st_size,
            "table_search_s": table_search_s(layout),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    held.stdin.write("\n")
    held.stdin.flush()
    held_answer = held.stdout.readline().strip()
    held.wait(30)
    return rows, {"returncode": held.returncode, "documents_in_its_snapshot": held_answer}


def nightly(work: Path, nights: int, per_night: int) -> dict:
    layout = KbLayout(work / "nightly")
    most, times, compactions = dict.fromkeys(DOCUMENT_TABLES, 0), [], []
    for night in range(nights):
        ids = [doc_id(f"x{night:03d}", i) for i in range(per_night)]
        stage(layout, ids)
        t0 = time.perf_counter()
        load_documents(layout, "bench", ids)
        t1 = time.perf_counter()
        if compact_if_due(layout) is not None:  # as the run does after its load
            compactions.append(time.perf_counter() - t1)
        times.append(t1 - t0)
        most = {t: max(most[t], n) for t, n in parquet_files(layout).items()}
    return {
        "nights": nights,
        "documents_per_night": per_night,
        "most_parquet_files_per_table": most,
        "parquet_files_at_end": parquet_files(layout),
        "first_load_s": times[0],
        "last_load_s": times[-1],
        "median_load_s": statistics.median(times),
        "compactions": len(compactions),
        "compaction_s_total": sum(compactions),
        "compaction_s_per_night": sum(compactions) / nights,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0,1000,10000,30000,100000")
    ap.add_argument("--new", type=int, default=1000)
    ap.add_argument("--nights", type=int, default=50)
    ap.add_argument("--night-docs", type=int, default=200)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "archive_scale.json")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / ".work" / "archive_scale")
    ap.add_argument(
        "--discovery",
        action="store_true",
        help="only the nightly-discovery section (bench/archive_discovery.py), kept under 'discovery'",
    )
    ap.add_argument("--local-sizes", default="10000,30000,100000")
    ap.add_argument("--s3-sizes", default="10000")
    ap.add_argument("--big-files", type=int, default=1000)
    ap.add_argument("--big-mb", type=float, default=2.0)
    args = ap.parse_args()
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.discovery:
        from bench.archive_discovery import discovery_section

        shutil.rmtree(args.work, ignore_errors=True)
        args.work.mkdir(parents=True)
        sizes = [[int(s) for s in v.split(",") if s] for v in (args.local_sizes, args.s3_sizes)]
        section = discovery_section(args.work, *sizes, args.big_files, args.big_mb)
        args.out.write_text(json.dumps(previous | {"discovery": section}, indent=2) + "\n")
        print(json.dumps(section["targets"], indent=2))
        return
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    rows, held = growing_kb(args.work, sizes, args.new)
    base = rows[0]["ingest_s"]
    for row in rows:
        row["ingest_vs_first_step"] = row["ingest_s"] / base
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
        },
        "new_documents_per_load": args.new,
        "growing_kb": rows,
        "reader_held_open_all_run": held,
        "nightly": nightly(args.work, args.nights, args.night_docs),
        "targets": {
            "ingest_into_largest_vs_empty_max": 1.5,
            "parquet_files_per_table_after_nights_max": 50,
            "reader_connect_during_load_max_s": 1.0,
        },
        "wall_s": time.perf_counter() - started,
    }
    if "discovery" in previous:  # the nightly-discovery section is measured on its own (--discovery)
        result["discovery"] = previous["discovery"]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("reader_held_open_all_run", "nightly")}, indent=2))


if __name__ == "__main__":
    main()
