"""``chandra_ocr_ingest`` and ``chandra_ocr_vector_feed`` through ``dag.test()`` on a real metadata DB.

One knowledge base for the module, in order: ingest mixed PDFs; ingest again (nothing new); the
feed exports everything, then nothing; one document is reprocessed with other chunk sizes by
the backfill DAG; the feed then exports only that document's changes and deletions.
"""

from __future__ import annotations

import html
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pymupdf
import pytest
from airflow_runs import DagRunResult, asset_events, landing, mtimes, query, run_dag, table_fingerprints, xcom

from chandra_ocr.document import indexed_text
from chandra_ocr.store.duckdb_store import load_documents
from chandra_ocr.store.layout import DOCUMENT_TABLES, KbLayout
from chandra_ocr.store.staging import write_staged


@dataclass
class World:
    source: Path
    kb: Path

    @property
    def conf(self) -> dict:
        return {"source": str(self.source), "kb": str(self.kb), "engine": "cpu"}


@pytest.fixture(scope="module")
def world(tmp_path_factory, inputs) -> World:
    root = tmp_path_factory.mktemp("ingest")
    return World(landing(root / "landing", inputs.pdfs), root / "kb")


@pytest.fixture(scope="module")
def first(world) -> DagRunResult:
    return run_dag("chandra_ocr_ingest", **world.conf)


@pytest.fixture(scope="module")
def second(world, first) -> tuple[DagRunResult, dict, dict]:
    before = (table_fingerprints(world.kb), mtimes(world.kb / "work"), len(asset_events()))
    return run_dag("chandra_ocr_ingest", **world.conf), before


def _documents(kb: Path) -> dict[str, tuple]:
    rows = query(kb, "SELECT file_name, status, n_pages, error FROM documents")
    return {Path(name).stem: (status, n_pages, error) for name, status, n_pages, error in rows}


def test_first_run_ingests_born_digital_and_scanned_and_quarantines_broken(world, first, inputs):
    assert first.state == "success", first.tasks
    assert set(first.states("batch.extract")) == {"success"} and first.states("load") == ["success"]
    report = xcom("chandra_ocr_ingest", first.run_id, "report")  # the last task: the run report
    folder = world.kb / "report"
    assert report == {"html": str(folder / "report.html"), "png": str(folder / "report.png")}
    assert Path(report["html"]).stat().st_size > 0 and Path(report["png"]).stat().st_size > 0
    docs = _documents(world.kb)
    assert set(docs) == set(inputs.pdfs)
    for name, path in inputs.pdfs.items():
        status, n_pages, error = docs[name]
        if name.startswith("broken"):
            assert status == "quarantined" and n_pages == 0 and error  # a human-readable reason
        else:
            with pymupdf.open(path) as pdf:
                assert (status, n_pages, error) == ("ingested", pdf.page_count, None)
    per_doc = dict(query(world.kb, "SELECT d.file_name, count(c.chunk_id) FROM documents d "
                                   "LEFT JOIN chunks c USING (doc_id) GROUP BY ALL"))  # fmt: skip
    assert all(per_doc[f"{n}.pdf"] > 0 for n in inputs.by_role("born") + ["scanned"])
    scanned = query(world.kb, "SELECT p.route, p.engine, string_agg(c.text, ' ') FROM pages p "
                              "JOIN documents d USING (doc_id) JOIN chunks c USING (doc_id) "
                              "WHERE d.file_name = 'scanned.pdf' GROUP BY ALL")  # fmt: skip
    assert [(route, engine) for route, engine, _ in scanned] == [("ocr", "cpu")]
    assert inputs.scanned_phrase in " ".join(scanned[0][2].lower().split())


def test_each_broken_file_is_named_with_its_reason_in_the_logs_the_report_and_the_event(world, first, inputs):
    """Quarantines are visible where Airflow users look: extract's and load's warnings, the run report's
    list and the KB asset event's extra (the run itself stays green: fail_on_incomplete is off)."""
    broken = {f"{n}.pdf" for n in inputs.by_role("broken")}
    reasons = dict(query(world.kb, "SELECT file_name, error FROM documents WHERE status = 'quarantined'"))
    assert set(reasons) == broken and all(reasons.values())
    paths = {name: str(world.source / name) for name in broken}
    for stage in ("extract", "load"):
        warned = first.messages(f"chandra_ocr.stages.{stage}", logging.WARNING)
        for name in broken:
            assert f"quarantined {paths[name]}: {reasons[name]}" in warned, (stage, warned)
    counts = dict(query(world.kb, "SELECT status, count(*) FROM documents GROUP BY ALL"))
    loaded = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    assert f"loaded {sum(counts.values())} document(s): {loaded}" in first.messages("chandra_ocr.stages.load")
    (extra,) = [e["extra"] for e in asset_events() if e["source_run_id"] == first.run_id]
    assert extra["documents"]["quarantined"] == len(broken)
    assert sorted((e["file"], e["status"], e["reason"]) for e in extra["incomplete"]) == sorted(
        (paths[n], "quarantined", reasons[n]) for n in broken
    )
    # the run's note, in Airflow's UI beside the green run
    assert first.note == (f"{len(broken)} quarantined of {len(inputs.pdfs)} documents: see the run report "
                          f"({world.kb}/report/report.html), or Knowledge base → Review")  # fmt: skip
    page = (world.kb / "report" / "report.html").read_text()
    listed = page[page.index("id='incomplete'") :].split("</table>")[0]
    for name in broken:
        reason = html.escape(reasons[name])
        assert f"<td>{name}</td><td>quarantined</td><td>{reason}</td><td>{first.run_id}</td>" in listed


