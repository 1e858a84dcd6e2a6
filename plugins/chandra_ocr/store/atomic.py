"""Atomic file writes: write a temporary sibling, then rename over the target."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename onto ``path``; readers never see a partial file."""
    fd, tmp_path = _temporary_sibling(path)
    os.close(fd)
    try:
        write(tmp_path)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """Atomically write UTF-8 text (through the temporary file's own descriptor: one open, not two)."""
    fd, tmp_path = _temporary_sibling(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def _temporary_sibling(path: Path) -> tuple[int, Path]:
    """An open temporary file beside ``path``; the folder is created when missing."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    return fd, Path(tmp)
