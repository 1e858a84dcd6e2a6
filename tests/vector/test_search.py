"""Search: the word index (terms, BM25 in DuckDB, kept from the outbox), and its fusion with the dense
ranking, one result per page. Real DuckDB files; the real bundled model where vectors are needed."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from kb_factory import ingest

from chandra_ocr.errors import ConfigError, NotFoundError
from chandra_ocr.store.duckdb_store import forget_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector import hybrid, lexical
from chandra_ocr.vector.consumer import apply_outbox
from chandra_ocr.vector.lexical_index import (
    apply_lexical,
    create_index,
    open_lexical,
    replace_chunks,
    search_lexical,
)
from chandra_ocr.vector.outbox import export_changes
from chandra_ocr.vector.search import search_kb

DOCS = {
    "d1": [
        "Purchases of property and equipment were 1,577 million in fiscal 2019.",
        "Dividends paid to holders.",
    ],
    "d2": [
        "The capital expenditures of the year ended December 31, 2018 rose.",
        "Employees numbered 42,000.",
    ],
    "d3": ["Inventories at the end of the year were 5,409 million.", "Unrelated words about weather."],
}


def test_terms_stem_words_keep_numbers_whole_and_drop_function_words():
    assert lexical.terms("The Expenditures of FY2019 were $11,588.") == ["expenditur", "fy", "2019", "11588"]
    assert lexical.terms("inventory") == lexical.terms("Inventories")
    assert lexical.terms("a the of and") == []


def _memory_index(rows: dict[str, str]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_index(con)
    table = pa.table(
        {
            "chunk_id": list(rows),
            "doc_id": [cid.split(":")[0] for cid in rows],
            "text": list(rows.values()),
            "context": [""] * len(rows),
        }
    )
    replace_chunks(con, table, table.select(["chunk_id"]).slice(0, 0))
    return con


def test_bm25_ranks_rare_matching_terms_first_and_filters_by_document():
    con = _memory_index(
        {
            "a:1": "capital expenditures and other expenditures",
            "a:2": "revenue revenue revenue and capital",
            "b:1": "capital expenditures of the subsidiary",
            "b:2": "nothing relevant here",
        }
    )
    ranked = [cid for cid, _ in lexical.bm25(con, "What were capital expenditures?", 10)]
    assert ranked[:2] == ["a:1", "b:1"] and "b:2" not in ranked
    assert [cid for cid, _ in lexical.bm25(con, "capital expenditures", 10, doc_id="b")] == ["b:1"]
    assert lexical.bm25(con, "the of and", 10) == []


def test_replacing_a_chunk_replaces_its_postings():
    con = _memory_index({"a:1": "inventory inventory"})
    again = pa.table({"chunk_id": ["a:1"], "doc_id": ["a"], "text": ["cash flows"], "context": [""]})
    replace_chunks(con, again, again.select(["chunk_id"]).slice(0, 0))
    assert con.execute("SELECT term, tf FROM postings ORDER BY term").fetchall() == [("cash", 1), ("flow", 1)]
    assert lexical.bm25(con, "inventory", 10) == []


def test_the_feed_keeps_the_word_index_current_and_a_replay_changes_nothing(tmp_path):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    export_changes(layout)
    index_dir = tmp_path / "index"
    first = apply_lexical(layout, index_dir)
    assert (first.files, first.upserts, first.deletes, first.chunks) == (1, 6, 0, 6)
    assert apply_lexical(layout, index_dir).files == 0
    con = open_lexical(index_dir, read_only=True)
    try:
        (hit,) = search_lexical(con, "inventories at year end", 1)
    finally:
        con.close()
    assert (hit.doc_id, hit.file_name, hit.text) == ("d3", "d3.pdf", DOCS["d3"][0])
    forget_documents(layout, ["d3"])
    export_changes(layout)
    gone = apply_lexical(layout, index_dir)
    assert (gone.files, gone.deletes, gone.chunks) == (1, 2, 4)


def test_an_index_of_another_tokenizer_is_rebuilt_from_the_outbox(tmp_path, monkeypatch):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    export_changes(layout)
    index_dir = tmp_path / "index"
    apply_lexical(layout, index_dir)
    monkeypatch.setattr("chandra_ocr.vector.lexical_index.TOKENIZER", "next-version")
    rebuilt = apply_lexical(layout, index_dir)
    assert (rebuilt.files, rebuilt.chunks) == (1, 6)


def test_search_without_a_word_index_says_to_feed(tmp_path):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    with pytest.raises(ConfigError, match="chandra-ingest feed"):
        search_kb(layout, "capital expenditures")


def test_search_by_words_alone_when_no_vectors_exist_says_so(tmp_path):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    export_changes(layout)
    apply_lexical(layout, layout.root / "vector")
    result = search_kb(layout, "capital expenditures in 2018", k=2)
    assert result.note is not None and "words only" in result.note
    assert result.hits[0].doc_id == "d2"
    with pytest.raises(NotFoundError):
        search_kb(layout, "capital", doc="nope.pdf")
    (only,) = search_kb(layout, "dividends employees inventories", k=5, doc="d1.pdf").hits
    assert only.doc_id == "d1"


def test_fused_search_lists_each_page_once(tmp_path, embedder):
    """Every chunk of the factory's documents is on page 1: one hit per document, best first."""
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    export_changes(layout)
    apply_lexical(layout, layout.root / "vector")
    apply_outbox(layout, embedder=embedder)
    result = search_kb(layout, "How much was spent on property and equipment?", k=5, embedder=embedder)
    assert result.note is None
    assert [h.doc_id for h in result.hits][:1] == ["d1"]
    assert len({(h.doc_id, h.page_start) for h in result.hits}) == len(result.hits) == 3
    assert all(a.score >= b.score for a, b in zip(result.hits, result.hits[1:], strict=False))


def test_reciprocal_rank_fusion_prefers_what_both_rankings_hold():
    fused = hybrid.fuse([["a", "b", "c"], ["c", "d", "a"]])
    assert [item for item, _ in fused][:2] == ["a", "c"]


def test_a_page_found_by_several_chunks_outranks_one_found_once_a_little_higher():
    page = {"x1": "x", "y1": "y", "x2": "x", "x3": "x", "z1": "z"}
    ranked = hybrid.by_page(["y1", "x1", "x2", "z1", "x3"], page.__getitem__)
    assert [item for item, _ in ranked] == ["x1", "y1", "z1"]  # each page once, by its best chunk
    assert ranked[0][1] > ranked[1][1] > ranked[2][1]
