"""Operators of the vector-feed DAG: export what changed in a knowledge base, apply it to the index."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context

from chandra_ocr.airflow.operators import ConfiguredOperator
from chandra_ocr.airflow.preflight import triggering_kbs
from chandra_ocr.airflow.run_notes import add_note
from chandra_ocr.airflow.settings import DagSettings, RunConfig
from chandra_ocr.airflow.templated import Templated, rendered
from chandra_ocr.extras import embed_missing

if TYPE_CHECKING:  # the vector modules import Arrow and DuckDB: in ``execute``, not while a DAG file parses
    from chandra_ocr.vector.target import VectorTarget

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
        kwargs.setdefault("pool", DagSettings.from_env(os.environ).loader_pool)
        super().__init__(**kwargs)
        self.feed = feed

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from chandra_ocr.vector.outbox import export_changes

        out = []
        for kb in triggering_kbs(context) or [self.run_config.kb]:
            layout = RunConfig.from_dict(self.config | {"kb": kb}).layout()
            result = export_changes(layout, self.feed)
            out.append({"kb": kb, "export_no": result.export_no, "path": str(result.path or ""),
                        "upserts": result.upserts, "deletes": result.deletes})  # fmt: skip
        return out


class VectorIndexOperator(ConfiguredOperator):
    """Applies the exported outbox files to each changed KB's vector store → list of count dicts.

    The store is the embedded index unless a target is configured: ``target`` (a dict, see
    ``chandra_ocr.vector.target``), else the Airflow connection ``target_conn_id`` or
    ``$CHANDRA_OCR_VECTOR_CONN_ID`` (its ``extra`` is the target JSON), else
    ``$CHANDRA_OCR_VECTOR_TARGET``. The embedded index is skipped (with the reason) where no
    embedding runtime is installed: the outbox files stay, and a later run catches the index up.

    :param config: the run's ``RunConfig`` dict (templated)
    :param exports: the export task's output: the knowledge bases that changed (templated)
    :param target: a vector target dict (templated)
    :param target_conn_id: an Airflow connection whose extra is a vector target (templated)
    """

    template_fields: Sequence[str] = ("config", "exports", "target", "target_conn_id")

    def __init__(
        self,
        *,
        exports: Templated[list[dict[str, Any]]],
        target: dict[str, Any] | None = None,
        target_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.exports = exports
        self.target = target
        self.target_conn_id = target_conn_id

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from chandra_ocr.vector.feed import VectorFeed

        feed = VectorFeed(self._target())
        out, done = [], []
        for kb in sorted({e["kb"] for e in rendered(self.exports)}):
            counts = feed(self._layout(kb))
            done.append(counts)
            log.info("%s: %s", kb, counts.summary())
            vectors = dataclasses.asdict(counts.vectors) if counts.vectors is not None else {}
            out.append({"kb": kb, **vectors, "lexical": dataclasses.asdict(counts.lexical)})  # counts only
        missing = embed_missing() if any(counts.vectors is None for counts in done) else None
        if missing:  # beside the green run in Airflow's UI
            add_note(context, f"vector index not built, search matches words only: {missing}")
        return out

    def _layout(self, kb: str):
        return RunConfig.from_dict(self.config | {"kb": kb}).layout()

    def _target(self) -> VectorTarget | None:
        from chandra_ocr.vector.target import CONN_ENV, VectorTarget

        if self.target:
            return VectorTarget.from_dict(self.target)
        conn_id = self.target_conn_id or os.environ.get(CONN_ENV)
        if conn_id:
            from airflow.sdk import Connection

            return VectorTarget.from_dict(Connection.get(conn_id).extra_dejson)
        return VectorTarget.from_env()
