"""Page images of a document ingested from an object store: drawn from the object with the store's
credentials (the S3 emulator of chandra_ocr.testing.s3_server, spoken to by s3fs as a CLI user's would)."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import urllib.request

import fsspec
import pytest
from PIL import Image

from chandra_ocr.browser.images import PageImages, SourceUnavailable
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3_kb(s3, samples, tmp_path_factory):
    """report.pdf ingested by ``chandra-ingest run s3://…`` (text engine): the KB and its row."""
    s3.client().create_bucket(Bucket="browser")
    s3.client().put_object(Bucket="browser", Key="in/report.pdf", Body=(samples / "report.pdf").read_bytes())
    kb = tmp_path_factory.mktemp("s3-kb")
    args = ["run", "s3://browser/in", "--kb", str(kb), "--engine", "text", "--settle-seconds", "0"]
    done = subprocess.run([sys.executable, "-m", "chandra_ocr.cli", *args, "--workers", "1"],
                          capture_output=True, text=True, env=os.environ | s3.env(), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    con = connect(KbLayout(kb), read_only=True)
    try:
        row = con.execute("SELECT doc_id, source_uri, bytes FROM documents").fetchall()[0]
    finally:
        con.close()
    assert row[1] == "s3://browser/in/report.pdf"
    return kb, row


def test_serve_draws_a_page_from_the_object_store(s3, s3_kb):
    kb, (doc_id, _, _) = s3_kb
    process = subprocess.Popen(
        [sys.executable, "-m", "chandra_ocr.cli", "serve", "--kb", str(kb), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ | s3.env(),
    )  # fmt: skip
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        base = re.search(r"http://127\.0\.0\.1:\d+", process.stdout.readline() if ready else "")
        assert base, "serve did not start"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{base.group(0)}/doc/{doc_id}/page/1/image.png", timeout=60) as reply:
            image = Image.open(io.BytesIO(reply.read()))
        assert image.width == 1200 and image.height > 1200  # a portrait page at screen width
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_wrong_credentials_give_a_reason_instead_of_an_image(s3, s3_kb, monkeypatch):
    _, (doc_id, source_uri, size) = s3_kb
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    try:
        with pytest.raises(SourceUnavailable, match="the source cannot be read"):
            PageImages().png(doc_id, 1, source_uri, size)
    finally:  # fsspec keeps the filesystem made with the wrong key; later tests must not get it
        fsspec.get_filesystem_class("s3").clear_instance_cache()
