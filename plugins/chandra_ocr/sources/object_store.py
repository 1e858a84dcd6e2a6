"""An object-store source: a prefix or a glob under ``s3://``, ``gs://``, ``az://``, ``file://`` or
anything fsspec understands.

It lists its entries (location, size, modification time, ETag) in one paginated listing without
reading them, and opens one entry's bytes when discovery needs them; discovery streams a new
object once into the knowledge base's work area, hashed while it is read (``source.fetch``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, BinaryIO

from chandra_ocr.errors import ConfigError
from chandra_ocr.sources.entry import CHUNK_BYTES, Entry, Refused, is_glob


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
            if is_glob(self.root):
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
