"""A bounded read-ahead of a lazy page stream in a background thread (rendering keeps going while an
engine loop works; the loop never blocks on a render while it has work)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable

from chandra_ocr.document import PageRequest
from chandra_ocr.watchdog import WAKE_S


class Feeder:
    """Pulls an iterable in a background thread into a bounded queue; errors re-raise in the consumer."""

    _END = object()

    def __init__(self, items: Iterable[PageRequest], size: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, size))
        self._stop = threading.Event()
        self.done = False
        self._thread = threading.Thread(target=self._pull, args=(items,), name="page-feed", daemon=True)
        self._thread.start()

    def _pull(self, items: Iterable[PageRequest]) -> None:
        it = iter(items)
        try:
            for item in it:
                if not self._put(item):
                    break
            else:
                self._put(self._END)
        except BaseException as e:  # handed to the consumer thread, which re-raises it
            self._put(e)
        finally:
            close = getattr(it, "close", None)
            if close is not None and self._stop.is_set():
                close()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(self, block: bool) -> PageRequest | None:
        """The next page; None when none is ready (``block=False``, or ``WAKE_S`` passed while
        blocking: the caller checks its deadlines and asks again) or the stream has ended."""
        if self.done:
            return None
        try:
            item = self._queue.get(block=block, timeout=WAKE_S if block else None)
        except queue.Empty:
            return None
        if item is self._END or isinstance(item, BaseException):
            self.done = True
            if isinstance(item, BaseException):
                raise item
            return None
        return item

    def close(self) -> None:
        """Stop pulling (the thread ends after the item it is waiting for, if any)."""
        self._stop.set()
