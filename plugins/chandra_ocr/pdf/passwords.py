"""Passwords of encrypted PDFs: a mapping read from a JSON file (or given by the caller), never shown.

Keys name documents in one of three ways, the most specific match winning: the ``doc_id``
(sha256 of the file), a path or path ending (``"scans/2024/a.pdf"`` matches any source path
ending in ``/scans/2024/a.pdf``), or a bare file name. Values are the user (open) passwords.
A ``PasswordBook`` shows only its size in ``repr``; errors about a password file never quote
its contents.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from chandra_ocr.errors import ConfigError


@dataclass(frozen=True)
class PasswordBook:
    """Document key → password (see the module docstring for the keys)."""

    entries: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        bad = [
            k for k, v in self.entries.items() if not isinstance(k, str) or not isinstance(v, str) or not k
        ]
        if bad:
            raise ConfigError(
                f"password entries need non-empty string keys and string values ({len(bad)} bad)"
            )

    def __repr__(self) -> str:
        return f"PasswordBook({len(self.entries)} entries)"

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, doc_id: str, source: str) -> str | None:
        """The password for the document ``doc_id`` at path ``source``, or None."""
        if doc_id in self.entries:
            return self.entries[doc_id]
        path = Path(source).as_posix()
        best: tuple[int, str] | None = None
        for key, password in self.entries.items():
            if _path_matches(path, key) and (best is None or len(key) > best[0]):
                best = (len(key), password)
        return best[1] if best else None

    def for_documents(self, docs: Iterable[tuple[str, str]]) -> dict[str, str]:
        """doc_id → password for those of ``docs`` (``(doc_id, source)`` pairs) that have one."""
        out = {}
        for doc_id, source in docs:
            password = self.lookup(doc_id, source)
            if password is not None:
                out[doc_id] = password
        return out


def _path_matches(path: str, key: str) -> bool:
    """Whether ``key`` is ``path`` itself or one or more of its trailing components."""
    key = Path(key).as_posix()
    return path == key or path.endswith("/" + key.lstrip("/"))


def parse_passwords(text: str, what: str = "passwords") -> PasswordBook:
    """A book from a JSON object ``{key: password}``; raises ConfigError (without quoting ``text``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not valid JSON (line {e.lineno}, column {e.colno})") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a JSON object of document key → password")
    try:
        return PasswordBook(dict(value))
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from None


def load_passwords(path: str | os.PathLike[str]) -> PasswordBook:
    """The book in the JSON file at ``path``; raises ConfigError when it cannot be read or parsed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read passwords file {path}: {e.strerror or type(e).__name__}") from None
    return parse_passwords(text, f"passwords file {path}")
