"""Server faults during a real pipeline run (openai engine → fault proxy → the real vLLM server).

Each fault is either transient (the engine's retries ride it out and every document is ingested)
or persistent (the run fails with EngineError after its retries, and the knowledge base has no
rows and nothing staged: nothing partial). Length-cut generations are the model's own fault: those
pages fall back and the documents are still ingested.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import duckdb
import pytest
from fault_proxy import FaultProxy
from ingest_paths import PATHS
from kb_query import documents_by_name, kb_rows
from vllm_server import API_KEY

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.errors import EngineError
from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
from chandra_ocr.ocr.presets import Sampling

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]

TIMEOUT_S = 4.0  # per request; the tiny model answers in well under a second


@pytest.fixture
def proxy(vllm_server):
    fp = FaultProxy(vllm_server.base_url.removesuffix("/v1"), delay_s=TIMEOUT_S + 4)
    yield fp
    fp.close()


@pytest.fixture
def scans(corpus: Path, samples: Path, tmp_path: Path) -> Path:
    """Three scanned single-page documents (OCR route)."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(samples / "scanned_memo.pdf", src / "memo.pdf")
    for name in ("phototest", "eurotext"):
        shutil.copy(corpus / f"derived/{name}.scan.pdf", src / f"{name}.pdf")
    return src


@pytest.fixture
def ingest(request: pytest.FixtureRequest):
    """The path of the test's ``path`` parameter (tests/ingest_paths.py): the CLI runner or the operators."""
    path = getattr(request, "param", "cli")
    if path == "airflow":
        request.getfixturevalue("airflow_db")
    return PATHS[path]


def _ingest(ingest, src: Path, kb: Path, preset, proxy: FaultProxy, **server) -> dict[str, int]:
    values = {
        "base_url": proxy.base_url, "api_key": API_KEY, "seed": 0, "max_in_flight": 2,
        # backoff 0.5 + 1 + 2 + 4 s: outlasts two back-to-back "refuse" windows (1.5 s each, plus the
        # proxy's shutdown latency) even on a loaded machine
        "max_retries": 4, "backoff_s": 0.5, "timeout_s": TIMEOUT_S,
    } | server  # fmt: skip
    engine = OpenAIEngine(preset, ServerOptions(**values))
    options = IngestOptions(engine="openai", pdf=PdfOptions(settle_seconds=0, compress=False))
    try:
        return ingest(src, kb, options, engine)
    finally:
        engine.close()


def _rows(kb: Path) -> dict[str, tuple]:
    pages = kb_rows(kb, "SELECT engine, status, finish_reason FROM pages ORDER BY ALL")
    return {"docs": documents_by_name(kb), "pages": pages}


BOTH = [("500", "cli"), ("500", "airflow")]  # a fault the tests run through both production paths


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("fault", "ingest"),
    [*BOTH, ("drop", "cli"), ("delay", "cli"), ("truncate", "cli"), ("refuse", "cli")],
    indirect=["ingest"],
)
def test_a_transient_fault_is_retried_and_every_document_ingested(
    fault, ingest, scans, tmp_path, preset, proxy, caplog
):
    caplog.set_level(logging.WARNING, logger="chandra_ocr.ocr.openai_engine")
    proxy.inject(fault, fault)  # the first two page requests fail

    statuses = _ingest(ingest, scans, tmp_path / "kb", preset, proxy)

    rows = _rows(tmp_path / "kb")
    assert statuses == {"ingested": 3}
    assert set(rows["docs"].values()) == {("ingested", None)} and len(rows["pages"]) == 3
    assert any(engine == "openai" for engine, _, _ in rows["pages"]), rows["pages"]
    assert proxy.counts[fault] >= 1 and proxy.counts["chat"] > proxy.counts[fault]
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retries, "the fault must have been seen and retried"
    assert all(API_KEY not in m for m in retries)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("fault", "ingest"), [*BOTH, ("delay", "cli"), ("refuse", "cli")], indirect=["ingest"]
)
def test_a_persistent_fault_fails_the_run_cleanly_with_no_rows(
    fault, ingest, scans, tmp_path, preset, proxy, caplog
):
    caplog.set_level(logging.DEBUG)
    proxy.relisten_s = None  # "refuse" stays refused
    proxy.inject(always=fault)
    kb = tmp_path / "kb"

    with pytest.raises(EngineError, match="after 3 tries") as failure:
        _ingest(ingest, scans, kb, preset, proxy, max_retries=2, backoff_s=0.2)

    assert API_KEY not in str(failure.value) and API_KEY not in caplog.text
    assert not [p for d in ("staging", "parquet") for p in (kb / d).rglob("*.parquet")]
    if (kb / "kb.duckdb").exists():
        con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
        try:
            tables = [
                r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
            ]
            assert all(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] == 0 for t in tables)
        finally:
            con.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ingest", ["cli", "airflow"], indirect=True)
def test_length_cut_output_falls_back_and_the_documents_are_ingested(ingest, scans, tmp_path, preset, proxy):
    """Generations cut at max_tokens (``length``) never count as read: each page retries on the
    temperature schedule, then Tesseract reads it; the run itself succeeds."""
    cut = dataclasses.replace(preset, sampling=Sampling(max_tokens=2, temperatures=(0.0, 0.5), stop=()))

    statuses = _ingest(ingest, scans, tmp_path / "kb", cut, proxy)

    rows = _rows(tmp_path / "kb")
    assert statuses == {"ingested": 3}
    assert rows["pages"] == [("cpu", "fallback", "length")] * 3
    assert proxy.counts["chat"] == 3 * 2  # two attempts per page, no fault injected
