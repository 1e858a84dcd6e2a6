"""Atomic file writes: write a temporary sibling, then rename over the target."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename onto ``path``; readers never see a partial file."""

    def fill(fd: int, tmp: Path) -> None:
        os.close(fd)
        write(tmp)

    return _atomically(path, fill)


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Atomically write ``data`` (one write through the temporary file's own descriptor)."""

    def fill(fd: int, _tmp: Path) -> None:
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    return _atomically(path, fill)


def write_text_atomic(path: Path, text: str) -> Path:
    """Atomically write UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def _atomically(path: Path, fill: Callable[[int, Path], None]) -> Path:
    """Create a temporary file beside ``path`` (and the folder when missing), ``fill(fd, tmp)`` it,
    rename it onto ``path``; on any failure the temporary file is removed."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        fill(fd, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
