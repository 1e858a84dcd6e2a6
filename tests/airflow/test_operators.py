"""Each operator's ``execute(context)`` on real files, a real KB and real engines (no scheduler)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from airflow_runs import landing, query

from chandra_ocr.errors import ConfigError

POOLS = '{"chandra_ocr_gpu": 1, "chandra_ocr_loader": 1}'


@pytest.fixture
def pools_recorded(monkeypatch):
    """Outside a task the Task SDK reads Variables from the environment backend: record the pools there."""
    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR_POOLS", POOLS)


def _preflight(params: dict) -> dict:
    from chandra_ocr.airflow.preflight import PreflightOperator

    op = PreflightOperator(task_id="preflight", pools=["chandra_ocr_gpu", "chandra_ocr_loader"])
    return op.execute({"params": params})


def test_stage_operators_run_the_pipeline_and_pass_only_manifests(tmp_path, samples, pools_recorded):
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from chandra_ocr.airflow.graph import KB_ASSET
    from chandra_ocr.airflow.operators import (
        AssembleOperator,
        ChandraOcrOperator,
        CompressOperator,
        DiscoverOperator,
        LoadOperator,
    )  # fmt: skip

    src = landing(tmp_path / "in", {p.stem: p for p in samples.glob("*.pdf")})
    kb = tmp_path / "kb"
    config = _preflight({"source": str(src), "kb": str(kb), "engine": "cpu", "batch_pages": 3})
    batches = DiscoverOperator(task_id="discover", config=config).execute({"run_id": "r1"})
    assert sorted(Path(d["source"]).name for b in batches for d in b["docs"]) == sorted(
        p.name for p in samples.glob("*.pdf")
    )
    assert len(batches) >= 2  # 3 pages per batch: the samples need more than one
    done = []
    for i, batch in enumerate(batches):
        batch = CompressOperator(task_id=f"c{i}", config=config, batch=batch).execute({"run_id": "r1"})
        batch = ChandraOcrOperator(task_id=f"o{i}", config=config, batch=batch).execute({"run_id": "r1"})
        done.append(AssembleOperator(task_id=f"a{i}", config=config, batch=batch).execute({"run_id": "r1"}))
    manifests = json.dumps([config, batches, done])
    assert len(manifests) < 8_000 and "ledgers" not in manifests  # manifests only: no document text
    events = OutletEventAccessors()
    load = LoadOperator(task_id="load", config=config, batches=done, kb_asset=KB_ASSET)
    summary = load.execute({"run_id": "r1", "outlet_events": events})
    assert summary["documents"] == dict(query(kb, "SELECT status, count(*) FROM documents GROUP BY status"))
    assert summary["documents"] == {"ingested": 3, "quarantined": 1}
    assert summary["pages"] == query(kb, "SELECT count(*) FROM pages")[0][0] == 5  # 2 + 1 + 2 + 0
    assert summary["chunks"] == query(kb, "SELECT count(*) FROM chunks")[0][0] > 0
    assert events[KB_ASSET].extra == summary
    assert query(kb, "SELECT run_id, n_documents FROM runs") == [("r1", 4)]
    metrics = json.loads(query(kb, "SELECT metrics FROM runs")[0][0])
    assert metrics["ocr_pages"] == query(kb, "SELECT count(*) FROM pages WHERE route = 'ocr'")[0][0]
    assert metrics["batches"] == len(batches)
    assert query(kb, "SELECT DISTINCT engine FROM pages WHERE route = 'ocr'") == [("cpu",)]
    assert query(kb, "SELECT DISTINCT run_id FROM documents") == [("r1",)]  # whichever task wrote them


def test_discover_maps_at_most_max_batches_and_leaves_the_rest(tmp_path, samples, pools_recorded):
    from chandra_ocr.airflow.operators import DiscoverOperator

    src = landing(tmp_path / "in", {p.stem: p for p in samples.glob("*.pdf")})
    config = _preflight({"source": str(src), "kb": str(tmp_path / "kb"), "batch_pages": 1})
    context = {"run_id": "r1"}
    assert len(DiscoverOperator(task_id="d", config=config).execute(context)) == 4  # one document per batch
    assert len(DiscoverOperator(task_id="d", config=config, max_batches=2).execute(context)) == 2


def test_preflight_names_missing_pools_and_the_setup_command(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_CHANDRA_OCR_POOLS", raising=False)
    with pytest.raises(ConfigError, match=r"chandra_ocr_gpu.*python -m chandra_ocr.airflow.setup"):
        _preflight({})
    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR_POOLS", '{"chandra_ocr_gpu": 1}')
    with pytest.raises(ConfigError, match=r"\['chandra_ocr_loader'\]"):
        _preflight({})


def test_preflight_reads_the_chandra_ocr_variable(pools_recorded, monkeypatch, tmp_path, samples):
    variable = {"kb": str(tmp_path), "engine": "text", "source": str(samples)}
    monkeypatch.setenv("AIRFLOW_VAR_CHANDRA_OCR", json.dumps(variable))
    config = _preflight({"preset": "lightonocr2"})
    assert config["kb"] == str(tmp_path) and config["options"]["engine"] == "text"
    assert config["options"]["preset"] == "lightonocr2"


def test_ocr_operator_gets_the_openai_engine_from_the_vllm_connection_lazily(
    monkeypatch, pools_recorded, samples, tmp_path
):
    from chandra_ocr.airflow.operators import ChandraOcrOperator

    config = _preflight({"engine": "openai", "source": str(samples), "kb": str(tmp_path / "kb")})
    op = ChandraOcrOperator(
        task_id="ocr", config=config, batch={}, vllm_conn_id="vllm_gpu1", preset="chandra2"
    )
    assert "hook" not in op.__dict__ and "ocr_engine" not in op.__dict__  # nothing resolved at parse time
    monkeypatch.setenv(
        "AIRFLOW_CONN_VLLM_GPU1", "vllm://:sk-abcdef123456@gpu1:8000/?model=chandra&timeout_s=90"
    )
    engine = op.ocr_engine
    assert engine.name == "openai" and engine.preset.name == "chandra2"
    assert (engine.options.base_url, engine.options.api_key) == ("http://gpu1:8000/v1", "sk-abcdef123456")
    assert engine.options.timeout_s == 90
    assert op.pool == "chandra_ocr_gpu" and op.queue == "gpu" and "engine" in op.template_fields


def test_assemble_task_quarantines_a_document_whose_assembly_times_out(tmp_path, samples, pools_recorded):
    """The production path has the CLI's protection: the assemble task assembles each document in a
    limited PDF worker, so one that cannot be assembled in time is quarantined with the reason and
    the task (the batch) goes on to the load."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from test_pipeline import _long_pdf

    from chandra_ocr.airflow.graph import KB_ASSET
    from chandra_ocr.airflow.operators import (
        AssembleOperator,
        ChandraOcrOperator,
        DiscoverOperator,
        LoadOperator,
    )  # fmt: skip

    # 400 text pages and one scanned page: OCR is quick, but assembling 401 pages takes far longer
    # than the limit below (pebble checks limits every 0.1 s, so a short assembly could slip through).
    src = tmp_path / "in"
    src.mkdir()
    _long_pdf(tmp_path / "long_with_scan.pdf", 400, scan=samples / "scanned_memo.pdf")
    src = landing(src, {"memo": tmp_path / "long_with_scan.pdf"})
    params = {"source": str(src), "kb": str(tmp_path / "kb"), "engine": "cpu"}
    options = {"pdf": {"compress": False, "native_tables": False}, "engine_options": {"dpi": 100}}
    config = _preflight(params | {"options": options})
    (batch,) = DiscoverOperator(task_id="discover", config=config).execute({"run_id": "r1"})
    batch = ChandraOcrOperator(task_id="ocr", config=config, batch=batch).execute({"run_id": "r1"})
    hurried = _preflight(params | {"options": {"pdf": {"doc_timeout_s": 0.15, "native_tables": False}}})
    done = AssembleOperator(task_id="assemble", config=hurried, batch=batch).execute({"run_id": "r1"})
    assert [d["status"] for d in done["docs"]] == ["quarantined"]
    load = LoadOperator(task_id="load", config=config, batches=[done], kb_asset=KB_ASSET)
    load.execute({"run_id": "r1", "outlet_events": OutletEventAccessors()})
    ((status, error),) = query(tmp_path / "kb", "SELECT status, error FROM documents")
    assert status == "quarantined" and error.startswith("assembly failed:") and "limit" in error


def test_preflight_rejects_engine_options_the_engine_does_not_have(pools_recorded, tmp_path, samples):
    """A typo in engine_options fails the run at preflight, before any batch waits for the GPU task."""
    src = landing(tmp_path / "in", {"report": samples / "report.pdf"})
    params = {"source": str(src), "kb": str(tmp_path / "kb"), "engine": "cpu"}
    with pytest.raises(
        ConfigError, match=r"engine_options of the cpu engine: unknown CpuOptions option\(s\): lagn"
    ):
        _preflight(params | {"options": {"engine_options": {"lagn": "deu"}}})
    assert _preflight(params | {"options": {"engine_options": {"lang": "eng"}}})["kb"] == str(tmp_path / "kb")
