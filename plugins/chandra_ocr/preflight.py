"""Checks that need no work, run before any: the source, the knowledge-base folder, the preset, the engine,
passwords.

Each raises ConfigError with one line saying what is wrong, with which path or setting, and what
to do. ``check_run`` runs them all: the CLI before a run starts, the Airflow ``preflight`` task
(airflow/preflight.py) once per DAG run.
"""

from __future__ import annotations

import os
from pathlib import Path

from chandra_ocr.config import IngestOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.pdf.passwords import load_passwords
from chandra_ocr.sources.entry import is_glob
from chandra_ocr.sources.local import LocalSource, candidates
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.sources.source import open_source
from chandra_ocr.store.layout import KbLayout

REFUSED_SHOWN = 3  # refused files a source error names


def check_source(source: str | Path | LocalSource | ObjectSource) -> None:
    """``source`` is a folder or glob in which discovery finds at least one file (it stops at the first),
    or an object-store URL whose prefix these credentials can read."""
    src = source if isinstance(source, LocalSource | ObjectSource) else open_source(source)
    if isinstance(src, ObjectSource):
        src.check()
        return
    text = src.url
    glob = is_glob(text)
    path = Path(text)
    if not glob and not path.exists():
        raise ConfigError(
            f"source {text} does not exist: give a folder of PDFs or a glob such as '/data/**/*.pdf'"
        )
    if not glob and not path.is_dir():
        raise ConfigError(
            f"source {text} is a file, not a folder: give the folder it is in, or a glob such as "
            f"'{path.parent / '*.pdf'}'"
        )
    refused: list[str] = []
    n_refused = 0
    for found, refusal in candidates(text):
        if refusal is None:
            return
        n_refused += 1
        if len(refused) < REFUSED_SHOWN:
            refused.append(f"{found}: {refusal}")
    if refused:
        raise ConfigError(f"source {text}: no PDF file to read, {_skipped(refused, n_refused)}")
    if glob:
        raise ConfigError(f"source {text}: the pattern matches no file; check the folder and the pattern")
    raise ConfigError(f"source {text} holds no PDF file (*.pdf, searched recursively): put the PDFs there")


def _skipped(shown: list[str], n: int) -> str:
    """``N skipped (path: reason; …)`` and what to do, for a source whose every candidate was refused."""
    more = f"; and {n - len(shown)} more" if n > len(shown) else ""
    if any("leads outside" in r for r in shown):
        todo = (
            "symlinks are followed only inside the source: give the folder they lead to as the source, "
            "or copy the files in"
        )
    else:
        todo = "fix or replace these files"
    return f"{n} skipped ({'; '.join(shown)}{more}); {todo}"


def check_run(
    source: LocalSource | ObjectSource | None,
    kb: str | Path,
    options: IngestOptions,
    *,
    where: str = "",
    engine_here: bool = False,
) -> KbLayout:
    """Everything a run needs that can be checked before any work: the KB folder, the ``source`` (None:
    the run reads none), the preset, the passwords file, the fallback engines and the engine's options.

    ``where`` is added to an error about a local path (e.g. what relative paths resolve against);
    ``engine_here``: the caller readies the engine next (``ready_engine``), which checks its options."""
    try:
        layout = check_kb_folder(kb)
        if isinstance(source, LocalSource):
            check_source(source)
    except ConfigError as e:
        raise ConfigError(f"{e}{where}") from None
    if isinstance(source, ObjectSource):  # its own messages name the credentials
        source.check()
    check_preset(options.preset)
    check_passwords_file(options.pdf.passwords_file)
    check_fallbacks(options)
    if not engine_here:
        check_engine_options(options)
    return layout


def check_kb_folder(kb: str | Path) -> KbLayout:
    """``kb`` is a folder this process can write, or one it can create (nothing is created here)."""
    path = Path(kb)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"kb {kb} is a file, not a folder: give a folder for the knowledge base")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"kb {kb}: {existing} is a file, so the folder cannot be created there")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "the knowledge-base folder" if existing == path else f"{existing}, where it would be created,"
        raise ConfigError(f"kb {kb}: {what} is not writable by this user: choose another folder")
    layout = KbLayout(path)
    if layout.duckdb_path.exists() and not layout.duckdb_path.is_file():
        raise ConfigError(f"kb {kb}: {layout.duckdb_path} is not a file: remove it or choose another folder")
    return layout


def check_kb_exists(kb: str | Path) -> KbLayout:
    """``kb`` holds a knowledge base (its ``kb.duckdb``); commands that only read it need one."""
    layout = KbLayout(Path(kb))
    if not layout.duckdb_path.is_file():
        where = f"{kb} is a file" if Path(kb).is_file() else f"no knowledge base at {layout.duckdb_path}"
        raise ConfigError(f"{where}: give the folder of a knowledge base, or make one with "
                          f"`chandra-ingest run SOURCE --kb {kb}`")  # fmt: skip
    return layout


def check_preset(name: str) -> None:
    """``name`` is a registered preset (built in, or from ``$CHANDRA_OCR_PRESET_MODULES``), whatever the
    engine: a misspelt preset fails here, not only where a model is loaded."""
    from chandra_ocr.ocr.presets import get_preset

    get_preset(name)


def check_passwords_file(path: str | None) -> None:
    """The passwords file, when given, can be read and is a JSON object (its contents never shown)."""
    if path is not None:
        load_passwords(path)


def check_fallbacks(options: IngestOptions) -> None:
    """Each fallback engine can be built from its ``fallback_options``, and one that has options is
    started too (e.g. Tesseract's languages found): a bad setting fails here, not at the first page
    that needs the fallback. A default fallback that is missing (no Tesseract) is only skipped."""
    from chandra_ocr.ocr.registry import build_engine

    for kind in options.fallbacks:
        try:
            engine = build_engine(kind, options.preset, options.fallback_options.get(kind))
            if kind in options.fallback_options:
                engine.start()
                engine.close()
        except ConfigError as e:
            raise ConfigError(f"fallback_options[{kind!r}]: {e}") from None


def ready_engine(options: IngestOptions) -> OcrEngine:
    """The run's engine, its options validated for its kind and checked as far as they can be without
    loading a model (``ocr.registry.ready_engine``)."""
    from chandra_ocr.ocr.registry import ready_engine as ready

    return ready(options.engine, options.preset, options.engine_options)


def check_engine_options(options: IngestOptions) -> None:
    """``engine_options`` validated for the run's engine kind (nothing started); with ``auto`` the kind is
    only known where the OCR task runs (GPU or not), so they are checked there."""
    from chandra_ocr.ocr.registry import build_engine

    if options.engine != "auto":
        try:
            build_engine(options.engine, options.preset, options.engine_options)
        except ConfigError as e:
            raise ConfigError(f"engine_options of the {options.engine} engine: {e}") from None
