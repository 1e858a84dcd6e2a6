"""Progress lines at a steady cadence (not per page): documents, pages (or chunks), their rate, ETA.

Every step's start and every piece of finished work also beat the stall watchdog (``watchdog.py``).
"""

from __future__ import annotations

import logging
import time

from chandra_ocr.watchdog import WATCHDOG


class Progress:
    """Counts work and logs a line at most every ``every_s`` seconds, plus a final one.

    The ETA comes from the pages when ``total_pages`` is known, else from the documents when
    ``total_docs`` is; a step that knows neither (a folder walk) logs counts and rates only.
    ``unit`` names what ``pages`` counts (the vector feed counts chunks).
    """

    def __init__(
        self,
        what: str,
        total_pages: int,
        logger: logging.Logger,
        every_s: float = 10.0,
        total_docs: int = 0,
        unit: str = "pages",
    ) -> None:
        self.what, self.total, self.log, self.every = what, total_pages, logger, every_s
        self.total_docs, self.unit = total_docs, unit
        self.start = self.last = time.monotonic()
        self.pages = 0
        self.docs = 0
        self._logged: tuple[int, int] | None = None  # the counts of the last line
        WATCHDOG.beat(what)

    def add(self, pages: int = 0, docs: int = 0) -> None:
        """Record finished work; logs when the cadence is due."""
        self.pages += pages
        self.docs += docs
        WATCHDOG.beat()
        if time.monotonic() - self.last >= self.every:
            self._emit()

    def done(self) -> float:
        """Log the final line (unless the last line had these counts) and return the elapsed seconds."""
        if self._logged != (self.pages, self.docs):
            self._emit()
        return self.elapsed()

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.start

    def _emit(self) -> None:
        self.last = time.monotonic()
        self._logged = (self.pages, self.docs)
        elapsed = max(self.last - self.start, 1e-9)
        if not (self.total or self.total_docs or self.pages or self.docs):
            self.log.info("%s: nothing to do", self.what)
            return
        docs = f"{self.docs}/{self.total_docs} docs, " if self.total_docs else f"{self.docs} docs, "
        docs = docs if self.docs or self.total_docs else ""  # a count of pages alone (OCR pages)
        if self.total:
            rate = self.pages / elapsed
            left = max(self.total - self.pages, 0) / rate if rate > 0 else None
            counts = f"{docs}{self.pages}/{self.total} {self.unit}, {rate:.2f} {self.unit}/s"
        elif self.total_docs:
            rate = self.docs / elapsed
            left = max(self.total_docs - self.docs, 0) / rate if rate > 0 else None
            counts = f"{docs}{self.pages} {self.unit}, {rate:.2f} docs/s"
        else:  # no total known (a folder walk): counts and rate, no ETA
            rate = self.docs / elapsed
            self.log.info("%s: %s%d %s, %.2f docs/s", self.what, docs, self.pages, self.unit, rate)
            return
        eta = "not yet known" if left is None else f"{left:.0f}s"
        self.log.info("%s: %s, ETA %s", self.what, counts, eta)
