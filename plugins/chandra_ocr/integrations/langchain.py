"""LangChain adapters: a document loader over the knowledge base and the bundled embedding model.

    from chandra_ocr.integrations.langchain import KnowledgeBaseEmbeddings, KnowledgeBaseLoader
    docs = KnowledgeBaseLoader("kb", kinds=["table"]).lazy_load()
    store.add_documents(list(docs), ids=[d.id for d in docs])

Needs the ``langchain`` extra (langchain-core). For incremental syncing into a store keyed by
``chunk_id`` use ``chandra_ocr.vector.sync`` (``chandra-ingest feed --target``), not a reload.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

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
