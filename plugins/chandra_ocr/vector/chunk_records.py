"""Chunks as records for a vector store: the knowledge base's chunks read lazily, and outbox rows.

One place owns what a chunk looks like outside the knowledge base: ``chunk_metadata`` gives the
provenance kept beside each vector (the same keys for the loader and for the outbox sync), and
``read_chunks`` streams the current chunks of ``kb.duckdb``, optionally of some documents, runs
or kinds, in ``doc_id, chunk_no`` order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

# The keys every record carries, in this order (the outbox and kb.duckdb share these names).
FIELDS = (
    "chunk_id", "doc_id", "file_name", "source_uri", "chunk_no", "kind", "page_start", "page_end",
    "header_path", "bboxes", "n_tokens", "content_hash", "context",
)  # fmt: skip

_COLUMNS = ", ".join(
    {
        "file_name": "d.file_name",
        "source_uri": "d.source_uri",
        "context": "coalesce(c.context, '') AS context",
    }.get(f, f"c.{f}")
    for f in FIELDS
)
_SELECT = f"""SELECT c.text, {_COLUMNS}
FROM chunks c JOIN documents d USING (doc_id)
WHERE ($docs::VARCHAR[] IS NULL OR list_contains($docs, c.doc_id)
       OR list_contains($docs, d.file_name))
  AND ($runs::VARCHAR[] IS NULL OR list_contains($runs, d.run_id))
  AND ($kinds::VARCHAR[] IS NULL OR list_contains($kinds, c.kind))
ORDER BY c.doc_id, c.chunk_no"""


def chunk_metadata(row: Mapping[str, Any], *, flat: bool = False) -> dict[str, Any]:
    """The provenance of one chunk row (from kb.duckdb or an outbox file).

    ``flat`` gives only str/int values (``header_path`` joined with " > ", ``bboxes`` as JSON), which
    every vector store accepts; otherwise ``header_path`` is a list and ``bboxes`` a list of dicts.
    """
    meta: dict[str, Any] = {f: row.get(f) for f in FIELDS}
    meta["header_path"] = list(meta["header_path"] or [])
    meta["bboxes"] = [dict(b) for b in meta["bboxes"] or []]
    if flat:
        meta["header_path"] = " > ".join(meta["header_path"])
        meta["bboxes"] = json.dumps(meta["bboxes"], separators=(",", ":"))
        meta = {k: ("" if v is None else v) for k, v in meta.items()}
    return meta


def read_chunks(
    layout: KbLayout,
    *,
    docs: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    batch_size: int = 512,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(text, row) of each current chunk, fetched ``batch_size`` at a time from a read-only connection.

    ``docs`` matches doc_ids or file names, ``runs`` the run that ingested the document, ``kinds``
    the chunk kind (``text``, ``table``); None means all.
    """
    con = connect(layout, read_only=True)
    try:
        params = {"docs": _list(docs), "runs": _list(runs), "kinds": _list(kinds)}
        cursor = con.execute(_SELECT, params)
        names = [d[0] for d in cursor.description]
        while rows := cursor.fetchmany(batch_size):
            for values in rows:
                row = dict(zip(names, values, strict=True))
                yield row.pop("text"), row
    finally:
        con.close()


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else [str(v) for v in values]
