"""Where the vector feed's outbox goes: always the knowledge base's lexical index (BM25, no model
needed), and a LangChain vector store when a target is configured (synced by ``chunk_id``,
vector/sync.py), else the embedded vector index (vector/consumer.py) when an embedding runtime is
installed. One place for the choice, used by ``chandra-ingest feed`` and the feed DAG's ``index`` task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chandra_ocr.extras import embed_missing, embedding_installed
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.consumer import ApplyCounts, apply_outbox, default_index_dir
from chandra_ocr.vector.embedder import Embedder
from chandra_ocr.vector.lexical_index import LexicalCounts, apply_lexical
from chandra_ocr.vector.sync import SyncCounts, sync_outbox
from chandra_ocr.vector.target import VectorTarget


@dataclass(frozen=True)
class FeedCounts:
    """What one feed of one knowledge base did: its lexical index, and its vectors (None: not built)."""

    lexical: LexicalCounts
    vectors: SyncCounts | ApplyCounts | None

    def summary(self) -> str:
        """Lines for a person: the lexical index, then the vector index or store."""
        lex = self.lexical
        first = (
            f"search index: {lex.files} outbox file(s) applied: {lex.upserts} upserts, "
            f"{lex.deletes} deleted; {lex.chunks} chunks in all"
            if lex.files
            else f"search index: up to date, {lex.chunks} chunks"
        )
        if self.vectors is not None:
            return f"{first}\n{self.vectors.summary()}"
        return f"{first}\nvector index: not built, search matches words only; {embed_missing()}"


class VectorFeed:
    """``VectorFeed(target, index_dir)(layout)`` → counts: the outbox of ``layout`` applied to the
    lexical index in ``index_dir`` (default ``<kb>/vector``), and to the ``target`` store or (no
    target) to the embedded vector index there. The store is built, and the embedder started, once
    for every knowledge base fed."""

    def __init__(self, target: VectorTarget | None, index_dir: Path | None = None) -> None:
        self.target = target
        self.index_dir = index_dir
        self._store: Any = None
        self._embedder: Embedder | None = None

    def where(self, layout: KbLayout) -> dict[str, str]:
        """The store the outbox of ``layout`` goes to: ``{"target": name}`` or ``{"index": folder}``."""
        if self.target is not None:
            return {"target": self.target.name}
        return {"index": str(self._index_dir(layout))}

    def __call__(self, layout: KbLayout) -> FeedCounts:
        lexical = apply_lexical(layout, self._index_dir(layout))
        target = self.target
        if target is not None:
            if self._store is None:
                self._store = target.build()
            synced = sync_outbox(layout, self._store, target=target.name, batch_size=target.batch_size)
            return FeedCounts(lexical, synced)
        if not embedding_installed():
            return FeedCounts(lexical, None)
        if self._embedder is None:
            self._embedder = Embedder().start()
        return FeedCounts(lexical, apply_outbox(layout, self.index_dir, embedder=self._embedder))

    def _index_dir(self, layout: KbLayout) -> Path:
        return self.index_dir or default_index_dir(layout)
