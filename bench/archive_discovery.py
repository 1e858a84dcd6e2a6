"""Nightly discovery at archive scale (issue 16): the cost of a run that finds nothing new, and of one
that finds 1,000 new documents, against the archive's size, from a local folder and from S3.

    .venv/bin/python -m bench.archive_scale --discovery [--local-sizes 10000,30000,100000]
                                            [--s3-sizes 10000] [--big-files 1000] [--big-mb 2]

Each "run" is ``pipeline.run`` with the text engine (the CLI's ``run`` without its printing), in
this process. The archive holds synthetic PDFs: one born-digital template made unique per file
by a trailing comment (a few kB each), and for the bytes target ``--big-files`` files of 0.5-3.5 MB
(``--big-mb`` on average: a scanned document's size). Known files are made known as a first run
would: a real discovery over them (it hashes every byte: ``hash_once_s``), then their ``documents``
rows written in one write session (the rest of a document's rows plays no part in discovery).
At each size: the no-op run (median of 3) with its wall time, the bytes this process read
(``rchar`` of /proc/self/io: files, kb.duckdb, the entries table, sockets) and the bytes of source
entries discovery read; then 1,000 new real one-page PDFs are added and ingested (timed), and
the no-op is measured once more. The S3 store is moto's standalone server on 127.0.0.1
(chandra_ocr.testing.s3_server), read through s3fs as the CLI does.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

from bench.archive_scale import NOW, arrow_rows, one_page_document
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.ocr.registry import build_engine
from chandra_ocr.pipeline import run
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.sources.source import open_source
from chandra_ocr.stages import Discover, RunContext
from chandra_ocr.store.dataset import add_files, next_gen, write_file
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.session import write_session
from chandra_ocr.testing.synthetic_pdfs import pdf_bytes

OPTIONS = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False, workers=2))
TEMPLATE = pdf_bytes(0)


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def archive_file(i: int, size: int = 0) -> bytes:
    """The template PDF made unique by a trailing comment, padded to ``size`` bytes."""
    tail = f"\n%archive {i}\n".encode()
    pad = max(0, size - len(TEMPLATE) - len(tail))
    return TEMPLATE + tail + (random.randbytes(pad) if pad else b"")


def write_local(folder: Path, start: int, stop: int, size: int = 0) -> None:
    for i in range(start, stop):
        path = folder / f"{i // 1000:04d}" / f"doc-{i:07d}.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(archive_file(i, size))


def put_s3(client, bucket: str, prefix: str, items: list[tuple[str, bytes]]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(lambda kv: client.put_object(Bucket=bucket, Key=f"{prefix}/{kv[0]}", Body=kv[1]), items)
        )


def make_known(source, layout: KbLayout) -> dict:
    """A real discovery over what is new (every byte hashed), then the documents rows of what it found."""
    t0, r0 = time.perf_counter(), _rchar()
    found = Discover(RunContext.new(layout.root, OPTIONS, "known")).find(source)
    hashed = {"hash_once_s": time.perf_counter() - t0, "hash_once_rchar": _rchar() - r0,
              "hashed": found.hashed, "hashed_bytes": found.bytes_read}  # fmt: skip
    rows = _template_documents()
    n = len(found.new)
    table = rows.take(pa.array([0] * n, pa.int64()))
    for name, values in (
        ("doc_id", [f.doc_id for f in found.new]),
        ("source_uri", [f.path for f in found.new]),
        ("file_name", [f.path.rsplit("/", 1)[-1] for f in found.new]),
    ):
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    with write_session(layout) as session:
        session.con.register("known", table)
        query = "SELECT * FROM known ORDER BY doc_id"
        add_files(session.con, [write_file(session.con, layout, "documents", query, next_gen(session.con))])
        session.con.unregister("known")
    for f in found.new:  # a remote object's copy: a first run would have deleted it after the load
        if f.local:
            Path(f.local).unlink(missing_ok=True)
    return hashed


def _template_documents() -> pa.Table:
    """The documents row of archive_scale.py's one-page template document."""
    doc, chunks = one_page_document("0" * 64, 0)
    return arrow_rows("documents", document_rows(doc, chunks, run_id="known", now=NOW)["documents"])


def timed_run(source, layout: KbLayout, engine, tries: int = 1) -> dict:
    """``tries`` runs of the pipeline: median wall time, and the last one's bytes read and counts."""
    times = []
    for _ in range(tries):
        t0, r0 = time.perf_counter(), _rchar()
        summary = run(source, layout.root, OPTIONS, engine)
        times.append(time.perf_counter() - t0)
        rchar = _rchar() - r0
    d = summary.discovery
    return {"s": statistics.median(times), "tries_s": times, "rchar": rchar,
            "source_bytes_read": d.bytes_read, "new": len(d.new), "known": len(d.known),
            "unchanged_not_read": d.unchanged, "hashed": d.hashed, "statuses": summary.statuses}  # fmt: skip


