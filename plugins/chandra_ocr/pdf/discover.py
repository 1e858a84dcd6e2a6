"""Discovery: list a source's PDFs, hash only those the KB has not seen as they are, sort them by kind."""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from chandra_ocr.pdf.sources import (
    GLOB_CHARS,
    Entry,
    LocalSource,
    ObjectSource,
    Refused,
    fetch,
    hash_entry,
    is_url,
    open_source,
)
from chandra_ocr.progress import Progress
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.source_entries import SourceEntry, new_entry, read_entries, write_entries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    """One PDF found by discovery."""

    path: str  # local: absolute, symlinks resolved; remote: the object's URL
    doc_id: str  # sha256 hex of the bytes
    bytes: int
    mtime: float
    local: str | None = None  # a remote object's copy in the work area (what the stages read)
    replaces: str | None = None  # doc_id of the document this one replaces at the same location


@dataclass
class Discovery:
    """The outcome of one walk."""

    new: list[SourceFile] = field(default_factory=list)
    known: list[SourceFile] = field(default_factory=list)  # same doc_id already in the KB at this path
    duplicates: list[tuple[SourceFile, str]] = field(default_factory=list)  # (file, path of the same bytes)
    recent: list[str] = field(default_factory=list)  # modified within settle_seconds: skipped this time
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    gone: list[str] = field(default_factory=list)  # entries seen by an earlier run, no longer listed
    untaken: int = 0  # files past ``limit`` that match the filters and are not known to be in the KB
    unchanged: int = 0  # entries whose (size, mtime, ETag) matched the KB's: not read
    hashed: int = 0  # entries read and hashed
    bytes_read: int = 0


def discover(
    source: str | Path | LocalSource | ObjectSource,
    known: Mapping[str, str],
    *,
    settle_seconds: float,
    now: float | None = None,
    modified_since: float | None = None,
    modified_until: float | None = None,
    limit: int | None = None,
    layout: KbLayout | None = None,
    rehash: bool = False,
) -> Discovery:
    """List ``source`` (a folder, recursively, ``*.pdf`` in any case; a glob; or an object-store URL)
    in sorted order and sort what it holds into new / known / duplicates / recent / refused.

    ``known`` maps doc_id → source path already in the knowledge base. Files modified outside
    [``modified_since``, ``modified_until``) are ignored; files modified less than
    ``settle_seconds`` before ``now`` are listed as ``recent``. Symlinks resolving outside the
    source root, ``..`` escapes and unreadable files are ``refused``; a file reached by several
    paths counts once; hidden (dot) names are skipped. The walk stops once ``limit`` new files are
    found. With ``layout``, an entry whose (location, size, mtime, ETag) matches the KB's source
    entries table keeps its doc_id unread (unless ``rehash``); others are hashed in chunks, never
    read whole, and the table is updated. A new remote object is streamed once into its work area
    (``layout.source_copy``), hashed as it is read.
    """
    src = source if isinstance(source, LocalSource | ObjectSource) else open_source(source)
    if src.remote and layout is None:
        raise ValueError("a remote source needs the knowledge base's layout (its work area)")
    now = time.time() if now is None else now
    known_paths = dict(known)  # as discovery recorded them (resolved); resolved again only on a mismatch
    at_location = {path: doc_id for doc_id, path in known_paths.items()}
    cache = read_entries(layout) if layout is not None else {}
    entries = dict(cache)
    result = Discovery()
    seen_ids: dict[str, str] = {}
    new_ids: set[str] = set()
    listed: set[str] = set()
    complete = True
    progress = Progress(f"discover {src.url}", 0, log)  # entries so far, every 10 s on a long walk
    entries_iter = src.entries()
    for item in entries_iter:
        if limit is not None and len(result.new) >= limit:
            complete = False
            rest = chain([item], entries_iter)
            result.untaken = _untaken(rest, cache, known_paths, modified_since, modified_until)
            break
        if isinstance(item, Refused):
            result.refused.append((item.location, item.reason))
            continue
        if item.location in listed:
            continue
        listed.add(item.location)
        progress.add(docs=1)
        found = _inspect(src, item, now, settle_seconds, modified_since, modified_until, result)
        if found is None:
            continue
        cached = cache.get(item.location)
        hit = cached is not None and not rehash and cached.same(item.size, item.mtime, item.etag)
        doc_id = cached.doc_id if hit and cached is not None else None
        if doc_id is None or (src.remote and _needs_copy(doc_id, known_paths, layout)):
            doc_id = _read(src, item, layout, result)
            if doc_id is None:
                continue
            entries[item.location] = new_entry(item.location, item.size, item.mtime, item.etag, doc_id)
        else:
            result.unchanged += 1
        found = SourceFile(found.path, doc_id, found.bytes, found.mtime)
        other = seen_ids.setdefault(doc_id, found.path)
        if other != found.path:
            result.duplicates.append((found, other))
        elif doc_id not in known_paths:
            old = at_location.get(found.path)
            local = str(layout.source_copy(doc_id)) if src.remote and layout is not None else None
            result.new.append(SourceFile(found.path, doc_id, found.bytes, found.mtime, local, old))
            new_ids.add(doc_id)
            continue
        elif found.path == known_paths[doc_id] or found.path == _resolved(known_paths[doc_id]):
            result.known.append(found)
        else:
            result.duplicates.append((found, known_paths[doc_id]))
        if src.remote and layout is not None and doc_id not in new_ids:
            layout.source_copy(doc_id).unlink(missing_ok=True)  # read only to be hashed: not kept
    if complete and not GLOB_CHARS & set(src.url):
        root = src.url.rstrip("/") + "/" if src.remote else os.path.realpath(src.url) + os.sep
        result.gone = sorted(loc for loc in cache if loc.startswith(root) and loc not in listed)
        for loc in result.gone:
            del entries[loc]
    if layout is not None and (result.hashed or result.gone):
        write_entries(layout, entries)
    counts = [len(x) for x in (result.new, result.known, result.duplicates, result.recent, result.refused)]
    log.info(
        "discovered under %s: %d new, %d known, %d duplicates, %d recent, %d refused; "
        "%d unchanged entries not read, %d hashed (%d bytes), %d gone from the source",
        src.url, *counts, result.unchanged, result.hashed, result.bytes_read, len(result.gone),
    )  # fmt: skip
    return result


