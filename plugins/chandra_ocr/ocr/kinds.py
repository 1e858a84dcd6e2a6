"""The OCR engine kinds, and what is true of each kind without building it (imports nothing heavy:
the settings check and the compress stage ask here)."""

from __future__ import annotations

from collections.abc import Iterable

from chandra_ocr.errors import ConfigError

ENGINE_KINDS: tuple[str, ...] = ("auto", "text", "cpu", "vllm", "openai")
# Fallback engines need no model and no server, so they do not fail where the primary engine did.
FALLBACK_KINDS: tuple[str, ...] = ("text", "cpu")


def check_engine(kind: str) -> None:
    """Raise ConfigError naming the ``engine`` setting unless ``kind`` is an engine kind."""
    if kind not in ENGINE_KINDS:
        raise ConfigError(f"engine must be one of {ENGINE_KINDS}, got {kind!r}")


def check_fallbacks(kinds: Iterable[str]) -> None:
    """Raise ConfigError naming the ``fallbacks`` setting unless every kind of ``kinds`` can be one."""
    unknown = [k for k in kinds if k not in FALLBACK_KINDS]
    if unknown:
        raise ConfigError(f"fallbacks can be the text and cpu engines, got {unknown}")


def reads_images(kind: str) -> bool:
    """Whether the engine of ``kind`` reads rendered pages: every kind but ``text`` (``auto`` becomes
    ``vllm`` or ``cpu``, both of which do)."""
    return kind != "text"
