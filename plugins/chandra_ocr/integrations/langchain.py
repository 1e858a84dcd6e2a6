"""LangChain adapters: a retriever and a document loader over the knowledge base, and the bundled
embedding model.

    from chandra_ocr.integrations.langchain import KnowledgeBaseEmbeddings, KnowledgeBaseLoader
    docs = KnowledgeBaseLoader("kb", kinds=["table"]).lazy_load()
    store.add_documents(list(docs), ids=[d.id for d in docs])
    KnowledgeBaseRetriever(kb="kb", k=5).invoke("What were 2019 capital expenditures?")

Needs the ``langchain`` extra (langchain-core). For incremental syncing into a store keyed by
``chunk_id`` use ``chandra_ocr.vector.sync`` (``chandra-ingest feed --target``), not a reload.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from chandra_ocr.document import indexed_text
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.chunk_records import chunk_metadata, read_chunks
from chandra_ocr.vector.embedder import Embedder, EmbedOptions


class KnowledgeBaseLoader(BaseLoader):
    """The knowledge base's current chunks as LangChain Documents, read lazily from ``kb.duckdb``.

    Each Document has ``id = chunk_id``, the chunk's context and text as ``page_content`` (what a store
    embeds; the text alone is the part after the context's lines) and metadata ``chunk_id, doc_id,
    file_name, source_uri, chunk_no, kind, page_start, page_end, header_path, bboxes, n_tokens,
    content_hash, context``;
    ``flat_metadata=True`` makes every value a str or int (for stores that accept only scalars).
    ``docs`` (doc_ids or file names), ``runs`` (run ids) and ``kinds`` filter; None means all.
    """

    def __init__(
        self,
        kb: str | Path,
        *,
        docs: Sequence[str] | None = None,
        runs: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        flat_metadata: bool = False,
    ) -> None:
        self.layout = KbLayout(Path(kb))
        self.docs, self.runs, self.kinds = docs, runs, kinds
        self.flat_metadata = flat_metadata

    def lazy_load(self) -> Iterator[Document]:
        for text, row in read_chunks(self.layout, docs=self.docs, runs=self.runs, kinds=self.kinds):
            meta = chunk_metadata(row, flat=self.flat_metadata)
            yield Document(page_content=indexed_text(row["context"], text), metadata=meta, id=row["chunk_id"])


class KnowledgeBaseEmbeddings(Embeddings):
    """The embedding model of the vector feed (``EmbedOptions``) as LangChain ``Embeddings``.

    Loaded on first use. ``model`` is the bundled model by default or a local model folder; the
    same setting as ``CHANDRA_OCR_EMBED_MODEL``.
    """

    def __init__(self, model: str | None = None, **options) -> None:
        self._options = EmbedOptions.from_env(model=model, **options)
        self._embedder: Embedder | None = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._started().embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._started().embed([text])[0].tolist()

    def _started(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self._options).start()
        return self._embedder


class KnowledgeBaseRetriever(BaseRetriever):
    """``chandra-ingest search`` as a LangChain retriever: words (BM25) and meaning fused, a page once.

    ``kb`` is the knowledge-base folder the feed has indexed; ``k`` the documents returned; ``doc`` a
    file name or doc_id to search one document; ``store`` a LangChain vector store synced by the feed
    (``feed --target``) to take the dense ranking from instead of the embedded index. Each Document is
    a chunk: its text as ``page_content``, metadata ``chunk_id, doc_id, file_name, page_start,
    page_end, kind, header_path, context, score``.
    """

    kb: str
    k: int = 5
    doc: str | None = None
    store: Any = None

    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Document]:
        from chandra_ocr.vector.search import search_kb

        result = search_kb(KbLayout(Path(self.kb)), query, self.k, doc=self.doc, store=self.store)
        return [
            Document(
                page_content=h.text,
                id=h.chunk_id,
                metadata={
                    "chunk_id": h.chunk_id,
                    "doc_id": h.doc_id,
                    "file_name": h.file_name,
                    "page_start": h.page_start,
                    "page_end": h.page_end,
                    "kind": h.kind,
                    "header_path": list(h.header_path),
                    "context": h.context,
                    "score": h.score,
                },
            )  # fmt: skip
            for h in result.hits
        ]
