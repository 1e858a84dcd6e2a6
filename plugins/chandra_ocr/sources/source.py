"""A source by its name (a local path or glob, or an object-store URL), and reading its entries."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

from chandra_ocr.sources.entry import CHUNK_BYTES, Entry, is_url, stream_sha256
from chandra_ocr.sources.local import LocalSource
from chandra_ocr.sources.object_store import ObjectSource

Source = LocalSource | ObjectSource


def open_source(source: str | Path, fs: Any = None, credentials: str | None = None) -> Source:
    """The source behind ``source``: a URL is an object store (``file://`` too), else a local path."""
    if is_url(source):
        return ObjectSource(str(source), fs, credentials)
    return LocalSource(source)


def fetch(source: Source, entry: Entry, spool: Path) -> tuple[str, Path]:
    """Stream ``entry`` once into a new file under ``spool``, hashing it as it is read → (sha256, file).

    Raises FileNotFoundError when the object is gone and OSError when it cannot be read; the
    partial file is removed then."""
    spool.mkdir(parents=True, exist_ok=True)
    part = spool / f"{uuid.uuid4().hex}.part"
    digest = hashlib.sha256()
    try:
        with source.open(entry) as src, open(part, "wb") as dst:
            while chunk := src.read(CHUNK_BYTES):
                digest.update(chunk)
                dst.write(chunk)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return digest.hexdigest(), part


def hash_entry(source: Source, entry: Entry) -> str:
    """The sha256 hex digest of an entry's bytes, read in place."""
    with source.open(entry) as f:
        return stream_sha256(f)
