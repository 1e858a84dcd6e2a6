"""``chandra_ocr_backfill`` through ``dag.test()``: failed runs resume, filters hold, setup is checked."""

from __future__ import annotations

import hashlib
import os

from airflow_runs import landing, mtimes, query, run_dag

from chandra_ocr.store.layout import KbLayout


def _doc_id(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checkpoints(kb, doc_id: str) -> dict[str, int]:
    """The extract stage's output of one document (its page and document checkpoints)."""
    work = KbLayout(kb).work_dir(doc_id)
    return {k: v for k, v in mtimes(work).items() if k.startswith("pages/") or k == "document.json"}


def test_a_rerun_after_a_failure_redoes_only_what_is_missing(tmp_path, inputs):
    # Discovery is name-ordered: with max_documents=3 the fourth file is never taken. The born-digital
    # documents are read from their text layer alone: checkpointed by the OCR task, written by assemble.
    named = {"1_scanned": inputs.pdfs["scanned"], "2_born": inputs.pdfs["born_a"],
             "3_blocked": inputs.pdfs["born_b"], "4_broken": inputs.pdfs["broken_a"]}  # fmt: skip
    src, kb = landing(tmp_path / "landing", named), tmp_path / "kb"
    conf = {"source": str(src), "kb": str(kb), "engine": "cpu", "batch_pages": 1, "max_documents": 3}
    layout = KbLayout(kb)
    blocked = layout.export(_doc_id(src / "3_blocked.pdf"), ".md")
    blocked.mkdir(parents=True)  # a folder where the document's export must go: a real I/O failure

    failed = run_dag("chandra_ocr_backfill", **conf)
    assert failed.state == "failed", failed.tasks
    stages = failed.states("batch.compress") + failed.states("batch.extract")
    assert stages.count("failed") == 0, failed.tasks
    assembled = failed.states("batch.assemble")  # the blocked document's batch fails in the stage that writes
    assert (assembled.count("failed"), assembled.count("success")) == (1, 2), failed.tasks
    assert failed.states("load") == ["upstream_failed"]
    assert not layout.duckdb_path.exists()  # nothing half-loaded, no document quarantined for our disk
    scanned = _checkpoints(kb, _doc_id(src / "1_scanned.pdf"))
    assert scanned  # read, page by page, before the run failed
    born = _doc_id(src / "2_born.pdf")
    assert list(layout.staging_root.glob(f"*/{born}.arrows"))  # written by its assemble task, for its run

    blocked.rmdir()
    resumed = run_dag("chandra_ocr_backfill", **conf)
    assert resumed.state == "success", resumed.tasks
    assert _checkpoints(kb, _doc_id(src / "1_scanned.pdf")) == scanned  # not read again
    rows = query(kb, "SELECT file_name, status, run_id FROM documents ORDER BY file_name")
    assert rows == [(f"{n}.pdf", "ingested", resumed.run_id) for n in ("1_scanned", "2_born", "3_blocked")]
    (stopped,) = resumed.messages("chandra_ocr.airflow.continue_backfill")  # why the continue task ends it
    assert stopped.endswith("stopped because max_documents (3) reached with 1 matching file(s) left untaken; "
                            "trigger the backfill again (a higher max_documents) to take them")  # fmt: skip


def test_modified_window_selects_files_by_modification_time(tmp_path, inputs):
    src = landing(tmp_path / "landing", {"old": inputs.pdfs["born_a"], "new": inputs.pdfs["born_b"]})
    os.utime(src / "new.pdf", (1_720_000_000, 1_720_000_000))  # 2024-07-03; "old" is 2023-11-14
    kb = tmp_path / "kb"
    run = run_dag("chandra_ocr_backfill", source=str(src / "*.pdf"), kb=str(kb), engine="text",
                  modified_since="2024-01-01", modified_until="2025-01-01")  # fmt: skip
    assert run.state == "success", run.tasks
    assert query(kb, "SELECT file_name FROM documents") == [("new.pdf",)]


def test_a_missing_pool_fails_the_run_at_preflight_with_the_fix_in_the_message(tmp_path, capfd, airflow_db):
    from airflow.models.variable import Variable

    from chandra_ocr.airflow.settings import DagSettings
    from chandra_ocr.airflow.setup import setup_airflow

    Variable.delete("chandra_ocr_pools")
    try:
        run = run_dag("chandra_ocr_ingest", source=str(tmp_path), kb=str(tmp_path / "kb"))
    finally:
        setup_airflow(DagSettings.from_env(os.environ), migrate=False)
    assert run.state == "failed"
    assert run.states("preflight") == ["failed"] and run.states("discover") == ["upstream_failed"]
    out = capfd.readouterr()
    assert "are not set up: run `python -m chandra_ocr.airflow.setup`" in out.out + out.err


def test_a_backfill_over_more_batches_than_one_run_maps_continues_itself_until_done(
    tmp_path, inputs, monkeypatch, caplog, capfd
):
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    def triggered() -> list[dict]:
        """The runs the backfill triggered for itself (queued: the scheduler would start them)."""
        with create_session() as session:
            runs = session.query(DagRun).filter(
                DagRun.dag_id == "chandra_ocr_backfill", DagRun.state == "queued"
            )
            found = [dict(r.conf or {}) for r in runs]
            runs.delete()  # dag.test() stands in for the scheduler below
        return found

    src = landing(tmp_path / "landing", {"a": inputs.pdfs["born_a"], "b": inputs.pdfs["born_b"]})
    (src / "c.pdf").write_bytes((src / "a.pdf").read_bytes() + b"\n% another document\n")
    os.utime(src / "c.pdf", (1_700_000_000, 1_700_000_000))
    kb = tmp_path / "kb"
    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "2")  # 3 batches of one document, 2 per run
    triggered()
    conf = {"source": str(src), "kb": str(kb), "engine": "text", "batch_pages": 1}

    first = run_dag("chandra_ocr_backfill", **conf)
    assert first.state == "success", first.tasks
    assert len(first.states("batch.assemble")) == 2 and first.states("continue") == ["success"]
    (next_conf,) = triggered()
    assert next_conf == conf | {"backfill_batches_done": 2, "backfill_batches_total": 3}
    assert "loaded: 2 of 3 batches done" in caplog.text

    second = run_dag("chandra_ocr_backfill", **next_conf)
    assert second.state == "success", second.tasks
    assert len(second.states("batch.assemble")) == 1
    assert triggered() == []  # done: no third run
    assert "backfill complete: 3 of 3 batches done; stopped because all batches done" in caplog.text
    out = capfd.readouterr()
    assert "XCom not found" not in out.out + out.err  # the "Triggered DAG" link of a run that triggered none
    assert query(kb, "SELECT count(*) FROM documents WHERE status = 'ingested'") == [(3,)]
    records = query(kb, "SELECT run_id, metrics->>'backfill' FROM runs ORDER BY started_at")
    assert records == [(first.run_id, "2 of 3 batches done"), (second.run_id, "3 of 3 batches done")]
    report = (kb / "report" / "report.html").read_text()
    assert "2 of 3 batches done" in report and "3 of 3 batches done" in report
