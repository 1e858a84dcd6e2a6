"""The ingest DAG's ``preflight`` through ``dag.test()``: a missing or empty source fails it, naming the path.

Relative settings resolve against ``$AIRFLOW_HOME`` (the session's, set in conftest.py), never the
working folder; files skipped as still being written are named in the discover task's log.
"""

from __future__ import annotations

import os
import shutil

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
