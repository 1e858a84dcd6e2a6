"""Which pipes this process holds (the no-hang tests' leak check)."""

from __future__ import annotations

import contextlib
import os


def pipe_inodes() -> set[int]:
    """The inodes of the pipes this process holds descriptors of (this module is light enough to be
    imported in a memory-capped PDF worker)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("pipe:["):
                inodes.add(int(target[6:-1]))
    return inodes