def _untaken(
    rest: Iterable[Entry | Refused],
    cache: Mapping[str, SourceEntry],
    known: Mapping[str, str],
    since: float | None,
    until: float | None,
) -> int:
    """How many of the entries left after ``limit`` pass the time filters and are not known to be in
    the KB already (by the source entries table: nothing is read or hashed)."""
    left = 0
    for entry in rest:
        if isinstance(entry, Refused) or (since is not None and entry.mtime < since):
            continue
        cached = cache.get(entry.location)
        if (until is None or entry.mtime < until) and not (
            cached is not None and cached.same(entry.size, entry.mtime, entry.etag) and cached.doc_id in known
        ):
            left += 1
    return left


def _needs_copy(doc_id: str, known_paths: Mapping[str, str], layout: KbLayout | None) -> bool:
    """A remote entry that will be new but whose copy is not in the work area must be fetched again."""
    return doc_id not in known_paths and layout is not None and not layout.source_copy(doc_id).exists()


def _read(
    src: LocalSource | ObjectSource, entry: Entry, layout: KbLayout | None, result: Discovery
) -> str | None:
    """Hash one entry (a remote one streamed into its work area as it is read); None when refused."""
    try:
        if not src.remote:
            doc_id = hash_entry(src, entry)
        else:
            assert layout is not None
            doc_id, part = fetch(src, entry, layout.fetch_spool)
            copy = layout.source_copy(doc_id)
            copy.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, copy)
    except FileNotFoundError:
        result.refused.append((entry.location, "deleted from the source after it was listed"))
        return None
    except OSError as e:
        result.refused.append((entry.location, f"unreadable: {e.strerror or e}"))
        return None
    result.hashed += 1
    result.bytes_read += entry.size
    return doc_id


def _inspect(
    src: LocalSource | ObjectSource,
    entry: Entry,
    now: float,
    settle_seconds: float,
    since: float | None,
    until: float | None,
    result: Discovery,
) -> SourceFile | None:
    """Apply the time filters and the settle rule to one entry; None when it is skipped."""
    if (since is not None and entry.mtime < since) or (until is not None and entry.mtime >= until):
        return None
    if now - entry.mtime < settle_seconds:
        result.recent.append(entry.location)
        return None
    return SourceFile(path=entry.location, doc_id="", bytes=entry.size, mtime=entry.mtime)


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
    """A KB path compared after resolving symlinks, as discovery reports paths (a URL as it is)."""
    return path if is_url(path) else os.path.realpath(path)
