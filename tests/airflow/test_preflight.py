"""The DAGs' ``preflight`` through ``dag.test()``: a missing or empty source fails it, naming the path; so
does a mistaken setting, however it arrives (a malformed Variable, a misspelt Param, an unknown preset),
before a knowledge base is written. Its log names where each setting came from.

Relative settings resolve against ``$AIRFLOW_HOME`` (the session's, set in conftest.py), never the
working folder; files skipped as still being written are named in the discover task's log.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from airflow_runs import run_dag


def _log(capfd, caplog) -> str:
    """What the tasks logged: to the terminal or to pytest's log capture, depending on what ran before."""
    out = capfd.readouterr()
    return out.out + out.err + caplog.text


def _failed_at_preflight(run) -> None:
    assert run.state == "failed", run.tasks
    assert run.states("preflight") == ["failed"] and run.states("discover") == ["upstream_failed"]


def test_the_default_source_is_under_airflow_home_and_its_absence_fails_preflight(
    tmp_path, capfd, caplog, monkeypatch, samples
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "landing").mkdir()  # a landing folder beside the working folder is not the one meant
    shutil.copy(samples / "report.pdf", tmp_path / "landing")
    run = run_dag("chandra_ocr_ingest", kb=str(tmp_path / "kb"))
    _failed_at_preflight(run)
    text = _log(capfd, caplog)
    expected = os.path.join(os.environ["AIRFLOW_HOME"], "landing")
    assert f"source {expected} does not exist" in text
    assert "$AIRFLOW_HOME" in text
    assert not (tmp_path / "kb").exists()


def test_an_empty_source_fails_preflight(tmp_path, capfd, caplog):
    (tmp_path / "landing" / "sub").mkdir(parents=True)
    (tmp_path / "landing" / "notes.txt").write_text("no PDF here")
    run = run_dag("chandra_ocr_ingest", source=str(tmp_path / "landing"), kb=str(tmp_path / "kb"))
    _failed_at_preflight(run)
    text = _log(capfd, caplog)
    assert f"source {tmp_path / 'landing'} holds no PDF file" in text


def test_a_kb_that_is_a_file_fails_preflight(tmp_path, capfd, caplog, samples):
    (tmp_path / "landing").mkdir()
    shutil.copy(samples / "report.pdf", tmp_path / "landing")
    (tmp_path / "kb").write_text("a file")
    run = run_dag("chandra_ocr_ingest", source=str(tmp_path / "landing"), kb=str(tmp_path / "kb"))
    _failed_at_preflight(run)
    text = _log(capfd, caplog)
    assert f"kb {tmp_path / 'kb'} is a file, not a folder" in text


def test_files_still_being_written_are_named_in_the_discover_log(
    tmp_path, capfd, caplog, samples, monkeypatch
):
    monkeypatch.setenv("CHANDRA_OCR_SETTLE_SECONDS", "3600")  # read by preflight when the run starts
    (tmp_path / "landing").mkdir()
    shutil.copy(samples / "report.pdf", tmp_path / "landing" / "just-copied.pdf")
    run = run_dag(
        "chandra_ocr_ingest", source=str(tmp_path / "landing"), kb=str(tmp_path / "kb"), engine="text"
    )
    assert run.state == "success", run.tasks
    assert run.states("discover") == ["success"] and run.states("load") == ["skipped"]
    text = _log(capfd, caplog)
    assert "1 file(s) skipped as still being written" in text and "just-copied.pdf" in text
    assert "settle_seconds 0" in text


@pytest.fixture
def variable():
    """Sets the Variable ``chandra_ocr`` in the metadata DB (as `airflow variables set`), removed after."""
    from airflow.models.variable import Variable

    yield lambda text: Variable.set("chandra_ocr", text)
    Variable.delete("chandra_ocr")


def test_a_malformed_variable_fails_preflight_naming_the_line_and_column(
    tmp_path, capfd, caplog, samples, variable
):
    (tmp_path / "landing").mkdir()
    shutil.copy(samples / "report.pdf", tmp_path / "landing")
    kb = tmp_path / "kb"
    variable(f'{{"source": "{tmp_path / "landing"}",\n "kb": "{kb}",\n}}')  # a trailing comma
    run = run_dag("chandra_ocr_ingest")
    _failed_at_preflight(run)
    text = _log(capfd, caplog)
    assert "Variable 'chandra_ocr' is not valid JSON: Expecting property name" in text
    assert "at line 3, column 1; nothing ran" in text
    assert not kb.exists() and not (Path(os.environ["AIRFLOW_HOME"]) / "kb").exists()


@pytest.mark.parametrize("dag_id", ["chandra_ocr_ingest", "chandra_ocr_backfill", "chandra_ocr_vector_feed"])
def test_a_misspelt_param_fails_preflight_with_the_known_ones(tmp_path, capfd, caplog, samples, dag_id):
    (tmp_path / "landing").mkdir()
    shutil.copy(samples / "report.pdf", tmp_path / "landing")
    run = run_dag(dag_id, sorce=str(tmp_path / "landing"), kb=str(tmp_path / "kb"))
    assert run.state == "failed" and run.states("preflight") == ["failed"], run.tasks
    text = _log(capfd, caplog)
    assert f"unknown Param(s) in the conf of this {dag_id} run: ['sorce']; known: [" in text
    assert "'source'" in text.split("['sorce']; known:")[1].split("]")[0] and "nothing ran" in text
    assert not (tmp_path / "kb").exists()


ORIGINS = {"Param": "Param", "Variable": "Variable 'chandra_ocr'", "environment": "$CHANDRA_OCR_PRESET"}


@pytest.mark.parametrize("where", sorted(ORIGINS))
def test_an_unknown_preset_fails_preflight_and_the_log_says_where_each_setting_came_from(
    tmp_path, capfd, caplog, samples, monkeypatch, variable, where
):
    (tmp_path / "landing").mkdir()
    shutil.copy(samples / "report.pdf", tmp_path / "landing")
    kb = tmp_path / "kb"
    settings = {"source": str(tmp_path / "landing")}
    params = {
        "kb": str(kb),
        "engine": "text",
    }  # an engine that loads no model: the preset is checked all the same
    if where == "environment":
        monkeypatch.setenv("CHANDRA_OCR_PRESET", "olmocr3")
    (params if where == "Param" else settings if where == "Variable" else {})["preset"] = "olmocr3"
    variable(json.dumps(settings))
    run = run_dag("chandra_ocr_backfill", **params)
    _failed_at_preflight(run)
    text = _log(capfd, caplog)
    assert "preset 'olmocr3' is unknown; known presets: chandra2, lightonocr2, olmocr2, olmocr2-fp8" in text
    assert f"preset = 'olmocr3'  ({ORIGINS[where]})" in text
    assert f"kb = '{kb}'  (Param)" in text
    assert f"source = '{tmp_path / 'landing'}'  (Variable 'chandra_ocr')" in text
    assert "settle_seconds = 0.0  ($CHANDRA_OCR_SETTLE_SECONDS)" in text  # tests/conftest.py sets it
    assert "batch_pages = 100  (default)" in text
    assert not kb.exists()
