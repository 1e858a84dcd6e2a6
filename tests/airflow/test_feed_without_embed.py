"""The feed DAG under a new user's install without the 'embed' extra (``without_embed``, tests/conftest.py),
through ``dag.test()``: the export runs, the index task is skipped and its log says the command that
installs the extra (``chandra_ocr.extras``, the one message every place that needs the extra gives)."""

from __future__ import annotations

from airflow_runs import landing, run_dag

from chandra_ocr.config import IngestOptions
from chandra_ocr.extras import embed_missing, install_command
from chandra_ocr.pipeline import run


def test_the_index_task_is_skipped_with_the_command_that_installs_the_extra(
    tmp_path, samples, without_embed, capfd, caplog
):
    kb = tmp_path / "kb"
    run(landing(tmp_path / "landing", {"report": samples / "report.pdf"}), kb, IngestOptions(engine="text"))
    assert embed_missing() is not None  # hidden from this process, where dag.test() runs the tasks
    feed = run_dag("chandra_ocr_vector_feed", kb=str(kb))
    assert feed.state == "success", feed.tasks
    assert feed.states("export") == ["success"] and feed.states("index") == ["skipped"]
    assert list((kb / "outbox").glob("vector-*.parquet"))  # kept for a run after the install
    out = capfd.readouterr()
    text = out.out + out.err + caplog.text
    assert "vector index skipped: vector search (feed and search) needs the 'embed' extra" in text
    assert install_command("embed") in text
