"""Discovery: find the PDFs under a folder or glob, hash them, and sort them into new / known / skipped."""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chandra_ocr.progress import Progress

log = logging.getLogger(__name__)

GLOB_CHARS = frozenset("*?[")  # a source with one of these is a glob pattern


@dataclass(frozen=True)
class SourceFile:
    """One PDF found by discovery."""

    path: str  # absolute, symlinks resolved
    doc_id: str  # sha256 hex of the bytes
    bytes: int
    mtime: float


@dataclass
class Discovery:
    """The outcome of one walk."""

    new: list[SourceFile] = field(default_factory=list)
    known: list[SourceFile] = field(default_factory=list)  # same doc_id already in the KB at this path
    duplicates: list[tuple[SourceFile, str]] = field(default_factory=list)  # (file, path of the same bytes)
    recent: list[str] = field(default_factory=list)  # modified within settle_seconds: skipped this time
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def discover(
    source: str | Path,
    known: Mapping[str, str],
    *,
    settle_seconds: float,
    now: float | None = None,
    modified_since: float | None = None,
    modified_until: float | None = None,
    limit: int | None = None,
) -> Discovery:
    """Walk ``source`` (a folder, recursively, ``*.pdf`` in any case; or a glob pattern) in sorted order.

    ``known`` maps doc_id → source path already in the knowledge base. Files modified outside
    [``modified_since``, ``modified_until``) are ignored; files modified less than
    ``settle_seconds`` before ``now`` are listed as ``recent``. Symlinks resolving outside the
    source root, ``..`` escapes and unreadable files are ``refused``; a file reached by several
    paths counts once; hidden (dot) names are skipped in folder walks. The walk stops once
    ``limit`` new files are found. Files are hashed in chunks, never read whole.
    """
    now = time.time() if now is None else now
    known_paths = {doc_id: _resolved(path) for doc_id, path in known.items()}
    result = Discovery()
    seen_files: set[str] = set()
    seen_ids: dict[str, str] = {}
    progress = Progress(f"discover {source}", 0, log)  # files hashed so far, every 10 s on a long walk
    for path, refusal in candidates(str(source)):
        if limit is not None and len(result.new) >= limit:
            break
        if refusal is not None:
            result.refused.append((path, refusal))
            continue
        if path in seen_files:
            continue
        seen_files.add(path)
        found = _inspect(path, now, settle_seconds, modified_since, modified_until, result)
        progress.add(docs=1)
        if found is None:
            continue
        other = seen_ids.setdefault(found.doc_id, found.path)
        if other != found.path:
            result.duplicates.append((found, other))
        elif found.doc_id not in known_paths:
            result.new.append(found)
        elif known_paths[found.doc_id] == found.path:
            result.known.append(found)
        else:
            result.duplicates.append((found, known_paths[found.doc_id]))
    counts = [len(x) for x in (result.new, result.known, result.duplicates, result.recent, result.refused)]
    log.info("discovered under %s: %d new, %d known, %d duplicates, %d recent, %d refused", source, *counts)
    return result


def _inspect(
    path: str,
    now: float,
    settle_seconds: float,
    since: float | None,
    until: float | None,
    result: Discovery,
) -> SourceFile | None:
    """Stat and hash one resolved file; records recent/refused in ``result``; None when skipped."""
    try:
        stat = os.stat(path)
    except OSError as e:
        result.refused.append((path, f"unreadable: {e.strerror or e}"))
        return None
    if (since is not None and stat.st_mtime < since) or (until is not None and stat.st_mtime >= until):
        return None
    if now - stat.st_mtime < settle_seconds:
        result.recent.append(path)
        return None
    try:
        doc_id = file_sha256(path)
    except OSError as e:
        result.refused.append((path, f"unreadable: {e.strerror or e}"))
        return None
    return SourceFile(path=path, doc_id=doc_id, bytes=stat.st_size, mtime=stat.st_mtime)


def recent_note(recent: Sequence[str], settle_seconds: float, how: str, shown: int = 5) -> str | None:
    """A line naming the first ``shown`` files skipped as still being written and ``how`` to take them."""
    if not recent:
        return None
    names = ", ".join(Path(p).name for p in recent[:shown])
    more = f" and {len(recent) - shown} more" if len(recent) > shown else ""
    return (
        f"{len(recent)} file(s) skipped as still being written (modified less than "
        f"{settle_seconds:g} s ago): {names}{more}; a later run takes them, or this one with {how}"
    )


def file_sha256(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def candidates(source: str) -> Iterator[tuple[str, str | None]]:
    """(resolved path, None) for every candidate file, or (path as found, reason) for a refusal; lazy."""
    if GLOB_CHARS & set(source):
        yield from _glob_candidates(source)
        return
    root = Path(source)
    if not root.is_dir():
        yield source, "not a folder, and no glob pattern"
        return
    root_real = Path(os.path.realpath(root))
    yield from _walk(root, root_real, {str(root_real)})


def _walk(folder: Path, root_real: Path, visited: set[str]) -> Iterator[tuple[str, str | None]]:
    """Depth-first, name-sorted walk; links are followed only while they stay under ``root_real``."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        yield str(folder), f"unreadable folder: {e.strerror or e}"
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # hidden files and folders (e.g. macOS "._x.pdf" resource forks) are not documents
        is_pdf = entry.name.lower().endswith(".pdf")
        real = Path(os.path.realpath(entry.path))
        if entry.is_symlink() and (is_pdf or entry.is_dir()) and not real.is_relative_to(root_real):
            yield entry.path, f"symlink leads outside the source root (to {real})"
        elif entry.is_symlink() and is_pdf and not real.exists():
            yield entry.path, "broken symlink"
        elif entry.is_dir():
            if str(real) not in visited:
                visited.add(str(real))
                yield from _walk(Path(entry.path), root_real, visited)
        elif is_pdf and entry.is_file():
            yield str(real), None


def _glob_candidates(pattern: str) -> Iterator[tuple[str, str | None]]:
    """Files matching ``pattern``, confined to the pattern's fixed leading folder."""
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if GLOB_CHARS & set(part))
    root = Path(*parts[:fixed]) if fixed else Path(".")
    root_real = Path(os.path.realpath(root))
    for match in sorted(glob.glob(pattern, recursive=True)):
        real = Path(os.path.realpath(match))
        if not real.is_relative_to(root_real):
            why = "'..' leads outside" if ".." in Path(match).parts else "symlink leads outside"
            yield match, f"{why} the source root {root} (to {real})"
        elif real.is_file():
            yield str(real), None


def _resolved(path: str) -> str:
    """A KB path compared after resolving symlinks, as discovery reports paths."""
    return os.path.realpath(path)
