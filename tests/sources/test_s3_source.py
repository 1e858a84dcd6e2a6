"""An S3 bucket as the source, through the real CLI (a child process with the standard AWS environment).

The store is an S3 emulator (moto's standalone server on 127.0.0.1, chandra_ocr.testing.s3_server), spoken
to over HTTP by s3fs as a user's CLI does; one server per pytest session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kb_query import kb_rows

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.sources.entries_table import read_entries
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.stages import Assemble, Discover, Extract, Load, RunContext
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.testing.synthetic_pdfs import pdf_bytes

BUCKET = "archive"
N_PDFS = 1010  # more than one listing page (S3 returns at most 1,000 keys per request)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chandra_ocr.cli", *args],
        capture_output=True,
        text=True,
        env=os.environ | env,
        timeout=900,
    )


def ingest(s3, kb: Path, url: str, *extra: str, env: dict[str, str] | None = None):
    args = ("run", url, "--kb", str(kb), "--engine", "text", "--settle-seconds", "0", "--no-compress")
    return cli(env or s3.env(), *args, "--workers", "1", *extra)


@pytest.fixture(scope="module")
def bucket(s3) -> str:
    s3.client().create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture(scope="module")
def archive(s3, bucket):
    """A bucket prefix with N_PDFS one-page PDFs and a few objects discovery must pass by."""
    client = s3.client()
    with ThreadPoolExecutor(8) as pool:
        keys = [(f"big/{i // 100:02d}/doc-{i:05d}.pdf", i) for i in range(N_PDFS)]
        list(pool.map(lambda k: client.put_object(Bucket=BUCKET, Key=k[0], Body=pdf_bytes(k[1])), keys))
    client.put_object(Bucket=BUCKET, Key="big/notes.txt", Body=b"not a pdf")
    client.put_object(Bucket=BUCKET, Key="big/.hidden/doc.pdf", Body=pdf_bytes(-1))
    return f"s3://{BUCKET}/big"


@pytest.mark.slow
def test_bucket_with_more_than_one_listing_page(s3, archive, tmp_path):
    kb = tmp_path / "kb"
    done = ingest(s3, kb, archive)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = kb_rows(kb, "SELECT status, count(*) FROM documents GROUP BY ALL")
    assert dict(rows) == {"ingested": N_PDFS}
    uris = {r[0] for r in kb_rows(kb, "SELECT source_uri FROM documents")}
    assert f"{archive}/00/doc-00000.pdf" in uris and f"{archive}/10/doc-01009.pdf" in uris
    layout = KbLayout(kb)
    assert len(read_entries(layout)) == N_PDFS
    assert not list((kb / "work").rglob("source.pdf"))  # copies deleted once loaded
    assert not list(layout.fetch_spool.glob("*")) if layout.fetch_spool.exists() else True

    again = ingest(s3, kb, archive)  # nightly no-op: the listing only, nothing read
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"found 0 new, {N_PDFS} already ingested" in again.stdout
    assert f"{N_PDFS} unchanged since the last run (not read), 0 read and hashed (0 bytes)" in again.stdout

    forced = ingest(s3, kb, archive, "--rehash")
    assert f"0 unchanged since the last run (not read), {N_PDFS} read and hashed" in forced.stdout
    assert "found 0 new" in forced.stdout


@pytest.mark.slow
def test_replaced_and_deleted_objects(s3, bucket, tmp_path):
    client, prefix = s3.client(), "small"
    for i in range(3):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/d{i}.pdf", Body=pdf_bytes(100 + i, pages=2))
    kb, url = tmp_path / "kb", f"s3://{BUCKET}/{prefix}"
    assert ingest(s3, kb, url).returncode == 0
    (old_id,) = kb_rows(kb, "SELECT doc_id FROM documents WHERE source_uri = ?", f"{url}/d0.pdf")[0]
    old_chunks = {r[0] for r in kb_rows(kb, "SELECT chunk_id FROM chunks WHERE doc_id = ?", old_id)}

    client.put_object(Bucket=BUCKET, Key=f"{prefix}/d0.pdf", Body=pdf_bytes(100, pages=1, note="v2"))
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/d2.pdf")
    done = ingest(s3, kb, url)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "found 1 new, 1 already ingested" in done.stdout
    assert (
        f"gone from the source since the last run (kept in the KB; `forget` removes them): {url}/d2.pdf"
        in (done.stdout)
    )
    rows = kb_rows(kb, "SELECT doc_id, n_pages FROM documents WHERE source_uri = ?", f"{url}/d0.pdf")
    assert len(rows) == 1 and rows[0][0] != old_id and rows[0][1] == 1  # re-ingested, the old one gone
    tombstoned = {r[0] for r in kb_rows(kb, "SELECT chunk_id FROM chunk_tombstones WHERE doc_id = ?", old_id)}
    assert old_chunks and old_chunks <= tombstoned
    assert kb_rows(kb, "SELECT count(*) FROM documents")[0][0] == 3  # d2's document stays


@pytest.mark.slow
def test_object_deleted_between_discovery_and_extraction(s3, bucket, tmp_path, monkeypatch):
    """Discovery streamed the object into its work area: the batch reads that copy, the run goes on,
    and the next discovery records the object as gone from the source."""
    client, prefix = s3.client(), "vanishing"
    for i in range(2):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/v{i}.pdf", Body=pdf_bytes(200 + i))
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{BUCKET}/{prefix}"
    options = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False, workers=1))
    from chandra_ocr.stages.context import build_run_engine

    ctx = RunContext.new(tmp_path / "kb", options, "r1", engine=build_run_engine(options))
    layout = ctx.layout
    discover = Discover(ctx)
    discovery = discover.find(ObjectSource(url))
    assert len(discovery.new) == 2
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/v1.pdf")  # between discovery and extraction

    ctx.ocr.start()
    with ctx.pool():
        batches = discover.plan(discovery)
        for batch in batches:
            Assemble(ctx)(Extract(ctx)(batch))
    Load(ctx)(batches, run=batches)
    assert dict(kb_rows(layout.root, "SELECT source_uri, status FROM documents")) == {
        f"{url}/v0.pdf": "ingested",
        f"{url}/v1.pdf": "ingested",
    }
    assert not any(Path(d.local).exists() for b in batches for d in b.docs if d.local)
    later = discover.find(ObjectSource(url))
    assert later.gone == [f"{url}/v1.pdf"] and not later.new


def test_object_deleted_after_listing_is_refused_with_reason(s3, bucket, tmp_path, monkeypatch):
    client = s3.client()
    client.put_object(Bucket=BUCKET, Key="gone/g.pdf", Body=pdf_bytes(300))
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    source = ObjectSource(f"s3://{BUCKET}/gone")
    listed = list(source.entries())

    class Listed(ObjectSource):  # the listing as it was, the object deleted before it is read
        def entries(self):
            return iter(listed)

    client.delete_object(Bucket=BUCKET, Key="gone/g.pdf")
    options = IngestOptions(pdf=PdfOptions(settle_seconds=0))
    found = Discover(RunContext.new(tmp_path / "kb", options, "r"))(Listed(source.url, source.fs)).discovery
    assert found.refused == [(f"s3://{BUCKET}/gone/g.pdf", "deleted from the source after it was listed")]
    assert not found.new


def test_wrong_credentials_fail_in_one_line_and_change_nothing(s3, archive, tmp_path):
    kb = tmp_path / "kb"
    done = ingest(s3, kb, archive, env=s3.env() | {"AWS_SECRET_ACCESS_KEY": "wrong"})
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [x for x in done.stderr.strip().splitlines() if " INFO " not in x]  # the clients' own logging
    assert len(lines) <= 2 and "Traceback" not in done.stderr
    assert f"cannot list {archive} with the credentials of the store's standard environment" in lines[-1]
    assert not (kb / "kb.duckdb").exists()
