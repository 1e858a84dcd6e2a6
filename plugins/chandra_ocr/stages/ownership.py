"""Which documents of a batch this run works on, when other runs work on the same knowledge base.

The compress and extract stages call ``claim_batch`` before their work: each document not yet left to
another run is claimed (store/claims.py); one that a live run holds, or that another run loaded under
this pipeline version since discovery, is left to that run (state ``elsewhere``, ``owner`` its run
id) and no later stage of this run touches it.
"""

from __future__ import annotations

import logging

from chandra_ocr import PIPELINE_VERSION
from chandra_ocr.manifest import Batch
from chandra_ocr.stages.context import RunContext
from chandra_ocr.store import claims

log = logging.getLogger(__name__)


def claim_batch(ctx: RunContext, batch: Batch) -> None:
    """Claim the batch's documents for this run; leave those another run has to it (see the module doc)."""
    # imported here: extract's workers import this module, and they must not load DuckDB (stages/__init__)
    from chandra_ocr.store.duckdb_store import document_runs

    docs = [d for d in batch.docs if d.state != "elsewhere"]
    if not docs:
        return
    held = claims.claim(ctx.layout, ctx.run_id, [d.doc_id for d in docs], ctx.series)
    # After the claims: a run loads before it releases its claims, so what it loaded shows here.
    loaded = {
        doc_id: run_id
        for doc_id, (run_id, version) in document_runs(ctx.layout, [d.doc_id for d in docs]).items()
        if run_id != ctx.run_id and version == PIPELINE_VERSION
    }
    for doc in docs:
        owner = loaded.get(doc.doc_id) or held.get(doc.doc_id)
        if owner is not None:
            doc.state, doc.owner = "elsewhere", owner
            how = "already ingested" if doc.doc_id in loaded else "being ingested"
            log.info("%s: %s by run %s, left to it", doc.source, how, owner)
