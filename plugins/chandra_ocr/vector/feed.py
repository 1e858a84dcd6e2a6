"""Where the vector feed's outbox goes: a LangChain vector store when a target is configured (synced by
``chunk_id``, vector/sync.py), else the knowledge base's embedded index (vector/consumer.py). One
place for the choice, used by ``chandra-ingest feed`` and the feed DAG's ``index`` task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.consumer import ApplyCounts, apply_outbox, default_index_dir
from chandra_ocr.vector.embedder import Embedder
from chandra_ocr.vector.sync import SyncCounts, sync_outbox
from chandra_ocr.vector.target import VectorTarget


class VectorFeed:
    """``VectorFeed(target, index_dir)(layout)`` → counts: the outbox of ``layout`` applied to the
    ``target`` store, or (no target) to the embedded index at ``index_dir`` (default ``<kb>/vector``).
    The store is built, and the embedder started, once for every knowledge base fed."""

    def __init__(self, target: VectorTarget | None, index_dir: Path | None = None) -> None:
        self.target = target
        self.index_dir = index_dir
        self._store: Any = None
        self._embedder: Embedder | None = None

    def where(self, layout: KbLayout) -> dict[str, str]:
        """The store the outbox of ``layout`` goes to: ``{"target": name}`` or ``{"index": folder}``."""
        if self.target is not None:
            return {"target": self.target.name}
        return {"index": str(self.index_dir or default_index_dir(layout))}

    def __call__(self, layout: KbLayout) -> SyncCounts | ApplyCounts:
        target = self.target
        if target is not None:
            if self._store is None:
                self._store = target.build()
            return sync_outbox(layout, self._store, target=target.name, batch_size=target.batch_size)
        if self._embedder is None:
            self._embedder = Embedder().start()
        return apply_outbox(layout, self.index_dir, embedder=self._embedder)