def local_part(work: Path, sizes: list[int], big_files: int, big_mb: float, engine) -> dict:
    one, big, grow = work / "local-one", work / "local-big", work / "local-grow"
    write_local(one, 0, 1)
    kb_one = KbLayout(work / "kb-local-one")
    make_known(open_source(str(one)), kb_one)
    baseline = timed_run(open_source(str(one)), kb_one, engine, tries=3)

    rng = random.Random(16)
    for i in range(big_files):
        path = big / f"{i // 100:03d}" / f"scan-{i:05d}.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(archive_file(10_000_000 + i, int(rng.uniform(0.25, 1.75) * big_mb * 2**20)))
    kb_big = KbLayout(work / "kb-local-big")
    hashed = make_known(open_source(str(big)), kb_big)
    noop = timed_run(open_source(str(big)), kb_big, engine, tries=3)
    beyond = noop["s"] - baseline["s"]
    bytes_target = {
        "files": big_files, "bytes": hashed["hashed_bytes"], **hashed, "noop": noop,
        "one_file_noop": baseline, "noop_beyond_one_file_s": beyond,
        "beyond_vs_hash_once": beyond / hashed["hash_once_s"],
    }  # fmt: skip
    return {"bytes_target": bytes_target, "by_size": _growing(grow, sizes, engine, work / "kb-local-grow")}


def _growing(folder: Path, sizes: list[int], engine, kb: Path, s3=None) -> list[dict]:
    layout, have, rows, extra = KbLayout(kb), 0, [], 0
    source = (lambda: ObjectSource(s3[1])) if s3 else (lambda: open_source(str(folder)))
    for size in sizes:
        if s3:
            put_s3(
                s3[0],
                s3[2],
                s3[3],
                [(f"{i // 1000:04d}/doc-{i:07d}.pdf", archive_file(i)) for i in range(have, size)],
            )
        else:
            write_local(folder, have, size)
        have = size
        hashed = make_known(source(), layout)
        noop = timed_run(source(), layout, engine, tries=3)
        new = [(f"new-{size}/n-{j:05d}.pdf", pdf_bytes(1_000_000 + size + j)) for j in range(1000)]
        if s3:
            put_s3(s3[0], s3[2], s3[3], new)
        else:
            for name, body in new:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(body)
        extra += len(new)
        ingest = timed_run(source(), layout, engine)
        after = timed_run(source(), layout, engine)
        rows.append({"archive_docs": size + extra - len(new), "hash_new_files": hashed, "noop": noop,
                     "ingest_1000_new": ingest, "noop_after_ingest": after})  # fmt: skip
        print(f"size {size}: noop {noop['s']:.2f} s, ingest 1000 new {ingest['s']:.1f} s", flush=True)
    return rows


def s3_part(work: Path, sizes: list[int], engine) -> dict:
    from chandra_ocr.testing.s3_server import s3_server

    with s3_server() as server:
        os.environ.update(server.env())
        client = server.client()
        client.create_bucket(Bucket="bench")
        put_s3(client, "bench", "one", [("doc-0.pdf", archive_file(0))])
        kb_one = KbLayout(work / "kb-s3-one")
        make_known(ObjectSource("s3://bench/one"), kb_one)
        baseline = timed_run(ObjectSource("s3://bench/one"), kb_one, engine, tries=3)
        rows = _growing(
            work, sizes, engine, work / "kb-s3-grow", s3=(client, "s3://bench/grow", "bench", "grow")
        )
    return {"one_object_noop": baseline, "by_size": rows}


def discovery_section(
    work: Path, local_sizes: list[int], s3_sizes: list[int], big_files: int, big_mb: float
) -> dict:
    engine = build_engine("text", "chandra2", {})
    started = time.perf_counter()
    local = local_part(work, local_sizes, big_files, big_mb, engine)
    remote = s3_part(work, s3_sizes, engine) if s3_sizes else None
    largest = local["by_size"][-1]
    return {
        "what": __doc__.split("\n\n")[0],
        "local": local,
        "s3": remote,
        "targets": {
            "noop_beyond_one_file_vs_hash_once_max": 0.10,
            "noop_at_100000_max_s": 60.0,
            "met": {
                "bytes": local["bytes_target"]["beyond_vs_hash_once"] <= 0.10
                and local["bytes_target"]["bytes"] >= 2 * 10**9,
                "noop_largest_s": largest["noop"]["s"],
                "noop_largest_under_60_s": largest["noop"]["s"] < 60 and largest["archive_docs"] >= 100_000,
            },
        },
        "wall_s": time.perf_counter() - started,
    }
