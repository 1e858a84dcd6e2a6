"""The vector feed's outbox exports and watermark, on a real DuckDB knowledge base."""

from datetime import datetime

import pyarrow.parquet as pq
import pytest
from kb_factory import ingest as _ingest
from kb_factory import kb_chunks as _kb_chunks
from kb_factory import write_document as _write

from chandra_ocr.errors import StoreError
from chandra_ocr.store.duckdb_store import load_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.outbox import export_changes, outbox_file


def _replay(paths, index: dict[str, str]) -> dict[str, str]:
    """Apply outbox files the way a vector-store loader would: upsert/delete by chunk_id."""
    for path in paths:
        for row in pq.read_table(path).to_pylist():
            if row["op"] == "upsert":
                index[row["chunk_id"]] = row["text"]
            else:
                assert row["op"] == "delete" and row["text"] is None
                index.pop(row["chunk_id"], None)
    return index


def test_first_export_has_every_chunk_then_nothing_until_a_change(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, {"d1": ["alpha", "beta"], "d2": ["gamma"]})
    first = export_changes(layout)
    assert (first.export_no, first.upserts, first.deletes) == (1, 3, 0)
    assert first.path == outbox_file(layout, "vector", 1) and first.path.parent == tmp_path / "outbox"
    table = pq.read_table(first.path)
    assert {"op", "chunk_id", "doc_id", "changed_at", "text", "source_uri", "bboxes"} <= set(
        table.column_names
    )
    assert _replay([first.path], {}) == _kb_chunks(layout)
    meta = table.schema.metadata
    assert meta[b"feed"] == b"vector" and meta[b"export_no"] == b"1" and meta[b"since"] == b""
    assert datetime.fromisoformat(meta[b"until"].decode()) == first.until

    second = export_changes(layout)
    assert (second.path, second.upserts, second.deletes, second.export_no) == (None, 0, 0, 1)
    assert sorted(p.name for p in layout.outbox().iterdir()) == ["vector-000001.parquet"]


def test_reingesting_a_changed_document_exports_only_its_changes_and_tombstones(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, {"d1": ["alpha", "beta"], "d2": ["gamma"]})
    first = export_changes(layout)
    _ingest(layout, {"d1": ["alpha", "delta"], "d2": ["gamma"]})  # d2 re-ingested unchanged
    second = export_changes(layout)
    rows = pq.read_table(second.path).to_pylist()
    assert [(r["op"], r["chunk_id"]) for r in rows] == [("delete", "d1-beta"), ("upsert", "d1-delta")]
    assert second.export_no == 2 and second.since == first.until and second.until > first.until
    assert _replay([first.path, second.path], {}) == _kb_chunks(layout)


def test_a_chunk_assembled_before_an_export_but_loaded_after_it_is_not_lost(tmp_path):
    """Shards carry their assembly time; a load that commits after an export must still be exported."""
    layout = KbLayout(tmp_path)
    _ingest(layout, {"d1": ["alpha"]})
    _write(layout, "d2", ["late"])  # assembled now (staged at ASSEMBLED, long before the export) ...
    export_changes(layout)
    load_documents(layout, "r", ["d2"])  # ... loaded only after the export
    later = export_changes(layout)
    assert [r["chunk_id"] for r in pq.read_table(later.path).to_pylist()] == ["d2-late"]


def test_a_failed_write_keeps_the_watermark_and_the_next_export_reuses_the_number(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, {"d1": ["alpha"]})
    layout.outbox().parent.mkdir(parents=True, exist_ok=True)
    layout.outbox().write_text("not a folder")  # the outbox cannot be created: a real write failure
    with pytest.raises(StoreError, match="outbox"):
        export_changes(layout)
    layout.outbox().unlink()
    retry = export_changes(layout)
    assert (retry.export_no, retry.upserts, retry.since) == (1, 1, None)


def test_feeds_keep_separate_watermarks_and_names_are_checked(tmp_path):
    layout = KbLayout(tmp_path)
    _ingest(layout, {"d1": ["alpha"]})
    assert export_changes(layout, "vector").upserts == 1
    assert export_changes(layout, "search-index").path.name == "search-index-000001.parquet"
    with pytest.raises(StoreError, match="feed name"):
        export_changes(layout, "../evil")
