"""Staged rows and the loader, on a real DuckDB file."""

from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.document import Block, Chunk, Document, Page, Table, TableCell
from chandra_ocr.errors import StoreError
from chandra_ocr.store.duckdb_store import RunRecord, connect, known_documents, load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.rows import document_rows
from chandra_ocr.store.staging import arrow_schema, read_staged, write_staged

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _doc(doc_id: str, texts: list[str]) -> tuple[Document, list[Chunk]]:
    blocks = [Block(i, "text", (10, 10 + 20 * i, 100, 25 + 20 * i), t) for i, t in enumerate(texts)]
    table = Table(
        1,
        (10, 300, 200, 400),
        2,
        2,
        ("k", "v"),
        "native",
        (
            TableCell(0, 0, "k", is_header=True, header_level=1),
            TableCell(0, 1, "v", is_header=True, header_level=1),
            TableCell(1, 0, "a"),
            TableCell(1, 1, "1"),
        ),
        header_rows=1,
        stub_head="k",
    )
    doc = Document(
        doc_id,
        f"/in/{doc_id}.pdf",
        f"{doc_id}.pdf",
        123,
        n_pages=1,
        pages=[Page(1, 612, 792, "text", "text", blocks=blocks, tables=[table])],
    )
    chunks = [
        Chunk(f"{doc_id}-{t}", doc_id, i, "text", t, 1, ("H",), 1, 1, ((1, 1.0, 2.0, 3.0, 4.0),))
        for i, t in enumerate(texts)
    ]
    return doc, chunks


def _ingest(layout, doc_id, texts, now):
    doc, chunks = _doc(doc_id, texts)
    write_staged(layout, "r", doc_id, document_rows(doc, chunks, run_id="r", now=now))
    return load_documents(layout, "r", [doc_id]).counts


def _table_hashes(layout):
    con = connect(layout, read_only=True)
    try:
        return {
            t: con.sql(f"SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM {t}").fetchall()
            for t in ("documents", "pages", "blocks", "tables", "table_cells", "chunks")
        }
    finally:
        con.close()


def test_load_is_idempotent(tmp_path):
    layout = KbLayout(tmp_path)
    counts = _ingest(layout, "d1", ["alpha", "beta"], T0)
    assert counts == {"documents": 1, "pages": 1, "blocks": 2, "tables": 1, "table_cells": 4, "chunks": 2}
    before = _table_hashes(layout)
    load_documents(layout, "r", ["d1"])
    assert _table_hashes(layout) == before
    assert known_documents(layout) == {"d1": "/in/d1.pdf"}


def test_reingest_replaces_rows_keeps_first_seen_and_unchanged_chunk_times(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, "d1", ["alpha", "beta"], T0)
    con = connect(layout, read_only=True)
    first_load = con.execute("SELECT updated_at FROM chunks WHERE text = 'alpha'").fetchone()[0]
    con.close()
    _ingest(layout, "d2", ["other"], T0)
    _ingest(layout, "d1", ["alpha", "gamma", "delta"], T0 + timedelta(days=1))
    con = connect(layout, read_only=True)
    try:
        chunks = dict(con.sql("SELECT text, updated_at FROM chunks WHERE doc_id = 'd1'").fetchall())
        assert set(chunks) == {"alpha", "gamma", "delta"}  # no orphan "beta"
        # updated_at: the load that changed the chunk (not the staging time); unchanged chunks keep theirs
        assert chunks["alpha"] == first_load and chunks["gamma"] > first_load
        assert con.sql("SELECT chunk_id FROM chunk_tombstones").fetchall() == [("d1-beta",)]
        assert con.execute("SELECT first_seen, ingested_at FROM documents WHERE doc_id='d1'").fetchone() == (
            T0,
            T0 + timedelta(days=1),
        )
        assert con.execute("SELECT count(*) FROM blocks WHERE doc_id='d1'").fetchone()[0] == 3
        assert con.execute("SELECT count(*) FROM chunks WHERE doc_id='d2'").fetchone()[0] == 1
    finally:
        con.close()


