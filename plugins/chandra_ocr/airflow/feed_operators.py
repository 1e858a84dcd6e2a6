"""Operators of the vector-feed DAG: export what changed in a knowledge base, apply it to the index."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from chandra_ocr.airflow.operators import ConfiguredOperator
from chandra_ocr.airflow.settings import RunConfig
from chandra_ocr.airflow.templated import Templated, rendered
from chandra_ocr.vector.outbox import export_changes

log = logging.getLogger(__name__)


class FeedExportOperator(ConfiguredOperator):
    """Exports the chunks changed since the last export to the KB's outbox → list of export dicts.

    The knowledge bases are those named by the triggering asset events (``extra["kb"]``), else the
    run's. An empty export writes no file.

    :param config: the run's ``RunConfig`` dict (templated)
    :param feed: the feed's name: its watermark and outbox file prefix (templated)
    """

    template_fields: Sequence[str] = ("config", "feed")

    def __init__(self, *, feed: str = "vector", **kwargs: Any) -> None:
        kwargs.setdefault("pool", "chandra_ocr_loader")
        super().__init__(**kwargs)
        self.feed = feed

    def execute(self, context: Context) -> list[dict[str, Any]]:
        events = context.get("triggering_asset_events") or {}
        kbs = sorted({e.extra["kb"] for evs in events.values() for e in evs if e.extra.get("kb")})
        out = []
        for kb in kbs or [self.run_config.kb]:
            layout = RunConfig.from_dict(self.config | {"kb": kb}).layout()
            result = export_changes(layout, self.feed)
            out.append({"kb": kb, "export_no": result.export_no, "path": str(result.path or ""),
                        "upserts": result.upserts, "deletes": result.deletes})  # fmt: skip
        return out


class VectorIndexOperator(ConfiguredOperator):
    """Applies the exported outbox files to each changed KB's embedded vector index → list of count dicts.

    Skipped (with the reason) where the ``embed`` extra is not installed: the outbox files stay
    for another store's loader, and a later run catches the index up.

    :param config: the run's ``RunConfig`` dict (templated)
    :param exports: the export task's output: the knowledge bases that changed (templated)
    """

    template_fields: Sequence[str] = ("config", "exports")

    def __init__(self, *, exports: Templated[list[dict[str, Any]]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.exports = exports

    def execute(self, context: Context) -> list[dict[str, Any]]:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise AirflowSkipException(
                "vector index skipped: install the 'embed' extra (sentence-transformers)"
            )
        from chandra_ocr.vector.consumer import apply_outbox
        from chandra_ocr.vector.embedder import Embedder

        embedder = Embedder().start()
        out = []
        for kb in sorted({e["kb"] for e in rendered(self.exports)}):
            counts = apply_outbox(RunConfig.from_dict(self.config | {"kb": kb}).layout(), embedder=embedder)
            log.info("vector index of %s: %s", kb, counts)
            out.append({"kb": kb} | dataclasses.asdict(counts))
        return out
