"""Which vector store the feed syncs into: a LangChain ``VectorStore`` named by import path and kwargs.

A target is a small JSON object (a file, a JSON string, ``$CHANDRA_OCR_VECTOR_TARGET``, or the
``extra`` of an Airflow connection)::

    {"name": "chroma",                                  # names the sync record (one per store)
     "store": "langchain_chroma:Chroma",                # module:attribute of the store class/factory
     "store_kwargs": {"collection_name": "kb", "host": "127.0.0.1", "port": 8000},
     "embeddings": "chandra_ocr.integrations.langchain:KnowledgeBaseEmbeddings",   # the default
     "embeddings_kwargs": {}, "batch_size": 64}

The embeddings object is passed to the store under the keyword its constructor names
(``embedding_function``, ``embedding`` or ``embeddings``). No target means the embedded index.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chandra_ocr.errors import ConfigError
from chandra_ocr.vector.index import Hit

TARGET_ENV = "CHANDRA_OCR_VECTOR_TARGET"
CONN_ENV = "CHANDRA_OCR_VECTOR_CONN_ID"  # Airflow: a connection whose extra is the target
DEFAULT_EMBEDDINGS = "chandra_ocr.integrations.langchain:KnowledgeBaseEmbeddings"
_EMBEDDING_KEYWORDS = ("embedding_function", "embedding", "embeddings")


@dataclass(frozen=True)
class VectorTarget:
    """A LangChain vector store to sync the outbox into (see the module doc for the JSON form)."""

    name: str
    store: str
    store_kwargs: dict[str, Any] = field(default_factory=dict)
    embeddings: str = DEFAULT_EMBEDDINGS
    embeddings_kwargs: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 64

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> VectorTarget:
        unknown = set(values) - {f for f in cls.__dataclass_fields__}
        if unknown or "name" not in values or "store" not in values:
            extra = f"; unknown keys: {', '.join(sorted(unknown))}" if unknown else ""
            raise ConfigError(f"a vector target needs 'name' and 'store' (module:Class){extra}")
        return cls(**dict(values))

    @classmethod
    def parse(cls, spec: str) -> VectorTarget:
        """From a JSON object or the path of a JSON file."""
        text = spec.strip()
        if not text.startswith("{"):
            path = Path(text)
            if not path.is_file():
                raise ConfigError(f"vector target {spec!r} is neither a JSON object nor a file")
            text = path.read_text()
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"vector target is not valid JSON: {e}") from e
        if not isinstance(values, dict):
            raise ConfigError("a vector target is a JSON object")
        return cls.from_dict(values)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> VectorTarget | None:
        """The target in ``$CHANDRA_OCR_VECTOR_TARGET`` (JSON or a file), None when unset."""
        spec = environ.get(TARGET_ENV, "").strip()
        return cls.parse(spec) if spec else None

    def build(self) -> Any:
        """The store object, with its embeddings built and passed in."""
        embeddings = _resolve(self.embeddings)(**self.embeddings_kwargs)
        factory = _resolve(self.store)
        try:
            params = set(inspect.signature(factory).parameters)
        except (TypeError, ValueError):
            params = set()
        keyword = next((k for k in _EMBEDDING_KEYWORDS if k in params), "embedding")
        try:
            return factory(**{keyword: embeddings, **self.store_kwargs})
        except TypeError as e:
            raise ConfigError(f"cannot build vector store {self.store}: {e}") from e


def search_store(store: Any, question: str, k: int = 5) -> list[Hit]:
    """The ``k`` chunks of a synced LangChain store nearest to ``question``, with its relevance scores."""
    hits = []
    for doc, score in store.similarity_search_with_relevance_scores(question, k=k):
        meta = doc.metadata
        path = meta.get("header_path") or ""
        header = tuple(path.split(" > ")) if isinstance(path, str) and path else tuple(path)
        hits.append(
            Hit(meta.get("chunk_id") or doc.id or "", meta.get("doc_id", ""), meta.get("file_name", ""),
                int(meta.get("page_start") or 0), int(meta.get("page_end") or 0), meta.get("kind", ""),
                header, doc.page_content, float(score))
        )  # fmt: skip
    return hits


def _resolve(path: str) -> Any:
    module, sep, attr = path.partition(":")
    if not sep:
        raise ConfigError(f"{path!r}: write module:attribute, e.g. langchain_chroma:Chroma")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"cannot import {module} for {path!r} (is its package installed?): {e}") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{module} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
