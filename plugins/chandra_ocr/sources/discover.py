"""Discovery: list a source's PDFs, hash only those the KB has not seen as they are, sort them by kind."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from chandra_ocr.progress import Progress
from chandra_ocr.sources.entries_table import SourceEntry, new_entry, read_entries, write_entries
from chandra_ocr.sources.entry import Entry, Refused, is_glob, is_url
from chandra_ocr.sources.local import LocalSource
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.sources.source import Source, fetch, hash_entry, open_source
from chandra_ocr.store.layout import KbLayout

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
    window = _Window(time.time() if now is None else now, settle_seconds, modified_since, modified_until)
    walk = _Walk(src, layout, dict(known), read_entries(layout) if layout is not None else {}, window, rehash)
    complete = _list(walk, limit)
    if complete and not is_glob(src.url):
        _forget_gone(walk)
    if layout is not None and (walk.result.hashed or walk.result.gone):
        write_entries(layout, walk.entries)
    _log_counts(src, walk.result)
    return walk.result


@dataclass(frozen=True)
class _Window:
    """The time filters: entries modified in [since, until) and at least ``settle_seconds`` before ``now``."""

    now: float
    settle_seconds: float
    since: float | None
    until: float | None


@dataclass
class _Walk:
    """One discovery under way: the source, what the KB holds, and what was seen so far."""

    src: Source
    layout: KbLayout | None
    known_paths: dict[str, str]  # doc_id → path as discovery recorded it (resolved only on a mismatch)
    cache: dict[str, SourceEntry]  # the source entries table as read
    window: _Window
    rehash: bool
    result: Discovery = field(default_factory=Discovery)
    entries: dict[str, SourceEntry] = field(init=False)  # the table as it will be written
    at_location: dict[str, str] = field(init=False)  # path → doc_id known there
    seen_ids: dict[str, str] = field(default_factory=dict)  # doc_id → first path listed with it
    new_ids: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.entries = dict(self.cache)
        self.at_location = {path: doc_id for doc_id, path in self.known_paths.items()}


def _list(walk: _Walk, limit: int | None) -> bool:
    """Take the source's entries in order until ``limit`` new files are found; False when stopped early."""
    progress = Progress(f"discover {walk.src.url}", 0, log)  # entries so far, every 10 s on a long walk
    entries_iter = walk.src.entries()
    for item in entries_iter:
        if limit is not None and len(walk.result.new) >= limit:
            rest = chain([item], entries_iter)
            walk.result.untaken = _untaken(rest, walk.cache, walk.known_paths, walk.window)
            return False
        if isinstance(item, Refused):
            walk.result.refused.append((item.location, item.reason))
            continue
        if item.location in walk.listed:
            continue
        walk.listed.add(item.location)
        progress.add(docs=1)
        _take(walk, item)
    return True


def _take(walk: _Walk, item: Entry) -> None:
    """One listed entry: filtered by time, identified (from the table or by its bytes), then sorted."""
    found = _inspect(item, walk.window, walk.result)
    if found is None:
        return
    doc_id = _identify(walk, item)
    if doc_id is not None:
        _sort(walk, SourceFile(found.path, doc_id, found.bytes, found.mtime))


def _identify(walk: _Walk, item: Entry) -> str | None:
    """The entry's doc_id: the table's when its quick check holds (and a remote copy is not needed
    again), else its bytes hashed and the table updated; None when it cannot be read."""
    cached = walk.cache.get(item.location)
    hit = cached is not None and not walk.rehash and cached.same(item.size, item.mtime, item.etag)
    doc_id = cached.doc_id if hit and cached is not None else None
    if doc_id is None or (walk.src.remote and _needs_copy(doc_id, walk.known_paths, walk.layout)):
        doc_id = _read(walk.src, item, walk.layout, walk.result)
        if doc_id is not None:
            walk.entries[item.location] = new_entry(item.location, item.size, item.mtime, item.etag, doc_id)
        return doc_id
    walk.result.unchanged += 1
    return doc_id


def _sort(walk: _Walk, found: SourceFile) -> None:
    """File ``found`` as new, known or a duplicate; a remote copy read only to be hashed is removed."""
    result, doc_id, known_paths = walk.result, found.doc_id, walk.known_paths
    other = walk.seen_ids.setdefault(doc_id, found.path)
    if other != found.path:
        result.duplicates.append((found, other))
    elif doc_id not in known_paths:
        old = walk.at_location.get(found.path)
        local = str(walk.layout.source_copy(doc_id)) if walk.src.remote and walk.layout is not None else None
        result.new.append(SourceFile(found.path, doc_id, found.bytes, found.mtime, local, old))
        walk.new_ids.add(doc_id)
        return
    elif found.path == known_paths[doc_id] or found.path == _resolved(known_paths[doc_id]):
        result.known.append(found)
    else:
        result.duplicates.append((found, known_paths[doc_id]))
    if walk.src.remote and walk.layout is not None and doc_id not in walk.new_ids:
        walk.layout.source_copy(doc_id).unlink(missing_ok=True)  # read only to be hashed: not kept


def _forget_gone(walk: _Walk) -> None:
    """After a complete walk of a folder or prefix: table entries under it no longer listed are gone."""
    src = walk.src
    root = src.url.rstrip("/") + "/" if src.remote else os.path.realpath(src.url) + os.sep
    walk.result.gone = sorted(loc for loc in walk.cache if loc.startswith(root) and loc not in walk.listed)
    for loc in walk.result.gone:
        del walk.entries[loc]


def _log_counts(src: Source, result: Discovery) -> None:
    counts = [len(x) for x in (result.new, result.known, result.duplicates, result.recent, result.refused)]
    log.info(
        "discovered under %s: %d new, %d known, %d duplicates, %d recent, %d refused; "
        "%d unchanged entries not read, %d hashed (%d bytes), %d gone from the source",
        src.url, *counts, result.unchanged, result.hashed, result.bytes_read, len(result.gone),
    )  # fmt: skip


def _untaken(
    rest: Iterable[Entry | Refused],
    cache: Mapping[str, SourceEntry],
    known: Mapping[str, str],
    window: _Window,
) -> int:
    """How many of the entries left after ``limit`` pass the time filters and are not known to be in
    the KB already (by the source entries table: nothing is read or hashed)."""
    since, until = window.since, window.until
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


def _read(src: Source, entry: Entry, layout: KbLayout | None, result: Discovery) -> str | None:
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


def _inspect(entry: Entry, window: _Window, result: Discovery) -> SourceFile | None:
    """Apply the time filters and the settle rule to one entry; None when it is skipped."""
    since, until = window.since, window.until
    if (since is not None and entry.mtime < since) or (until is not None and entry.mtime >= until):
        return None
    if window.now - entry.mtime < window.settle_seconds:
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


def _resolved(path: str) -> str:
    """A KB path compared after resolving symlinks, as discovery reports paths (a URL as it is)."""
    return path if is_url(path) else os.path.realpath(path)
