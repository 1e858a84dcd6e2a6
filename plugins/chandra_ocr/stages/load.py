"""Load stage: the staged rows of some batches into the KB in one write session, with the run's record;
then the documents they replace at the same source location forgotten, remote objects' local copies
deleted and, after the run's last load, the Parquet files merged where a size tier has filled up."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chandra_ocr.manifest import (
    Batch,
    DocRef,
    elsewhere_counts,
    incomplete,
    incomplete_line,
    own_docs,
    pages_read,
    run_metrics,
    status_counts,
)
from chandra_ocr.model_use import model_use_summary
from chandra_ocr.progress import Progress
from chandra_ocr.stages.context import RunContext
from chandra_ocr.store import claims
from chandra_ocr.store.compact import compact_if_due
from chandra_ocr.store.duckdb_store import RunRecord, forget_documents, load_documents

log = logging.getLogger(__name__)


class Load:
    """``Load(ctx)(batches, run=...)`` → the counts loaded (documents, pages, chunks, ...).

    Each batch's ``seconds["load"]`` gets its share of the load's time, by pages. With ``run``
    (the run's batches: all of them, these included), the run's record is stored in the same
    session once the rows are in, so that it times this load too (``metrics`` added to its metrics),
    the run's claims are released, and compaction follows in a session of its own: the load is
    published, and visible, first. Documents another run claimed first are not this run's to load;
    those another run loaded while this one worked on them are left to it (state ``elsewhere``)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(
        self, batches: list[Batch], run: list[Batch] | None = None, metrics: dict[str, Any] | None = None
    ) -> dict[str, int]:
        ctx = self.ctx
        pages = sum(b.pages for b in batches)
        mine = own_docs(batches)
        progress = Progress(f"load {len(batches)} batch(es)", pages, log, total_docs=len(mine))

        def share(seconds: float) -> None:
            for b in batches:
                b.seconds["load"] = seconds * b.pages / max(pages, 1)

        def leave(elsewhere: Mapping[str, str]) -> None:
            for doc in mine:
                if doc.doc_id in elsewhere:
                    doc.state, doc.owner = "elsewhere", elsewhere[doc.doc_id]

        def record(elsewhere: Mapping[str, str]) -> RunRecord:
            leave(elsewhere)
            share(progress.elapsed())
            made = run_record(ctx, run or batches)
            made.metrics.update(metrics or {})
            return made

        recorded = run is not None and any(b.docs for b in run)  # also when other runs took every document
        ids = [d.doc_id for d in mine]
        loaded = load_documents(ctx.layout, ctx.run_id, ids, record if recorded else None)
        leave(loaded.elsewhere)
        done = [d for d in mine if d.state != "elsewhere"]
        after_load(ctx, done)
        by_status = ", ".join(f"{n} {status}" for status, n in sorted(status_counts(batches).items()))
        log.info("loaded %d document(s): %s", len(done), by_status or "none")
        for doc in incomplete(batches):
            log.warning("%s", incomplete_line(doc))
        progress.add(pages=pages, docs=len(mine))
        share(progress.done())
        if run is not None:  # the run's last load: its claims and staging folder go (store/claims.py)
            claims.end_run(ctx.layout, ctx.run_id)
            if any(b.docs for b in run):
                compact_if_due(ctx.layout)
        return loaded.counts


def after_load(ctx: RunContext, docs: list[DocRef]) -> None:
    """Once documents are loaded: forget the older documents they replaced at the same source location
    (their chunks get tombstones), and delete the work-area copies of remote objects."""
    replaced = sorted({d.replaces for d in docs if d.replaces} - {d.doc_id for d in docs})
    if replaced:
        log.info("%d document(s) replaced at their source location: forgetting the old ones", len(replaced))
        forget_documents(ctx.layout, replaced)
    for doc in docs:
        if doc.local:
            Path(doc.local).unlink(missing_ok=True)


def run_record(ctx: RunContext, batches: list[Batch]) -> RunRecord:
    """The ``runs`` row of a run made of ``batches``, timed from ``ctx.started`` to now."""
    finished = datetime.now(UTC)
    seconds = max((finished - ctx.started).total_seconds(), 1e-6)
    pages = pages_read(batches)
    metrics: dict[str, Any] = run_metrics(batches)
    engines, models = {b.engine for b in batches if b.engine}, {b.model for b in batches if b.engine}
    metrics |= {
        "seconds": seconds,
        "pages_per_s": pages / seconds,
        "output_tokens_per_s": metrics["output_tokens"] / seconds,
        "engine": engines.pop() if len(engines) == 1 else None,
        "model": models.pop() if len(models) == 1 else None,
    }
    elsewhere = elsewhere_counts(batches)
    if elsewhere:  # documents of the run that other runs ingested instead, by run
        metrics["elsewhere"] = elsewhere
    uses = [b.engine_metrics["model_use"] for b in batches if "model_use" in b.engine_metrics]
    if uses:
        metrics["model_use"] = model_use_summary(uses, ctx.started.timestamp())
    return RunRecord(ctx.run_id, ctx.started, finished, len(own_docs(batches)), pages, metrics)
