"""What a source lists: one entry per file or object (location, size, modification time, ETag),
or a refusal with its reason; and the chunked hash discovery reads entries with."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

GLOB_CHARS = frozenset("*?[")  # a source with one of these is a glob pattern
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
CHUNK_BYTES = 1 << 20


def is_glob(text: str | Path) -> bool:
    """True for a glob pattern (a ``GLOB_CHARS`` character in it), also for one path part."""
    return bool(GLOB_CHARS & set(str(text)))


def is_url(source: str | Path) -> bool:
    """True for ``scheme://…`` (an object store, or ``file://``); False for a local path or glob."""
    return bool(_URL.match(str(source)))


@dataclass(frozen=True)
class Entry:
    """One listed file or object: what the store says about it, none of its bytes."""

    location: str  # local: the resolved absolute path; remote: the URL
    size: int
    mtime: float  # seconds since the epoch (an object's last-modified time)
    etag: str | None = None  # the store's version tag; None for local files


@dataclass(frozen=True)
class Refused:
    """A candidate discovery cannot take, and why."""

    location: str
    reason: str


def stream_sha256(stream: BinaryIO) -> str:
    """The sha256 hex digest of a stream, read in chunks (never whole)."""
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK_BYTES):
        digest.update(chunk)
    return digest.hexdigest()
