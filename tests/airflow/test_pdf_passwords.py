"""Passwords of encrypted PDFs from the Airflow Variable ``chandra_ocr_pdf_passwords``: used by the OCR
task, masked in its logs, never in a manifest (XCom)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from airflow_runs import query

PASSWORD = "userpass"  # camelot's health_protected.pdf (corpus PASSWORDS.md)
POOLS = '{"chandra_ocr_gpu": 1, "chandra_ocr_loader": 1}'

pytestmark = pytest.mark.corpus


def _ingest(src: Path, kb: Path) -> list[dict]:
    from chandra_ocr.airflow.operators import (
        AssembleOperator,
        ChandraOcrOperator,
        CompressOperator,
        DiscoverOperator,
    )  # fmt: skip
    from chandra_ocr.airflow.preflight import PreflightOperator
    from chandra_ocr.store.duckdb_store import load_documents
    from chandra_ocr.store.layout import KbLayout

    pools = ["chandra_ocr_gpu", "chandra_ocr_loader"]
    config = PreflightOperator(task_id="preflight", pools=pools).execute(
        {"params": {"source": str(src), "kb": str(kb), "engine": "text"}}
    )
    manifests = []
    for i, batch in enumerate(DiscoverOperator(task_id="discover", config=config).execute({"run_id": "r"})):
        batch = CompressOperator(task_id=f"c{i}", config=config, batch=batch).execute({"run_id": "r"})
        batch = ChandraOcrOperator(task_id=f"o{i}", config=config, batch=batch).execute({"run_id": "r"})
        manifests.append(
            AssembleOperator(task_id=f"a{i}", config=config, batch=batch).execute({"run_id": "r"})
        )
    load_documents(KbLayout(kb), "r", [d["doc_id"] for b in manifests for d in b["docs"]])
    return [config, *manifests]


def test_the_ocr_task_opens_encrypted_pdfs_with_the_variable_and_masks_it(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    src = tmp_path / "in"
    src.mkdir()
    (src / "health.pdf").write_bytes((corpus / "camelot/tests/files/health_protected.pdf").read_bytes())
    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR_POOLS", POOLS)  # outside a task: the environment backend
    caplog.set_level(logging.DEBUG)

    locked = _ingest(src, tmp_path / "kb-locked")  # no Variable: quarantined with the reason
    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR_PDF_PASSWORDS", json.dumps({"health.pdf": PASSWORD}))
    opened = _ingest(src, tmp_path / "kb")

    assert query(tmp_path / "kb-locked", "SELECT status, error FROM documents") == [
        ("quarantined", "encrypted: a password is required to open it")
    ]
    assert query(tmp_path / "kb", "SELECT status, error FROM documents") == [("ingested", None)]
    assert "Public Health Outlay" in query(tmp_path / "kb", "SELECT string_agg(text, ' ') FROM blocks")[0][0]
    assert PASSWORD not in json.dumps([locked, opened])  # manifests (XCom) never carry it
    assert PASSWORD not in caplog.text


def test_a_malformed_variable_fails_the_task_without_quoting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from chandra_ocr.airflow.operators import _pdf_passwords
    from chandra_ocr.errors import ConfigError

    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR_PDF_PASSWORDS", '{"a.pdf": "s3cret-value"')
    with pytest.raises(ConfigError, match="chandra_ocr_pdf_passwords") as err:
        _pdf_passwords()
    assert "s3cret" not in str(err.value)
