"""The outbox sync into real LangChain vector stores: a Chroma server on 127.0.0.1 (``chroma run``,
one per session) and LanceDB embedded, with the real bundled embedding model. After ingest, a
changed document and a forgotten one, the store holds exactly the knowledge base's chunks (ids and
text, no duplicates); a sync killed (SIGKILL) in the middle of a batch and rerun ends the same."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from kb_factory import ingest, kb_chunks

from chandra_ocr.store.duckdb_store import forget_documents
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.outbox import export_changes
from chandra_ocr.vector.sync import sync_outbox
from chandra_ocr.vector.target import VectorTarget

pytest.importorskip("langchain_core", reason="the sync tests need the 'langchain' extra")

DOCS = {
    "d1": ["the harbour log of the autumn storm", "three ships with damaged sails"],
    "d2": ["the municipal library budget", "opening hours of the reading room", "a list of donors"],
    "d3": ["minutes of the council meeting", "the vote on the new bridge"],
}


@pytest.fixture(params=["chroma", "lancedb"])
def target(request, tmp_path) -> VectorTarget:
    """A fresh collection (Chroma server) or table (LanceDB folder) as a configured target."""
    if request.param == "chroma":
        pytest.importorskip("langchain_chroma", reason="needs the 'chroma' extra")
        host, port = request.getfixturevalue("chroma_server")
        kwargs = {"collection_name": f"kb-{uuid.uuid4().hex[:8]}", "host": host, "port": port}
        return VectorTarget.from_dict(
            {"name": "chroma", "store": "langchain_chroma:Chroma", "store_kwargs": kwargs}
        )
    pytest.importorskip("lancedb", reason="needs the 'lancedb' extra")
    kwargs = {"uri": str(tmp_path / "lance"), "table_name": "kb", "mode": "append"}
    store = "langchain_community.vectorstores:LanceDB"
    return VectorTarget.from_dict({"name": "lance", "store": store, "store_kwargs": kwargs})


def stored(target: VectorTarget) -> list[tuple[str, str]]:
    """(id, text) of every record in the target store, read with the database's own client."""
    kwargs = target.store_kwargs
    if target.name == "chroma":
        import chromadb

        client = chromadb.HttpClient(host=kwargs["host"], port=kwargs["port"])
        got = client.get_collection(kwargs["collection_name"]).get(include=["documents"])
        return sorted(zip(got["ids"], got["documents"], strict=True))
    import lancedb

    db = lancedb.connect(kwargs["uri"])
    if kwargs["table_name"] not in db.list_tables().tables:
        return []
    table = db.open_table(kwargs["table_name"]).to_arrow()
    return sorted(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))


def sync(layout: KbLayout, target: VectorTarget, batch_size: int = 2):
    export_changes(layout)
    return sync_outbox(layout, target.build(), target=target.name, batch_size=batch_size)


def test_the_store_holds_exactly_the_kbs_chunks_after_ingest_change_and_forget(tmp_path, target):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    first = sync(layout, target)
    assert stored(target) == sorted(kb_chunks(layout).items())
    assert (first.files, first.written, first.deleted, first.chunks) == (1, 7, 0, 7)

    ingest(layout, {"d1": ["the harbour log of the autumn storm", "two ships lost their masts"]})
    changed = sync(layout, target)
    assert stored(target) == sorted(kb_chunks(layout).items())
    assert (changed.files, changed.written, changed.deleted) == (1, 1, 1)

    forget_documents(layout, ["d2"])
    forgot = sync(layout, target)
    assert stored(target) == sorted(kb_chunks(layout).items())
    assert (forgot.written, forgot.deleted, forgot.chunks) == (0, 3, 4)
    assert sync(layout, target).summary().endswith("up to date, 4 chunks")

    hits = target.build().similarity_search("which ships lost their masts?", k=1)
    assert hits[0].metadata["chunk_id"] == "d1-two ships lost their masts"
    assert hits[0].metadata["doc_id"] == "d1" and hits[0].metadata["file_name"] == "d1.pdf"
    assert hits[0].metadata["page_start"] == 1 and json.loads(hits[0].metadata["bboxes"])[0]["page_no"] == 1


KILLING_SYNC = textwrap.dedent(
    """
    import os, signal, sys, json
    from pathlib import Path
    from chandra_ocr.store.layout import KbLayout
    from chandra_ocr.vector.sync import sync_outbox
    from chandra_ocr.vector.target import VectorTarget

    kb, spec, method, kill_on = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    target = VectorTarget.from_dict(json.loads(spec))
    store = target.build()
    real, calls = getattr(store, method), []

    def dying(*args, **kwargs):  # on call kill_on: half the batch reaches the store, then SIGKILL
        calls.append(1)
        if len(calls) == kill_on:
            ids = kwargs["ids"]
            if method == "add_documents":
                real(args[0][: len(ids) // 2], ids=ids[: len(ids) // 2])
            else:
                real(ids=ids[: len(ids) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)

    setattr(store, method, dying)
    sync_outbox(KbLayout(Path(kb)), store, target=target.name, batch_size=int(sys.argv[5]))
    """
)


@pytest.mark.parametrize("method", ["add_documents", "delete"])
def test_a_sync_killed_mid_batch_and_rerun_ends_with_the_kbs_chunks(tmp_path, target, method):
    layout = KbLayout(tmp_path / "kb")
    ingest(layout, DOCS)
    batch = 4
    if method == "delete":  # a synced store, then deletes to apply: killed in the second delete batch
        sync(layout, target, batch)
        forget_documents(layout, ["d2", "d3"])
        batch = 2
    export_changes(layout)
    spec = json.dumps(target.__dict__)
    args = [sys.executable, "-c", KILLING_SYNC, str(layout.root), spec, method, "2", str(batch)]
    killed = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert stored(target) != sorted(kb_chunks(layout).items())  # the kill left the store half-way

    rerun = sync_outbox(layout, target.build(), target=target.name, batch_size=batch)
    assert stored(target) == sorted(kb_chunks(layout).items())
    assert rerun.files == 1 and rerun.chunks == len(kb_chunks(layout))
    if method == "add_documents":  # the first batch was recorded before the kill: skipped now
        assert (rerun.skipped, rerun.written) == (batch, len(kb_chunks(layout)) - batch)
    assert sync_outbox(layout, target.build(), target=target.name).files == 0
