"""The feed DAG under a new user's install without the 'embed' extra (``without_embed``, tests/conftest.py),
through ``dag.test()``: the export runs, the index task builds the word index, and its log and the run's
note (beside the green run in Airflow's UI) say the vector index was not built, with the command that
installs the extra (``chandra_ocr.extras``, the one message every place that needs the extra gives)."""

from __future__ import annotations

from airflow_runs import landing, run_dag

from chandra_ocr.config import IngestOptions
from chandra_ocr.extras import embed_missing, install_command
from chandra_ocr.pipeline import run


def test_the_index_task_builds_the_word_index_and_names_the_command_that_installs_the_extra(
    tmp_path, samples, without_embed, capfd, caplog
):
    kb = tmp_path / "kb"
    run(landing(tmp_path / "landing", {"report": samples / "report.pdf"}), kb, IngestOptions(engine="text"))
    assert embed_missing() is not None  # hidden from this process, where dag.test() runs the tasks
    feed = run_dag("chandra_ocr_vector_feed", kb=str(kb))
    assert feed.state == "success", feed.tasks
    assert feed.states("export") == ["success"] and feed.states("index") == ["success"]
    assert (kb / "vector" / "lexical.duckdb").is_file() and not (kb / "vector" / "vectors.duckdb").exists()
    out = capfd.readouterr()
    text = out.out + out.err + caplog.text
    assert "vector index: not built, search matches words only; vector search (feed and search) needs" in text
    assert install_command("embed") in text
    assert feed.note == f"vector index not built, search matches words only: {embed_missing()}"  # in the UI