def test_a_table_dropped_on_reingest_loses_its_rows(tmp_path):
    """Re-ingested without its table: the staged file replaces the old one, and the rows go."""
    layout = KbLayout(tmp_path)
    doc, chunks = _doc("d1", ["alpha"])
    write_staged(layout, "r", "d1", document_rows(doc, chunks, run_id="r", now=T0))
    assert read_staged(layout, "r", ["d1"])["tables"].num_rows == 1
    load_documents(layout, "r", ["d1"])
    assert not layout.staged("r", "d1").exists()  # loaded rows are no longer staged

    doc.pages[0].tables = []
    write_staged(layout, "r", "d1", document_rows(doc, chunks, run_id="r", now=T0))
    assert [p.name for p in (tmp_path / "staging" / "r").iterdir()] == ["d1.arrows"]
    counts = load_documents(layout, "r", ["d1"]).counts
    assert counts["tables"] == counts["table_cells"] == 0 and counts["blocks"] == 1
    con = connect(layout, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM table_cells WHERE doc_id = 'd1'").fetchone()[0] == 0
    finally:
        con.close()


def test_staged_rows_read_back_typed_by_the_schema_in_document_order(tmp_path):
    layout = KbLayout(tmp_path / "kb")
    for doc_id in ("d2", "d1"):
        doc, chunks = _doc(doc_id, ["alpha", "beta"])
        write_staged(layout, "r", doc_id, document_rows(doc, chunks, run_id="r", now=T0))
    staged = read_staged(layout, "r", ["d1", "d2"])
    for table, rows in staged.items():
        assert rows.schema.equals(arrow_schema(table)), table
    assert staged["chunks"].column("doc_id").to_pylist() == ["d1", "d1", "d2", "d2"]
    assert staged["documents"].num_rows == 2 and staged["tables"].num_rows == 2


def test_staging_rejects_unknown_columns_and_a_missing_documents_row(tmp_path):
    layout = KbLayout(tmp_path)
    doc, chunks = _doc("d1", ["alpha"])
    rows = document_rows(doc, chunks, run_id="r", now=T0)
    with pytest.raises(ValueError, match="documents row"):
        write_staged(layout, "r", "d1", {k: v for k, v in rows.items() if k != "documents"})
    rows["chunks"] = [r | {"surprise": 1} for r in rows["chunks"]]
    with pytest.raises(ValueError, match="surprise"):
        write_staged(layout, "r", "d1", rows)
    assert not layout.staged("r", "d1").exists()


def test_missing_staged_rows_fail_before_touching_the_database(tmp_path):
    layout = KbLayout(tmp_path)
    with pytest.raises(StoreError, match="no staged rows"):
        load_documents(layout, "r", ["nope"])
    assert not layout.duckdb_path.exists()


def test_a_failing_load_changes_nothing_and_leaves_no_listed_file(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, "d1", ["alpha"], T0)
    before = _table_hashes(layout)
    doc, chunks = _doc("d3", ["x", "x2"])
    chunks = [chunks[0], chunks[0]]  # duplicate chunk_id violates the primary key
    write_staged(layout, "r", "d3", document_rows(doc, chunks, run_id="r", now=T0))
    with pytest.raises(duckdb.ConstraintException):
        load_documents(layout, "r", ["d3"])
    assert _table_hashes(layout) == before
    assert layout.staged("r", "d3").exists()  # kept for the next try
    _ingest(layout, "d2", ["beta"], T0)  # the next session removes what the failed one wrote
    con = connect(layout)
    listed = {(t, f) for t, f in con.execute("SELECT table_name, file FROM kb_files").fetchall()}
    con.close()
    on_disk = {(p.parent.name, p.name) for p in (tmp_path / "parquet").glob("*/*")}
    assert on_disk == listed and len(listed) == 6 * 2


def test_a_document_two_runs_staged_is_loaded_once_and_the_later_run_still_records_itself(tmp_path):
    """Two runs that found the same PDF each staged it in their own folder: the later load leaves it
    to the run that loaded it first, deletes its own staged rows and records its run."""
    layout = KbLayout(tmp_path)
    doc, chunks = _doc("d1", ["alpha"])
    doc.pipeline_version = PIPELINE_VERSION  # loaded under this version: the later run has nothing to add
    for run_id in ("nightly", "backfill"):
        write_staged(layout, run_id, "d1", document_rows(doc, chunks, run_id=run_id, now=T0))
    assert read_staged(layout, "backfill", ["d1"])["documents"].column("run_id").to_pylist() == ["backfill"]
    seen: dict[str, dict] = {}

    def record(run_id):
        def make(elsewhere):
            seen[run_id] = dict(elsewhere)
            return RunRecord(run_id, T0, T0, 1, 1, {})

        return make

    first = load_documents(layout, "nightly", ["d1"], record("nightly"))
    later = load_documents(layout, "backfill", ["d1"], record("backfill"))
    assert (first.counts["documents"], first.elsewhere) == (1, {})
    assert (later.counts["documents"], later.elsewhere) == (0, {"d1": "nightly"})
    assert seen == {"nightly": {}, "backfill": {"d1": "nightly"}}
    assert not layout.staged("backfill", "d1").exists() and not layout.staged("nightly", "d1").exists()
    con = connect(layout, read_only=True)
    try:
        runs = con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()
        assert runs == [("backfill",), ("nightly",)]
        assert con.execute("SELECT run_id FROM documents").fetchall() == [("nightly",)]
    finally:
        con.close()
