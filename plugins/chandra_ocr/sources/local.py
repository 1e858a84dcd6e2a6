"""A local source: a folder (searched recursively for ``*.pdf``) or a glob on this machine's filesystem.

The walk is lazy and name-sorted; symlinks are followed only while they stay under the source
root, ``..`` escapes and links leading out are refused with their reason, a folder reached by
several paths is walked once, and hidden (dot) names are skipped.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from chandra_ocr.sources.entry import Entry, Refused, is_glob


class LocalSource:
    """A folder (searched recursively for ``*.pdf``) or a glob on this machine's filesystem."""

    remote = False

    def __init__(self, source: str | Path) -> None:
        self.url = str(source)

    def entries(self) -> Iterator[Entry | Refused]:
        for path, refusal in candidates(self.url):
            if refusal is not None:
                yield Refused(path, refusal)
                continue
            try:
                stat = os.stat(path)
            except OSError as e:
                yield Refused(path, f"unreadable: {e.strerror or e}")
                continue
            yield Entry(path, stat.st_size, stat.st_mtime)

    def open(self, entry: Entry) -> BinaryIO:
        return open(entry.location, "rb")


def candidates(source: str) -> Iterator[tuple[str, str | None]]:
    """(resolved path, None) for every candidate file, or (path as found, reason) for a refusal; lazy."""
    if is_glob(source):
        yield from _glob_candidates(source)
        return
    root = Path(source)
    if not root.is_dir():
        yield source, "not a folder, and no glob pattern"
        return
    root_real = Path(os.path.realpath(root))
    yield from _walk(root, root_real, root_real, {str(root_real)})


def _walk(
    folder: Path, folder_real: Path, root_real: Path, visited: set[str]
) -> Iterator[tuple[str, str | None]]:
    """Depth-first, name-sorted walk; links are followed only while they stay under ``root_real``.
    ``folder_real`` is ``folder`` resolved: only symlinks are resolved entry by entry."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        yield str(folder), f"unreadable folder: {e.strerror or e}"
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # hidden files and folders (e.g. macOS "._x.pdf" resource forks) are not documents
        is_pdf = entry.name.lower().endswith(".pdf")
        real = Path(os.path.realpath(entry.path)) if entry.is_symlink() else folder_real / entry.name
        if entry.is_symlink() and (is_pdf or entry.is_dir()) and not real.is_relative_to(root_real):
            yield entry.path, f"symlink leads outside the source root (to {real})"
        elif entry.is_symlink() and is_pdf and not real.exists():
            yield entry.path, "broken symlink"
        elif entry.is_dir():
            if str(real) not in visited:
                visited.add(str(real))
                yield from _walk(Path(entry.path), real, root_real, visited)
        elif is_pdf and entry.is_file():
            yield str(real), None


def _glob_candidates(pattern: str) -> Iterator[tuple[str, str | None]]:
    """Files matching ``pattern``, confined to the pattern's fixed leading folder."""
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if is_glob(part))
    root = Path(*parts[:fixed]) if fixed else Path(".")
    root_real = Path(os.path.realpath(root))
    for match in sorted(glob.glob(pattern, recursive=True)):
        real = Path(os.path.realpath(match))
        if not real.is_relative_to(root_real):
            why = "'..' leads outside" if ".." in Path(match).parts else "symlink leads outside"
            yield match, f"{why} the source root {root} (to {real})"
        elif real.is_file():
            yield str(real), None
