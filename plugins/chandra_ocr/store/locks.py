"""Taking a file lock without waiting for ever: the knowledge base's writers and its claims use it."""

from __future__ import annotations

import time
from collections.abc import Callable

from chandra_ocr.errors import StoreError


def take_lock(try_lock: Callable[[], object], wait_s: float, message: str, *, max_delay_s: float) -> None:
    """Call ``try_lock`` (a non-blocking ``flock``/``lockf``, which raises while another holds the lock)
    until it succeeds, sleeping a doubling delay from 5 ms up to ``max_delay_s``; past ``wait_s``, a
    StoreError with ``message``."""
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            try_lock()
            return
        except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: held elsewhere
            if time.monotonic() > deadline:
                raise StoreError(message) from None
            time.sleep(delay)
            delay = min(delay * 2, max_delay_s)
