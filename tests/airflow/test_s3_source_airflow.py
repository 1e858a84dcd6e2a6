"""An S3 bucket as the ingest DAG's source, read through ``ObjectStoragePath`` with ``source_conn_id``
(the Amazon provider's connection), with ``dag.test()`` against the session's metadata DB.

The store is an S3 emulator: moto's standalone server on 127.0.0.1 (chandra_ocr.testing.s3_server), one per
pytest session.
"""

from __future__ import annotations

import json
import os

import pytest
from airflow_runs import run_dag
from kb_query import kb_rows

from chandra_ocr.airflow.preflight import check_run_paths
from chandra_ocr.airflow.settings import resolve_run_config
from chandra_ocr.errors import ConfigError
from chandra_ocr.testing.synthetic_pdfs import pdf_bytes

BUCKET = "airflow-archive"


@pytest.fixture()
def connection(s3, monkeypatch):
    """Two AWS connections to the emulator, defined as Airflow reads them from the environment."""

    def define(conn_id: str, secret: str) -> None:
        value = {"conn_type": "aws", "login": s3.key_id, "password": secret,
                 "extra": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"}}  # fmt: skip
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(value))

    define("archive_s3", s3.secret)
    define("archive_s3_wrong", "not-the-secret")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)  # the connection alone must be enough
    client = s3.client()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.mark.slow
def test_ingest_from_a_bucket_with_a_connection(connection, tmp_path):
    for i in range(3):
        connection.put_object(Bucket=BUCKET, Key=f"land/r{i}.pdf", Body=pdf_bytes(500 + i, pages=2))
    url, kb = f"s3://{BUCKET}/land", tmp_path / "kb"
    conf = {"source": url, "source_conn_id": "archive_s3", "kb": str(kb), "engine": "text"}
    run = run_dag("chandra_ocr_ingest", **conf)
    assert run.state == "success", run.tasks
    assert dict(kb_rows(kb, "SELECT source_uri, status FROM documents")) == {
        f"{url}/r{i}.pdf": "ingested" for i in range(3)
    }
    assert not list((kb / "work").rglob("source.pdf"))  # the streamed copies are gone after the load
    (old_id,) = kb_rows(kb, "SELECT doc_id FROM documents WHERE source_uri = ?", f"{url}/r1.pdf")[0]
    old_chunks = {r[0] for r in kb_rows(kb, "SELECT chunk_id FROM chunks WHERE doc_id = ?", old_id)}

    connection.put_object(Bucket=BUCKET, Key="land/r1.pdf", Body=pdf_bytes(501, pages=1, note="v2"))
    again = run_dag("chandra_ocr_ingest", **conf)
    assert again.state == "success", again.tasks
    rows = kb_rows(kb, "SELECT doc_id, n_pages FROM documents WHERE source_uri = ?", f"{url}/r1.pdf")
    assert len(rows) == 1 and rows[0][0] != old_id and rows[0][1] == 1
    dead = {r[0] for r in kb_rows(kb, "SELECT chunk_id FROM chunk_tombstones WHERE doc_id = ?", old_id)}
    assert old_chunks and old_chunks <= dead
    assert kb_rows(kb, "SELECT count(*) FROM documents")[0][0] == 3


def test_wrong_credentials_fail_the_preflight_naming_the_connection(connection, tmp_path):
    connection.put_object(Bucket=BUCKET, Key="denied/a.pdf", Body=pdf_bytes(600))
    url, kb = f"s3://{BUCKET}/denied", tmp_path / "kb"
    conf = {"source": url, "source_conn_id": "archive_s3_wrong", "kb": str(kb), "engine": "text"}
    run = run_dag("chandra_ocr_ingest", **conf)
    assert run.state == "failed"
    assert run.states("preflight") == ["failed"] and run.states("discover") != ["success"]
    assert not (kb / "kb.duckdb").exists()  # nothing read, nothing written
    with pytest.raises(ConfigError) as error:  # the message the preflight task logged
        check_run_paths(resolve_run_config(conf, None, os.environ), os.environ)
    message = str(error.value)
    assert "\n" not in message
    assert f"cannot list {url} with the credentials of Airflow connection 'archive_s3_wrong'" in message
