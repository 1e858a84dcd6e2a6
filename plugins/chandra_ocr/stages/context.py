"""What every stage of one run shares: the knowledge base, the options, the run id, the OCR engine,
the passwords of encrypted PDFs and the PDF worker pool.

The CLI runner builds one context for the whole run and holds a worker pool across several
stages; an Airflow task builds one per task from its ``RunConfig`` and each stage then opens
its own pool, with the same limits, for the length of its call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.registry import build_engine
from chandra_ocr.pdf.passwords import PasswordBook
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.watchdog import WATCHDOG


@dataclass
class RunContext:
    """The shared state of one run (or of one Airflow task of a run)."""

    layout: KbLayout
    options: IngestOptions
    run_id: str
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    engine: OcrEngine | None = None  # the OCR engine: needed by the extract stage only
    passwords: PasswordBook | None = None  # else the book in ``options.pdf.passwords_file``, if set
    workers: PdfWorkers | None = None  # the pool a caller holds across stages (see ``pool``)
    series: str | None = None  # runs that never overlap (an Airflow DAG's): store/claims.py

    @classmethod
    def new(
        cls, kb_dir: str | Path, options: IngestOptions, run_id: str | None = None, **kwargs: Any
    ) -> RunContext:
        """A context for ``kb_dir``; the run id defaults to ``cli-<UTC time>-<random>``."""
        started = kwargs.pop("started", None) or datetime.now(UTC)
        run_id = run_id or f"cli-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        return cls(KbLayout(Path(kb_dir)), options, run_id, started, **kwargs)

    @property
    def ocr(self) -> OcrEngine:
        """The run's OCR engine; a ConfigError names the fix when none was given."""
        if self.engine is None:
            raise ConfigError(
                "this stage needs an OCR engine: build the context with engine=build_run_engine(...)"
            )
        return self.engine

    @contextmanager
    def pool(self) -> Iterator[PdfWorkers]:
        """The PDF workers for a stage: the pool already held, else a new one for the block, with the
        stall watchdog armed. The held pool is ``self.workers`` while the block runs."""
        if self.workers is not None:
            yield self.workers
            return
        with watching(self.options), worker_pool(self.options, self.engine) as workers:
            self.workers = workers
            try:
                yield workers
            finally:
                self.workers = None


def worker_pool(options: IngestOptions, engine: OcrEngine | None = None) -> PdfWorkers:
    """A PDF worker pool. Forked from this process (milliseconds to start) only for an engine whose
    ``threads`` is False; from the forkserver otherwise (pdf/workers.py says why)."""
    fork = engine is not None and not engine.threads
    return PdfWorkers(options.pdf.workers, options.pdf.memory_limit_mb, fork=fork)


def watching(options: IngestOptions) -> AbstractContextManager:
    """The stall watchdog armed with the run's limit (a warning after a sixth of it)."""
    return WATCHDOG.armed(options.stall_timeout_s / 6, options.stall_timeout_s)


def build_run_engine(
    options: IngestOptions,
    *,
    kind: str | None = None,
    preset: str | None = None,
    connection: Callable[[], Mapping[str, Any]] | None = None,
    warm_idle_timeout_s: float | None = None,
) -> OcrEngine:
    """The run's OCR engine from its options (``kind``/``preset`` override them); ``connection`` gives
    server settings (an Airflow connection) to an engine kind that talks to a server;
    ``warm_idle_timeout_s`` makes the vllm kind use the GPU's warm server (`build_engine`)."""
    return build_engine(
        kind or options.engine, preset or options.preset, options.engine_options, connection=connection,
        warm_idle_timeout_s=warm_idle_timeout_s,
    )  # fmt: skip
