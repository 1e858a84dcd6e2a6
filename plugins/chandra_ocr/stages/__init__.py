"""The pipeline's stages, each one object built on one ``RunContext``. Compress, Extract and
Assemble have one shape, ``stage(batch) → batch``; Discover makes the batches and Load takes them.

- ``Discover`` (stages/discover.py): new PDFs of a source → batches of about ``batch_pages`` pages.
- ``Compress`` (stages/compress.py): a smaller copy of each document to render from.
- ``Extract`` (stages/extract.py, stages/fallback.py): triage, then every OCR page through the
  engine and its fallback chain, checkpointed.
- ``Assemble`` (stages/assemble.py, stages/write.py): every document from its checkpoints → chunks,
  staged rows, Markdown/JSON exports.
- ``Load`` (stages/load.py): the staged rows into DuckDB in one transaction, with the run's record.

The CLI runner (``pipeline.run``) and the Airflow operators call these and nothing below them; no
stage imports another (what two stages share sits below them: ``store/checkpoints``, ``context``).

Importing this package imports no stage: PDF workers unpickle a stage's worker function (triage,
assembly) from its module, and a worker capped at a few hundred MB of address space must not load
DuckDB and Arrow because a sibling stage needs them. The names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chandra_ocr.stages.assemble import Assemble
    from chandra_ocr.stages.compress import Compress
    from chandra_ocr.stages.context import RunContext, build_run_engine
    from chandra_ocr.stages.discover import Discover, Planned
    from chandra_ocr.stages.extract import Extract
    from chandra_ocr.stages.load import Load

_HOMES = {
    "Assemble": "assemble",
    "Compress": "compress",
    "Discover": "discover",
    "Extract": "extract",
    "Load": "load",
    "Planned": "discover",
    "RunContext": "context",
    "build_run_engine": "context",
}
__all__ = ["Assemble", "Compress", "Discover", "Extract", "Load", "Planned", "RunContext", "build_run_engine"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
