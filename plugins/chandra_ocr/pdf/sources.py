"""Where PDFs come from: a local folder or glob, or an object store URL (``s3://``, ``gs://``, ``az://``,
``file://``, anything fsspec understands).

A source lists its entries (location, size, modification time, ETag) without reading them, and
reads one entry's bytes when discovery needs them (``open``). A remote entry is streamed once into
the knowledge base's work area, hashed while it is read (``fetch``); local files are read in place.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from chandra_ocr.errors import ConfigError

GLOB_CHARS = frozenset("*?[")  # a source with one of these is a glob pattern
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
CHUNK_BYTES = 1 << 20


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


class LocalSource:
    """A folder (searched recursively for ``*.pdf``) or a glob on this machine's filesystem."""

    remote = False

    def __init__(self, source: str | Path) -> None:
        self.url = str(source)

    def entries(self) -> Iterator[Entry | Refused]:
        from chandra_ocr.pdf.discover import candidates

        for path, refusal in candidates(self.url):
            if refusal is not None:
                yield Refused(path, refusal)
                continue
            try:
                stat = os.stat(path)
            except OSError as e:
                yield Refused(path, f"unreadable: {e.strerror or e}")
                continue
            yield Entry(path, stat.st_size, stat.st_mtime)

    def open(self, entry: Entry) -> BinaryIO:
        return open(entry.location, "rb")


class ObjectSource:
    """A prefix (searched recursively for ``*.pdf``) or a glob in an object store, through fsspec.

    ``fs`` is the filesystem to use (under Airflow: the one of ``ObjectStoragePath`` with the
    source's connection); without it, fsspec builds one from the store's standard environment
    (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, profiles).
    ``credentials`` names where they came from, for error messages.
    """

    remote = True

    def __init__(self, url: str, fs: Any = None, credentials: str | None = None) -> None:
        import fsspec

        self.url = url.rstrip("/")
        self.protocol = url.split("://", 1)[0]
        if fs is None:
            try:
                fs, _ = fsspec.core.url_to_fs(url)
            except ImportError as e:
                raise ConfigError(
                    f"source {url}: this store's fsspec library is not installed ({e}); for s3:// "
                    f"install the s3 extra: pip install 'chandra-ocr-airflow[s3]'"
                ) from None
        self.fs = fs
        self.root = fs._strip_protocol(url).rstrip("/")
        self.credentials = credentials or "the store's standard environment (e.g. AWS_* variables)"

    def check(self) -> None:
        """The prefix exists and these credentials may read it (one cheap request); raises ConfigError."""
        try:
            self.fs.invalidate_cache()
            self.fs.info(self.root.split("*")[0].split("?")[0].split("[")[0].rstrip("/"))
        except FileNotFoundError:
            raise ConfigError(
                f"source {self.url}: no such bucket or prefix; check the URL (and {self.credentials})"
            ) from None
        except Exception as e:
            raise self.access_error(e) from e

    def entries(self) -> Iterator[Entry | Refused]:
        """Every ``*.pdf`` under the prefix (or matching the glob), in key order; one paginated listing."""
        self.fs.invalidate_cache()  # a long-lived filesystem object would list from its cache
        try:
            if GLOB_CHARS & set(self.root):
                found = self.fs.glob(self.root, detail=True)
            else:
                found = self.fs.find(self.root, detail=True)
        except FileNotFoundError:
            found = {}
        except Exception as e:
            raise self.access_error(e) from e
        for key in sorted(found):
            info = found[key]
            name = key.rsplit("/", 1)[-1]
            hidden = any(part.startswith(".") for part in key[len(self.root) :].split("/"))
            if info.get("type") == "directory" or hidden or not name.lower().endswith(".pdf"):
                continue
            yield Entry(self._url(key), int(info.get("size") or 0), _mtime(info), _etag(info))

    def open(self, entry: Entry) -> BinaryIO:
        return self.fs.open(self.fs._strip_protocol(entry.location), "rb", block_size=CHUNK_BYTES)

    def access_error(self, error: Exception) -> ConfigError:
        """The one-line error for a listing the store refused (wrong credentials, no such bucket)."""
        what = type(error).__name__
        return ConfigError(
            f"cannot list {self.url} with the credentials of {self.credentials}: {what}: {error}; "
            f"check them (nothing was read or changed)"
        )

    def _url(self, key: str) -> str:
        return f"{self.protocol}://{key}"


def open_source(
    source: str | Path, fs: Any = None, credentials: str | None = None
) -> LocalSource | ObjectSource:
    """The source behind ``source``: a URL is an object store (``file://`` too), else a local path."""
    if is_url(source):
        return ObjectSource(str(source), fs, credentials)
    return LocalSource(source)


def fetch(source: LocalSource | ObjectSource, entry: Entry, spool: Path) -> tuple[str, Path]:
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


def hash_entry(source: LocalSource | ObjectSource, entry: Entry) -> str:
    """The sha256 hex digest of an entry's bytes, read in place."""
    with source.open(entry) as f:
        return stream_sha256(f)


def stream_sha256(stream: BinaryIO) -> str:
    """The sha256 hex digest of a stream, read in chunks (never whole)."""
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK_BYTES):
        digest.update(chunk)
    return digest.hexdigest()


def _mtime(info: dict[str, Any]) -> float:
    """The modification time in an fsspec listing (each store names it differently)."""
    for key in ("LastModified", "last_modified", "mtime", "updated", "modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str) and value:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return 0.0


def _etag(info: dict[str, Any]) -> str | None:
    for key in ("ETag", "etag", "md5Hash", "version_id", "VersionId"):
        if info.get(key):
            return str(info[key]).strip('"')
    return None
