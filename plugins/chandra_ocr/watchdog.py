"""The stall watchdog: a run whose pages stop finishing is logged, and failed past a limit.

Every wait in the pipeline has its own deadline (a page's, a document's); the watchdog is the
net under them. Finished work (``Progress.add``, a new stage) beats it. The loops that wait on
workers, Tesseract or a server call ``check`` each time they wake (every few seconds): once no
beat came for ``warn_after_s`` it logs what is waited on, and past ``fail_after_s`` it raises
``StallError`` naming the stage and what is in flight, so the batch fails with that message
instead of waiting for ever. A daemon thread logs the same warning when a wait outside our
loops (inside an engine library) does not come back to ``check``.

One watchdog serves the process (``WATCHDOG``): a run arms it for its duration (``armed``);
unarmed, ``check`` does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from chandra_ocr.errors import StallError

log = logging.getLogger(__name__)

WAKE_S = 5.0  # how often the waiting loops (and the logging thread) wake to check


class Watchdog:
    """Time since the last finished piece of work, with a warning and a failure limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._warned_at = 0.0
        self._stage = "idle"
        self._limits: tuple[float, float] | None = None  # (warn_after_s, fail_after_s) while armed
        self._stop = threading.Event()

    @contextmanager
    def armed(self, warn_after_s: float, fail_after_s: float) -> Iterator[Watchdog]:
        """Watch for stalls while the block runs (nested arming keeps the outer limits)."""
        if self._limits is not None:
            yield self
            return
        self._limits = (warn_after_s, fail_after_s)
        self.beat()
        self._stop.clear()
        thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._limits = None
            self._stop.set()
            thread.join(timeout=WAKE_S + 1)

    def beat(self, stage: str | None = None) -> None:
        """Work finished (or a stage began): the stall clock starts again."""
        with self._lock:
            self._last = time.monotonic()
            self._warned_at = 0.0
            if stage is not None:
                self._stage = stage

    def stalled_s(self) -> float:
        """Seconds since the last beat."""
        return time.monotonic() - self._last

    def check(self, waiting_on: Callable[[], str]) -> None:
        """Called by a waiting loop: warn or raise ``StallError`` when the limits are passed.

        ``waiting_on`` describes what the loop waits for (documents, pages); called only when needed.
        """
        limits = self._limits
        if limits is None:
            return
        stalled = self.stalled_s()
        if stalled >= limits[1]:
            message = (
                f"stage {self._stage!r}: nothing finished for {stalled:.0f} s "
                f"(limit {limits[1]:g} s, option stall_timeout_s); waiting on {waiting_on()}"
            )
            log.error("%s", message)
            raise StallError(message)
        self._maybe_warn(stalled, limits[0], waiting_on)

    def _maybe_warn(self, stalled: float, warn_after: float, waiting_on: Callable[[], str] | None) -> None:
        with self._lock:
            if stalled < warn_after or stalled - self._warned_at < warn_after:
                return
            self._warned_at = stalled
        what = f"; waiting on {waiting_on()}" if waiting_on is not None else ""
        log.warning("stage %r: nothing finished for %.0f s%s", self._stage, stalled, what)

    def _watch(self) -> None:
        while not self._stop.wait(WAKE_S):
            limits = self._limits
            if limits is not None:
                self._maybe_warn(self.stalled_s(), limits[0], None)


WATCHDOG = Watchdog()
