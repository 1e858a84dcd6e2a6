"""The LangChain loader over a real DuckDB knowledge base, its Embeddings, and `feed`'s summary lines."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
from kb_factory import ingest, kb_chunks

from chandra_ocr.cli import main
from chandra_ocr.store.layout import KbLayout

pytest.importorskip("langchain_core", reason="the loader needs the 'langchain' extra")

from chandra_ocr.integrations.langchain import (  # noqa: E402
    KnowledgeBaseEmbeddings,
    KnowledgeBaseLoader,
    KnowledgeBaseRetriever,
)

DOCS = {"d1": ["alpha", "beta"], "d2": ["gamma"], "d3": ["delta", "epsilon"]}


@pytest.fixture
def kb(tmp_path) -> KbLayout:
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    return layout


def test_the_loader_yields_every_chunk_lazily_with_its_provenance(kb):
    docs = KnowledgeBaseLoader(kb.root).lazy_load()
    first = next(docs)  # a generator: the first Document comes before the rest are read
    everything = [first, *docs]
    assert {d.id: d.page_content for d in everything} == kb_chunks(kb)
    assert [d.metadata["doc_id"] for d in everything] == ["d1", "d1", "d2", "d3", "d3"]
    meta = first.metadata
    assert meta["chunk_id"] == first.id == "d1-alpha" and meta["file_name"] == "d1.pdf"
    assert (meta["page_start"], meta["page_end"], meta["kind"], meta["chunk_no"]) == (1, 1, "text", 0)
    assert meta["header_path"] == ["H"] and meta["bboxes"][0]["page_no"] == 1
    assert meta["source_uri"] == "/in/d1.pdf" and len(meta["content_hash"]) > 8


def test_the_loader_filters_by_document_run_and_kind(kb):
    def ids(**filters) -> list[str]:
        return [d.id for d in KnowledgeBaseLoader(kb.root, **filters).load()]

    assert ids(docs=["d2", "d3.pdf"]) == ["d2-gamma", "d3-delta", "d3-epsilon"]  # doc_id or file name
    assert len(ids(runs=["r"])) == 5 and ids(runs=["another-run"]) == []
    assert len(ids(kinds=["text"])) == 5 and ids(kinds=["table"]) == []


def test_flat_metadata_holds_only_scalars(kb):
    doc = KnowledgeBaseLoader(kb.root, docs=["d1"], flat_metadata=True).load()[0]
    assert all(isinstance(v, str | int) for v in doc.metadata.values())
    assert doc.metadata["header_path"] == "H" and json.loads(doc.metadata["bboxes"])[0]["x0"] == 1.0


def test_the_embeddings_are_the_feeds_model():
    embeddings = KnowledgeBaseEmbeddings()
    query = embeddings.embed_query("three ships with damaged sails")
    docs = embeddings.embed_documents(["three ships with damaged sails", "the library budget"])
    alone = embeddings.embed_documents(["three ships with damaged sails"])
    assert len(query) == 384 and np.allclose(query, alone[0], atol=1e-5)
    # The int8 model quantises activations per call, so a text's vector moves a little with its batch.
    assert float(np.dot(query, docs[0])) > 0.98
    assert float(np.dot(query, docs[0])) > float(np.dot(query, docs[1])) + 0.2


def _feed(argv: list[str]) -> list[str]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue().splitlines()


def test_feed_prints_summaries_for_the_index_and_for_a_configured_store(kb, tmp_path):
    pytest.importorskip("lancedb", reason="needs the 'lancedb' extra")
    lines = _feed(["feed", "--kb", str(kb.root)])
    assert lines[0].startswith("outbox: export 1 → ") and lines[0].endswith("(5 upserts, 0 deletes)")
    assert lines[1] == "search index: 1 outbox file(s) applied: 5 upserts, 0 deleted; 5 chunks in all"
    assert (
        lines[2]
        == "vector index: 1 outbox file(s) applied: 5 chunks embedded (0 reused), 0 deleted; 5 vectors in all"
    )
    kwargs = {"uri": str(tmp_path / "lance"), "table_name": "kb", "mode": "append"}
    target = {"name": "lance", "store": "langchain_community.vectorstores:LanceDB", "store_kwargs": kwargs}
    lines = _feed(["feed", "--kb", str(kb.root), "--target", json.dumps(target)])
    assert lines == [
        "outbox: nothing changed since the last export",
        "search index: up to date, 5 chunks",
        "vector store lance: 1 outbox file(s) applied: 5 chunks written, 0 unchanged skipped, 0 deleted; "
        "5 chunks in all",
    ]
    assert not any("Counts(" in line for line in lines)
    found = _feed(["search", "--kb", str(kb.root), "--target", json.dumps(target), "epsilon", "-k", "2"])
    assert (
        found[0].startswith("1. ") and "d3.pdf  p. 1  [text] H" in found[0] and found[1].strip() == "epsilon"
    )


def test_the_retriever_is_the_cli_search(kb):
    _feed(["feed", "--kb", str(kb.root)])
    found = KnowledgeBaseRetriever(kb=str(kb.root), k=2).invoke("epsilon")
    printed = _feed(["search", "--kb", str(kb.root), "epsilon", "-k", "2"])
    assert found[0].id == "d3-epsilon" and found[0].page_content == "epsilon"
    assert found[0].metadata["file_name"] == "d3.pdf" and found[0].metadata["page_start"] == 1
    assert all(
        f"{d.metadata['file_name']}  p. 1" in line for d, line in zip(found, printed[::2], strict=True)
    )
    assert (
        len(found) == 2 and found[1].metadata["doc_id"] != "d3"
    )  # the other chunk of d3's page is not listed
