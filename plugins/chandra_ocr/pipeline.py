"""The stages in order, and the runner that takes a source through them in this process (the CLI).

discover → compress → extract → assemble → load, each one object in ``stages/`` built on the run's
``RunContext``; the middle ones take a batch and return it (``overlapped`` runs them). The Airflow DAGs call
the very same stage objects, one task per stage, with ``Batch`` manifests in between.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.manifest import Batch, elsewhere_counts, pages_read, status_counts
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.sources.discover import Discovery
from chandra_ocr.sources.local import LocalSource
from chandra_ocr.sources.object_store import ObjectSource
from chandra_ocr.stages import Assemble, Compress, Discover, Extract, Load, RunContext, build_run_engine
from chandra_ocr.stages.assemble import Assembling
from chandra_ocr.stages.context import watching
from chandra_ocr.stages.extract import Triaging
from chandra_ocr.store import claims
from chandra_ocr.store.staging import arrow_schemas

log = logging.getLogger(__name__)

# The CLI loads into DuckDB once this many pages are written (and at the end): a load has a fixed
# cost (~0.1 s: open, schema, commit, checkpoint) and holds the file's lock. A crash before a load
# costs little: a rerun finds the extract checkpoints (OCR, the costly part) and redoes only the
# compression and assembly of those documents.
LOAD_PAGES = 1000


@dataclass
class RunSummary:
    """What one end-to-end run did."""

    run_id: str
    discovery: Discovery
    batches: list[Batch]
    loaded: dict[str, int]
    seconds: float
    pages: int

    @property
    def statuses(self) -> dict[str, int]:
        return status_counts(self.batches)

    @property
    def elsewhere(self) -> dict[str, int]:
        """Run id → documents found new here that that run claimed or loaded first."""
        return elsewhere_counts(self.batches)


def load_groups(batches: list[Batch]) -> list[list[Batch]]:
    """Consecutive batches loaded together: each group ends once it holds ``LOAD_PAGES`` pages."""
    groups: list[list[Batch]] = [[]]
    for batch in batches:
        if sum(b.pages for b in groups[-1]) >= LOAD_PAGES:
            groups.append([])
        groups[-1].append(batch)
    return groups if batches else []


def overlapped(ctx: RunContext, batches: list[Batch]) -> None:
    """Take ``batches`` through compress, extract and assemble in the pool ``ctx`` holds, the next
    batch's triage submitted before the last one is collected and each batch's assembly collected
    only after the next one's is submitted: the workers keep busy while this process joins a
    document's parts, writes its record and waits for the last task of a batch (a batch is often one
    large document, assembled by one worker). An engine that renders pages streams them through the
    same pool, behind any triage queued there: its batches go one after the other."""
    compress, extract, assemble = Compress(ctx), Extract(ctx), Assemble(ctx)
    if ctx.ocr.reads_images:
        for batch in batches:
            assemble(extract(compress(batch)))
        return
    extracting: deque[Triaging] = deque()
    assembling: deque[Assembling] = deque()
    for batch in batches:
        extracting.append(extract.start(compress(batch)))
        if len(extracting) == 2:
            assembling.append(assemble.start(extract.finish(extracting.popleft())))
        if len(assembling) == 2:
            assemble.finish(assembling.popleft())
    while extracting:
        assembling.append(assemble.start(extract.finish(extracting.popleft())))
    while assembling:
        assemble.finish(assembling.popleft())


def run(
    source: str | Path | LocalSource | ObjectSource,
    kb_dir: str | Path,
    options: IngestOptions,
    engine: OcrEngine | None = None,
    **filters: Any,
) -> RunSummary:
    """Ingest new PDFs from ``source`` into the knowledge base at ``kb_dir``, end to end, in this process.

    The run is alive (store/claims.py) while this call lasts: documents it claims are left alone by
    other runs on the same KB, and it leaves alone those they claimed or loaded first."""
    owns_engine = engine is None
    ctx = RunContext.new(kb_dir, options, engine=engine or build_run_engine(options))
    t0 = time.monotonic()
    engine = ctx.ocr
    loaded: Counter[str] = Counter()
    batches: list[Batch] = []
    with watching(options), claims.process_run(ctx.layout, ctx.run_id):
        try:
            planned = Discover(ctx)(source, **filters)
            batches = planned.batches
            if batches:
                if not engine.threads:
                    arrow_schemas()  # inherited by forked workers, which stage rows without opening DuckDB
                engine.start()
            load = Load(ctx)
            groups = load_groups(batches)
            for group in groups:
                # One pool per load: DuckDB's threads never run while a worker may be forked from here.
                with ctx.pool() as workers:
                    overlapped(ctx, group)
                    workers.finish()  # stopped: no new worker is forked; it winds down during the load
                loaded.update(load(group, run=batches if group is groups[-1] else None))
        finally:
            if owns_engine:
                engine.close()
    seconds = time.monotonic() - t0
    return RunSummary(ctx.run_id, planned.discovery, batches, dict(loaded), seconds, pages_read(batches))
