"""Settings resolution: DAG settings from the environment; run settings Param → Variable → env → default."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from chandra_ocr.airflow.preflight import check_run_paths
from chandra_ocr.airflow.settings import DagSettings, RunConfig, check_run_conf, resolve_run_config
from chandra_ocr.errors import ConfigError


def test_dag_settings_defaults_and_environment():
    assert DagSettings.from_env({}) == DagSettings()
    env = {"CHANDRA_OCR_SCHEDULE": "0 2 * * *", "CHANDRA_OCR_GPU_SLOTS": "4", "CHANDRA_OCR_RETRIES": "5",
           "CHANDRA_OCR_OCR_TIMEOUT_MIN": "90", "CHANDRA_OCR_GPU_QUEUE": "",
           "CHANDRA_OCR_EXTRACT_TASKS_PER_GPU": "2"}  # fmt: skip
    s = DagSettings.from_env(env)
    assert (s.schedule, s.gpu_slots, s.retries, s.ocr_timeout_min, s.gpu_queue) == (
        "0 2 * * *",
        4,
        5,
        90.0,
        "gpu",
    )
    assert DagSettings.from_env({"CHANDRA_OCR_SCHEDULE": "none"}).schedule is None
    assert s.pools(s.extract_tasks_per_gpu) == {"chandra_ocr_gpu": 8, "chandra_ocr_loader": 1}  # 4 GPUs × 2
    with pytest.raises(ConfigError, match="CHANDRA_OCR_GPU_SLOTS|gpu_slots"):
        DagSettings.from_env({"CHANDRA_OCR_GPU_SLOTS": "two"})
    with pytest.raises(ConfigError, match="CHANDRA_OCR_EXTRACT_TASKS_PER_GPU"):
        DagSettings.from_env({"CHANDRA_OCR_EXTRACT_TASKS_PER_GPU": "0"})


def test_extract_tasks_per_gpu_come_from_the_models_capacity_unless_set(monkeypatch):
    from chandra_ocr.airflow import setup
    from chandra_ocr.ocr import capacity
    from chandra_ocr.ocr.presets import get_preset

    settings = DagSettings.from_env({})
    assert settings.extract_tasks_per_gpu is None
    h100 = 81_559 / 1024  # GiB
    n, why = setup.extract_tasks_per_gpu(settings, {}, gpu_memory_gib=h100)
    assert n == capacity.plan_tasks_per_gpu(get_preset("olmocr2"), 100, int(h100 * 2**30)).tasks_per_gpu
    assert "olmocr2" in why and "--gpu-memory-gib" in why
    env = {"CHANDRA_OCR_PRESET": "chandra2", "CHANDRA_OCR_BATCH_PAGES": "400"}  # the deployment's own
    n2, why2 = setup.extract_tasks_per_gpu(settings, env, gpu_memory_gib=h100)
    assert n2 == capacity.plan_tasks_per_gpu(get_preset("chandra2"), 400, int(h100 * 2**30)).tasks_per_gpu
    assert n2 < n and "400-page batch" in why2
    monkeypatch.setattr(capacity, "visible_gpu_bytes", lambda: None)  # this machine has no GPU
    assert setup.extract_tasks_per_gpu(settings, {})[0] == capacity.NO_GPU_TASKS
    monkeypatch.setattr(capacity, "visible_gpu_bytes", lambda: int(h100 * 2**30))  # stands in for nvidia-smi
    assert setup.extract_tasks_per_gpu(settings, {}) == (
        n,
        why.replace("--gpu-memory-gib", "this machine's GPU"),
    )
    fixed = DagSettings.from_env({"CHANDRA_OCR_EXTRACT_TASKS_PER_GPU": "3"})
    assert setup.extract_tasks_per_gpu(fixed, env, gpu_memory_gib=h100) == (
        3,
        "CHANDRA_OCR_EXTRACT_TASKS_PER_GPU",
    )


def test_run_settings_resolve_param_then_variable_then_env_then_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path / "..")  # the working folder plays no part
    env = {"CHANDRA_OCR_SOURCE": "/env/src", "CHANDRA_OCR_ENGINE": "cpu", "CHANDRA_OCR_BATCH_PAGES": "50",
           "CHANDRA_OCR_OPTIONS": '{"chunk": {"max_tokens": 256}}',
           "AIRFLOW_HOME": str(tmp_path)}  # fmt: skip
    variable = {"source": "/var/src", "preset": "lightonocr2"}
    cfg = resolve_run_config({"source": "/param/src", "kb": None, "engine": ""}, variable, env)
    assert cfg.source == "/param/src"  # Param wins
    assert cfg.kb == str(tmp_path / "kb")  # default, made absolute (under $AIRFLOW_HOME) once for every task
    options = cfg.ingest_options()
    assert (options.engine, options.preset, options.batch_pages) == ("cpu", "lightonocr2", 50)
    assert options.chunk.max_tokens == 256 and options.pdf.settle_seconds == 30.0
    assert resolve_run_config({}, variable, env).source == "/var/src"
    assert resolve_run_config({}, None, env).source == "/env/src"
    assert resolve_run_config({}, None, {"AIRFLOW_HOME": str(tmp_path)}).source == str(tmp_path / "landing")


def test_relative_paths_resolve_against_the_base_dir_then_airflow_home_never_the_working_folder(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    home, base = tmp_path / "airflow-home", tmp_path / "data"
    params = {"source": "in/*.pdf", "kb": "kb"}
    cfg = resolve_run_config(params, None, {"AIRFLOW_HOME": str(home)})
    assert (cfg.source, cfg.kb) == (str(home / "in/*.pdf"), str(home / "kb"))
    cfg = resolve_run_config(params, None, {"AIRFLOW_HOME": str(home), "CHANDRA_OCR_BASE_DIR": str(base)})
    assert (cfg.source, cfg.kb) == (str(base / "in/*.pdf"), str(base / "kb"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert resolve_run_config({}, None, {}).kb == str(
        tmp_path / "user" / "airflow" / "kb"
    )  # Airflow's default


def test_run_paths_are_checked_with_the_resolved_path_and_the_base_in_the_message(tmp_path):
    env = {"AIRFLOW_HOME": str(tmp_path)}
    cfg = resolve_run_config({}, None, env)
    with pytest.raises(ConfigError) as missing:
        check_run_paths(cfg, env)
    message = str(missing.value)
    assert f"source {tmp_path / 'landing'} does not exist" in message and str(tmp_path) in message
    check_run_paths(cfg, env, source=False)  # the feed DAG reads no source; the KB folder can be made
    (tmp_path / "landing").mkdir()
    with pytest.raises(ConfigError, match="holds no PDF"):
        check_run_paths(cfg, env)
    (tmp_path / "landing" / "a.PDF").write_bytes(b"%PDF-1.4")
    (tmp_path / "kb").write_text("not a folder")
    with pytest.raises(ConfigError, match=f"kb {tmp_path / 'kb'} is a file"):
        check_run_paths(cfg, env)
    (tmp_path / "kb").unlink()
    check_run_paths(cfg, env)
    assert not (tmp_path / "kb").exists()  # checked, not created


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
        (
            {},
            '{"source": "/x",}',
            r"Variable 'chandra_ocr' is not valid JSON: .* at line 1, column 17; nothing ran",
        ),
        ({}, '["/x"]', "Variable 'chandra_ocr' must be a JSON object"),
        ({}, {"batch_pages": "ten"}, "Variable 'chandra_ocr' key 'batch_pages'='ten' is not a valid int"),
        ({}, {"batch_pages": 2.5}, "Variable 'chandra_ocr' key 'batch_pages' must be a whole number"),
        ({}, {"fail_on_incomplete": "ture"}, "key 'fail_on_incomplete'='ture' is not true or false"),
        ({}, {"source": 5}, "Variable 'chandra_ocr' key 'source' must be text, got 5"),
        ({"batch_pages": True}, None, "Param 'batch_pages' must be a whole number, got True"),
    ],
)
def test_bad_settings_are_config_errors(params, variable, match):
    with pytest.raises(ConfigError, match=match):
        resolve_run_config(params, variable, {})


def test_every_way_a_setting_arrives_is_read_alike_and_recorded(tmp_path):
    env = {
        "AIRFLOW_HOME": str(tmp_path),
        "CHANDRA_OCR_FAIL_ON_INCOMPLETE": "yes",
        "CHANDRA_OCR_BATCH_PAGES": "7",
    }
    text = '{"settle_seconds": "5", "fail_on_incomplete": false,\n "options": {"chunk": {"max_tokens": 300}}}'
    cfg = resolve_run_config({"batch_pages": 3, "rehash": False, "engine": None}, text, env)
    options = cfg.ingest_options()
    assert (options.batch_pages, options.pdf.settle_seconds, options.chunk.max_tokens) == (3, 5.0, 300)
    assert cfg.origins == {
        "source": "default", "source_conn_id": "default", "kb": "default", "engine": "default",
        "preset": "default", "batch_pages": "Param", "settle_seconds": "Variable 'chandra_ocr'",
        "fail_on_incomplete": "Variable 'chandra_ocr'", "vllm_conn_id": "default",
        "options": "Variable 'chandra_ocr'", "rehash": "default", "reprocess": "default",
        "max_documents": "default", "modified_since": "default", "modified_until": "default",
    }  # fmt: skip
    lines = cfg.provenance().splitlines()
    assert (
        "  batch_pages = 3  (Param)" in lines and "  settle_seconds = 5.0  (Variable 'chandra_ocr')" in lines
    )
    assert "  options = {'chunk.max_tokens': 300}  (Variable 'chandra_ocr')" in lines
    assert f"  kb = '{tmp_path / 'kb'}'  (default)" in lines
    assert resolve_run_config({}, "", env).origins["fail_on_incomplete"] == "$CHANDRA_OCR_FAIL_ON_INCOMPLETE"
    assert resolve_run_config({}, None, env).ingest_options().fail_on_incomplete is True


def test_a_run_conf_may_name_only_the_dags_params():
    check_run_conf({"source": "/x", "kb": ""}, ["source", "kb", "engine"], "chandra_ocr_ingest")
    with pytest.raises(ConfigError) as err:
        check_run_conf({"sorce": "/x", "kb": "/k"}, ["source", "kb"], "chandra_ocr_backfill")
    assert str(err.value) == (
        "unknown Param(s) in the conf of this chandra_ocr_backfill run: ['sorce']; known: ['kb', 'source']; "
        "nothing ran"
    )
