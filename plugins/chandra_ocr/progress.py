"""Progress lines at a steady cadence (not per page): documents, pages, pages/s, ETA."""

from __future__ import annotations

import logging
import time


class Progress:
    """Counts work and logs a line at most every ``every_s`` seconds, plus a final one."""

    def __init__(self, what: str, total_pages: int, logger: logging.Logger, every_s: float = 10.0) -> None:
        self.what, self.total, self.log, self.every = what, total_pages, logger, every_s
        self.start = self.last = time.monotonic()
        self.pages = 0
        self.docs = 0

    def add(self, pages: int = 0, docs: int = 0) -> None:
        """Record finished work; logs when the cadence is due."""
        self.pages += pages
        self.docs += docs
        if time.monotonic() - self.last >= self.every:
            self._emit()

    def done(self) -> float:
        """Log the final line and return the elapsed seconds."""
        self._emit()
        return time.monotonic() - self.start

    def _emit(self) -> None:
        self.last = time.monotonic()
        elapsed = max(self.last - self.start, 1e-9)
        rate = self.pages / elapsed
        left = max(self.total - self.pages, 0)
        eta = f"{left / rate:.0f}s" if rate > 0 else "?"
        self.log.info(
            "%s: %d docs, %d/%d pages, %.2f pages/s, ETA %s",
            self.what,
            self.docs,
            self.pages,
            self.total,
            rate,
            eta,
        )
