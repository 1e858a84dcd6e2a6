"""A bounded read-ahead of a lazy page stream in background threads (rendering keeps going while an
engine loop works; the loop never blocks on a render while it has work). Each item can be prepared
on the way (e.g. turned into an engine's input) by several threads at once."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

from chandra_ocr.watchdog import WAKE_S


class Feeder:
    """Pulls an iterable into a bounded queue, applying ``prepare`` to each item in ``threads``
    threads (in order when ``threads`` is 1); errors re-raise in the consumer."""

    _END = object()

    def __init__(
        self,
        items: Iterable[Any],
        size: int,
        prepare: Callable[[Any], Any] | None = None,
        threads: int = 1,
    ) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, size))
        self._stop = threading.Event()
        self._lock = threading.Lock()  # guards the iterator and the two fields below
        self._items = iter(items)
        self._exhausted = False
        self._running = max(1, threads)
        self._prepare = prepare
        self.done = False
        for i in range(self._running):
            threading.Thread(target=self._pull, name=f"page-feed-{i}", daemon=True).start()

    def _pull(self) -> None:
        try:
            while (item := self._next()) is not self._END:
                if not self._put(item if self._prepare is None else self._prepare(item)):
                    break
        except BaseException as e:  # handed to the consumer thread, which re-raises it
            with self._lock:
                self._exhausted = True
            self._put(e)
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                self._finish()

    def _next(self) -> Any:
        with self._lock:
            if self._exhausted or self._stop.is_set():
                return self._END
            try:
                return next(self._items)
            except StopIteration:
                self._exhausted = True
                return self._END

    def _finish(self) -> None:
        """The last thread out: mark the end, or close a stream the consumer stopped early."""
        if not self._stop.is_set():
            self._put(self._END)
            return
        close = getattr(self._items, "close", None)
        if close is not None:
            close()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(self, block: bool) -> Any:
        """The next (prepared) item; None when none is ready (``block=False``, or ``WAKE_S`` passed
        while blocking: the caller checks its deadlines and asks again) or the stream has ended."""
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
        """Stop pulling (each thread ends after the item it is waiting for, if any)."""
        self._stop.set()