def test_fail_on_incomplete_turns_a_quarantine_into_a_failed_run_after_the_load_and_report(
    tmp_path, inputs, capfd
):
    src = landing(tmp_path / "landing", {"born": inputs.pdfs["born_a"], "broken": inputs.pdfs["broken_a"]})
    kb = tmp_path / "kb"
    run = run_dag("chandra_ocr_ingest", source=str(src), kb=str(kb), engine="text", fail_on_incomplete=True)
    assert run.state == "failed" and run.states("load") == ["success"] and run.states("report") == ["failed"]
    assert run.note is not None and run.note.startswith("1 quarantined of 2 documents: see the run report")
    assert [e for e in asset_events() if e["source_run_id"] == run.run_id]  # the load was published
    assert "broken.pdf" in (kb / "report" / "report.html").read_text()
    out = capfd.readouterr()
    assert "1 document(s) quarantined or partial in this run (fail_on_incomplete is on" in out.out + out.err
    assert "quarantined broken.pdf: " in out.out + out.err


def test_mapped_batches_are_labelled_with_their_batch_documents_and_pages(world, first):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    batches = {b["batch_id"]: b for b in xcom("chandra_ocr_ingest", first.run_id, "discover")}
    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(run_id=first.run_id, task_id="batch.extract").all()
        labels = sorted(ti.rendered_map_index for ti in tis)
    expected = []
    for batch_id, batch in batches.items():
        names = [Path(d["source"]).name for d in batch["docs"]]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        pages = sum(d["n_pages"] for d in batch["docs"])
        expected.append(f"{batch_id}: {len(names)} doc(s), {pages} pages: {shown}")
    assert labels == sorted(expected)


def test_the_kb_asset_event_carries_the_runs_counts(world, first):
    events = [e["extra"] for e in asset_events() if e["source_run_id"] == first.run_id]
    assert len(events) == 1
    extra = events[0]
    assert extra["kb"] == str(world.kb) and extra["run_id"] == first.run_id
    assert extra["documents"] == dict(query(world.kb, "SELECT status, count(*) FROM documents GROUP BY ALL"))
    assert extra["pages"] == query(world.kb, "SELECT count(*) FROM pages")[0][0]
    assert extra["chunks"] == query(world.kb, "SELECT count(*) FROM chunks")[0][0]


def test_second_run_finds_nothing_new_and_touches_nothing(world, second):
    run, (tables, files, n_events) = second
    assert run.state == "success"
    assert xcom("chandra_ocr_ingest", run.run_id, "discover") == []
    assert set(run.states("batch.extract")) == {"skipped"} and run.states("load") == ["skipped"]
    assert run.note is None  # nothing loaded, nothing to say
    assert table_fingerprints(world.kb) == tables  # no new or changed rows, no new run recorded
    assert mtimes(world.kb / "work") == files  # no page re-read, no checkpoint rewritten
    assert len(asset_events()) == n_events  # nothing loaded → no event → the feed is not triggered


def _feed(world: World) -> tuple[DagRunResult, dict]:
    run = run_dag("chandra_ocr_vector_feed", kb=str(world.kb))
    assert run.state == "success", run.tasks
    (export,) = xcom("chandra_ocr_vector_feed", run.run_id, "export")
    return run, export


def _chunk_ids(kb: Path, where: str = "TRUE") -> set[str]:
    return {
        r[0] for r in query(kb, f"SELECT chunk_id FROM chunks JOIN documents USING (doc_id) WHERE {where}")
    }


@pytest.fixture(scope="module")
def initial_feeds(world, second) -> tuple[tuple[DagRunResult, dict], tuple[DagRunResult, dict]]:
    return _feed(world), _feed(world)


@pytest.fixture(scope="module")
def initial_exports(initial_feeds) -> tuple[dict, dict]:
    return initial_feeds[0][1], initial_feeds[1][1]


