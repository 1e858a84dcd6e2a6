"""Search the knowledge base: BM25 over the feed's lexical index fused with the dense ranking.

``search_kb`` is what ``chandra-ingest search``, the browser's Search page and the LangChain retriever
call. It ranks ``DEPTH`` chunks by BM25 (``lexical_index``) and ``DEPTH`` by the embedding model,
from the embedded vector index or from a LangChain store when one is given, fuses the two by
reciprocal rank and ranks pages by the chunks of each found there (``hybrid``), so a page (and a
table on it) is listed once, by its best chunk. Without an embedding runtime (the ``embed`` extra)
or a vector index it ranks by BM25 alone and says why in ``SearchResult.note``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chandra_ocr.errors import ConfigError, NotFoundError, StoreError
from chandra_ocr.extras import embed_missing, embedding_installed
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector import hybrid
from chandra_ocr.vector.consumer import default_index_dir
from chandra_ocr.vector.embedder import Embedder
from chandra_ocr.vector.index import Hit, index_path, open_index
from chandra_ocr.vector.index import search as dense_search
from chandra_ocr.vector.lexical_index import lexical_path, open_lexical, search_lexical

DEPTH = 50  # chunks each ranking contributes to the fusion


@dataclass(frozen=True)
class SearchResult:
    """The hits, best first, and why the dense ranking was left out (None: it was used)."""

    hits: list[Hit]
    note: str | None = None


def search_kb(
    layout: KbLayout,
    question: str,
    k: int = 5,
    *,
    doc: str | None = None,
    index_dir: Path | None = None,
    store: Any = None,
    embedder: Embedder | None = None,
) -> SearchResult:
    """The ``k`` best pages' chunks for ``question`` (of document ``doc``, a file name or doc_id, when given).

    Raises ConfigError when the feed has not built the lexical index yet, NotFoundError for an
    unknown ``doc``.
    """
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir(layout)
    if not lexical_path(index_dir).is_file():
        raise ConfigError(
            f"no search index in {index_dir}: run `chandra-ingest feed --kb {layout.root}` first"
        )
    con = open_lexical(index_dir, read_only=True)
    try:
        doc_id = _doc_id(con, doc) if doc is not None else None
        lexical = search_lexical(con, question, DEPTH, doc_id)
    finally:
        con.close()
    dense, note = _dense(index_dir, question, doc_id, store, embedder)
    by_id = {h.chunk_id: h for h in (*dense, *lexical)}
    fused = hybrid.fuse([[h.chunk_id for h in lexical], [h.chunk_id for h in dense]])
    pages = hybrid.by_page([cid for cid, _ in fused], lambda cid: (by_id[cid].doc_id, by_id[cid].page_start))
    return SearchResult([replace(by_id[cid], score=score) for cid, score in pages[:k]], note)


def _doc_id(con: Any, doc: str) -> str:
    rows = con.execute(
        "SELECT DISTINCT doc_id FROM lexical_chunks WHERE doc_id = ? OR file_name = ? LIMIT 2", [doc, doc]
    ).fetchall()
    if not rows:
        raise NotFoundError(f"no document {doc!r} in the search index (give a file name or doc_id)")
    return rows[0][0]


def _dense(
    index_dir: Path, question: str, doc_id: str | None, store: Any, embedder: Embedder | None
) -> tuple[list[Hit], str | None]:
    """The dense ranking from ``store`` or the embedded index, or ([], why there is none)."""
    if store is not None:
        from chandra_ocr.vector.target import search_store

        hits = search_store(store, question, k=DEPTH * (4 if doc_id else 1))
        return [h for h in hits if doc_id is None or h.doc_id == doc_id][:DEPTH], None
    if embedder is None and not embedding_installed():
        return [], f"words only: {embed_missing()}"
    if not index_path(index_dir).is_file():
        return [], "words only: no vector index yet (the next `chandra-ingest feed` builds it)"
    embedder = (embedder or Embedder()).start()
    try:
        con = open_index(index_dir, embedder.name, embedder.dim, read_only=True)
    except (ConfigError, StoreError) as e:
        return [], f"words only: {e}"
    try:
        return dense_search(con, embedder.embed([question])[0], DEPTH, doc_id), None
    finally:
        con.close()
