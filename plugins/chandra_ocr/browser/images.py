"""Page images for the browser: rendered on demand from the document's recorded source, cached with a bound.

The knowledge base keeps no page images and no copy of the PDF: a page view reads the source the
document was ingested from (``documents.source_uri``: a local path or an object-store URL) and
renders the one page at screen resolution. Only that recorded location is ever opened; a source
that is gone, changed size, is encrypted or cannot be read gives a reason instead of an image.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from chandra_ocr.sources.entry import is_url

WIDTH_PX = 1200  # rendered width: a page fills a screen column at 1x, or half of it at 2x
CACHE_BYTES = 64 << 20


class SourceUnavailable(Exception):
    """The page cannot be drawn; the message says why, in one line."""


def default_fs(url: str) -> Any:
    """The fsspec filesystem of ``url`` from the store's standard environment (the CLI's credentials)."""
    import fsspec

    return fsspec.core.url_to_fs(url)[0]


class PageImages:
    """PNG of (doc_id, page_no), rendered from its source and kept in an LRU cache of ``cache_bytes``.

    ``fs_for(url)`` gives the filesystem an object-store source is read with (under Airflow: the
    one of the run's connection).
    """

    def __init__(
        self,
        fs_for: Callable[[str], Any] = default_fs,
        *,
        width_px: int = WIDTH_PX,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.fs_for = fs_for
        self.width_px = width_px
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # PyMuPDF is not thread-safe; the cache is shared

    def png(self, doc_id: str, page_no: int, source_uri: str, size: int) -> bytes:
        """The page drawn at ``width_px``; raises SourceUnavailable (with the reason)."""
        key = (doc_id, int(page_no))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
            data = self._render(source_uri, size, int(page_no))
            self._cache[key] = data
            self._size += len(data)
            while self._size > self.cache_bytes and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._size -= len(old)
            return data

    def _render(self, source_uri: str, size: int, page_no: int) -> bytes:
        pdf = self._read(source_uri, size)
        import pymupdf  # here: a view whose source is gone never pays for the import

        try:
            doc = pymupdf.open(stream=pdf, filetype="pdf")
        except Exception as e:
            raise SourceUnavailable(f"the source cannot be opened as a PDF ({type(e).__name__})") from None
        try:
            if doc.needs_pass:
                raise SourceUnavailable("the source is encrypted; the browser does not read its password")
            if not 1 <= page_no <= doc.page_count:
                raise SourceUnavailable(f"the source has no page {page_no}")
            page = doc[page_no - 1]
            zoom = max(0.25, min(4.0, self.width_px / max(page.rect.width, 1.0)))
            return page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False).tobytes("png")
        finally:
            doc.close()

    def _read(self, source_uri: str, size: int) -> bytes:
        """The source's bytes, when it still has the size it had when ingested."""
        try:
            if is_url(source_uri):
                fs = self.fs_for(source_uri)
                path = fs._strip_protocol(source_uri)
                found = int(fs.info(path).get("size") or 0)
                _check_size(found, size)
                with fs.open(path, "rb") as f:
                    return f.read()
            with open(source_uri, "rb") as f:
                _check_size(os.fstat(f.fileno()).st_size, size)
                return f.read()
        except SourceUnavailable:
            raise
        except FileNotFoundError:
            raise SourceUnavailable(f"the source is gone: {source_uri}") from None
        except Exception as e:
            raise SourceUnavailable(f"the source cannot be read: {type(e).__name__}: {e}") from None


def _check_size(found: int, recorded: int) -> None:
    if found != recorded:
        raise SourceUnavailable(
            f"the source has changed since it was ingested ({found} bytes, {recorded} when read)"
        )