def test_vector_feed_exports_all_chunks_then_nothing(world, initial_exports):
    export, again = initial_exports
    rows = pq.read_table(export["path"]).to_pylist()
    assert Path(export["path"]).parent == world.kb / "outbox"
    assert {r["op"] for r in rows} == {"upsert"} and {r["chunk_id"] for r in rows} == _chunk_ids(world.kb)
    assert (again["path"], again["upserts"], again["deletes"]) == ("", 0, 0)
    assert len(list((world.kb / "outbox").iterdir())) == 1
    assert _indexed(world.kb) == _chunk_ids(world.kb)  # the index task embedded every exported chunk


def test_the_index_task_logs_the_feeds_progress(initial_feeds):
    (run, export), _ = initial_feeds
    n = export["upserts"]
    lines = run.messages("chandra_ocr.vector.consumer")
    assert any(
        re.search(rf"^vector feed .*: {n}/{n} chunks, [0-9.]+ chunks/s, ETA 0s$", line) for line in lines
    ), lines


def _indexed(kb: Path) -> set[str]:
    con = duckdb.connect(str(kb / "vector" / "vectors.duckdb"), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT chunk_id FROM vectors").fetchall()}
    finally:
        con.close()


def _as_an_older_ingest(kb: Path, file_name: str) -> None:
    """Load a document's own rows again with pipeline_version '0' (the rows are read-only Parquet)."""
    layout = KbLayout(kb)
    con = duckdb.connect(str(layout.duckdb_path), read_only=True)
    doc_id = con.execute("SELECT doc_id FROM documents WHERE file_name = ?", [file_name]).fetchall()[0][0]
    rows = {
        t: con.execute(f"SELECT * FROM {t} WHERE doc_id = ?", [doc_id]).to_arrow_table().to_pylist()
        for t in DOCUMENT_TABLES
    }
    con.close()
    rows["documents"][0]["pipeline_version"] = "0"
    run_id = rows["documents"][0]["run_id"]  # its own run's rows: not another run's, left alone
    write_staged(layout, run_id, doc_id, rows)
    load_documents(layout, run_id, [doc_id])


def test_reprocessing_a_document_exports_only_its_changed_chunks_and_tombstones(
    world, initial_exports, monkeypatch, inputs
):
    target = f"{inputs.by_role('born')[0]}.pdf"
    before = _chunk_ids(world.kb, f"file_name = '{target}'")
    others = {r for r in _chunk_ids(world.kb) if r not in before}
    _as_an_older_ingest(world.kb, target)
    monkeypatch.setenv(
        "AIRFLOW_VAR_CHANDRA_OCR", json.dumps({"options": {"chunk": {"max_tokens": 48, "overlap_tokens": 0}}})
    )
    run = run_dag("chandra_ocr_backfill", reprocess=True, **world.conf)
    assert run.state == "success", run.tasks
    assert query(world.kb, f"SELECT file_name FROM documents WHERE run_id = '{run.run_id}'") == [(target,)]
    after = _chunk_ids(world.kb, f"file_name = '{target}'")
    assert after != before and _chunk_ids(world.kb) == others | after

    _, export = _feed(world)
    rows = pq.read_table(export["path"]).to_pylist()
    assert {r["chunk_id"] for r in rows if r["op"] == "upsert"} == after - before
    assert {r["chunk_id"] for r in rows if r["op"] == "delete"} == before - after
    assert export["export_no"] == 2
    assert _indexed(world.kb) == _chunk_ids(world.kb)  # upserts embedded, deleted chunks' vectors gone


def test_the_feed_dag_syncs_the_store_of_an_airflow_connection(world, initial_exports, monkeypatch, tmp_path):
    """A LanceDB target configured as an Airflow connection (its extra): the index task syncs every
    outbox file into it, and the table then holds exactly the KB's chunks."""
    lancedb = pytest.importorskip("lancedb", reason="needs the 'lancedb' extra")
    kwargs = {"uri": str(tmp_path / "lance"), "table_name": "kb", "mode": "append"}
    target = {"name": "lance", "store": "langchain_community.vectorstores:LanceDB", "store_kwargs": kwargs}
    monkeypatch.setenv("AIRFLOW_CONN_CHANDRA_VECTOR", json.dumps({"conn_type": "generic", "extra": target}))
    monkeypatch.setenv("CHANDRA_OCR_VECTOR_CONN_ID", "chandra_vector")
    run, _ = _feed(world)
    (synced,) = xcom("chandra_ocr_vector_feed", run.run_id, "index")
    assert (
        synced["target"] == "lance" and synced["files"] >= 1 and synced["chunks"] == len(_chunk_ids(world.kb))
    )
    table = lancedb.connect(kwargs["uri"]).open_table("kb").to_arrow()
    stored = sorted(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    chunks = query(world.kb, "SELECT chunk_id, context, text FROM chunks")
    assert stored == sorted((cid, indexed_text(context, text)) for cid, context, text in chunks)
