"""Settings resolution: DAG settings from the environment; run settings Param → Variable → env → default."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from chandra_ocr.airflow.settings import DagSettings, RunConfig, resolve_run_config
from chandra_ocr.errors import ConfigError


def test_dag_settings_defaults_and_environment():
    assert DagSettings.from_env({}) == DagSettings()
    env = {"CHANDRA_OCR_SCHEDULE": "0 2 * * *", "CHANDRA_OCR_GPU_SLOTS": "4", "CHANDRA_OCR_RETRIES": "5",
           "CHANDRA_OCR_OCR_TIMEOUT_MIN": "90", "CHANDRA_OCR_GPU_QUEUE": ""}  # fmt: skip
    s = DagSettings.from_env(env)
    assert (s.schedule, s.gpu_slots, s.retries, s.ocr_timeout_min, s.gpu_queue) == (
        "0 2 * * *",
        4,
        5,
        90.0,
        "gpu",
    )
    assert DagSettings.from_env({"CHANDRA_OCR_SCHEDULE": "none"}).schedule is None
    assert s.pools() == {"chandra_ocr_gpu": 4, "chandra_ocr_loader": 1}
    with pytest.raises(ConfigError, match="CHANDRA_OCR_GPU_SLOTS|gpu_slots"):
        DagSettings.from_env({"CHANDRA_OCR_GPU_SLOTS": "two"})


def test_run_settings_resolve_param_then_variable_then_env_then_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"CHANDRA_OCR_SOURCE": "/env/src", "CHANDRA_OCR_ENGINE": "cpu", "CHANDRA_OCR_BATCH_PAGES": "50",
           "CHANDRA_OCR_OPTIONS": '{"chunk": {"max_tokens": 256}}'}  # fmt: skip
    variable = {"source": "/var/src", "preset": "lightonocr2"}
    cfg = resolve_run_config({"source": "/param/src", "kb": None, "engine": ""}, variable, env)
    assert cfg.source == "/param/src"  # Param wins
    assert cfg.kb == str(tmp_path / "kb")  # default, made absolute once for every task
    options = cfg.ingest_options()
    assert (options.engine, options.preset, options.batch_pages) == ("cpu", "lightonocr2", 50)
    assert options.chunk.max_tokens == 256 and options.pdf.settle_seconds == 30.0
    assert resolve_run_config({}, variable, env).source == "/var/src"
    assert resolve_run_config({}, None, env).source == "/env/src"
    assert resolve_run_config({}, None, {}).source == str(tmp_path / "landing")


def test_run_config_round_trips_and_builds_discovery_filters():
    params = {"max_documents": 3, "modified_since": "2024-01-01", "reprocess": True,
              "modified_until": "2024-06-30T12:00:00+02:00", "source": "/data/archive/**/*.pdf"}  # fmt: skip
    cfg = resolve_run_config(params, None, {})
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.source == "/data/archive/**/*.pdf" and cfg.ingest_options().reprocess is True
    filters = cfg.filters()
    assert filters["limit"] == 3
    assert filters["modified_since"] == datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    assert filters["modified_until"] == datetime(2024, 6, 30, 10, tzinfo=UTC).timestamp()
    assert Path(resolve_run_config({"source": "in/*.pdf"}, None, {}).source).is_absolute()


@pytest.mark.parametrize(
    ("params", "variable", "match"),
    [
        ({"max_documents": 0}, None, "max_documents"),
        ({"modified_since": "last tuesday"}, None, "modified_since"),
        ({"engine": "gpu"}, None, "engine must be one of"),
        ({}, {"sauce": "/x"}, "unknown key"),
        ({}, {"options": {"chunk": {"max_tokens": 10, "overlap_tokens": 20}}}, "overlap"),
        ({}, {"options": {"pdf": {"wokers": 2}}}, "wokers"),
    ],
)
def test_bad_settings_are_config_errors(params, variable, match):
    with pytest.raises(ConfigError, match=match):
        resolve_run_config(params, variable, {})
