"""Operators, one per pipeline stage: each stores its arguments and calls its stage object (``stages/``)
in ``execute``, with the same worker pool, limits and quarantine rules as the CLI.

Between tasks travel only small manifests (``RunConfig`` and ``Batch`` dicts), never text.
Templated parameters are marked *(templated)*; an XCom reference (``task.output``) fits there too.

Every task process parses the DAG file before it runs (within ``core.dagbag_import_timeout``), so the
stages (PyMuPDF, Arrow, DuckDB, LangChain) are imported by the ``execute`` that runs them, not here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator, Context, Variable, conf
from airflow.sdk.log import mask_secret

from chandra_ocr.airflow import backfill
from chandra_ocr.airflow.run_notes import add_note, incomplete_note
from chandra_ocr.airflow.settings import PASSWORDS_VARIABLE, VARIABLE, DagSettings, RunConfig
from chandra_ocr.airflow.sources import run_source
from chandra_ocr.airflow.task_processes import allow_worker_processes
from chandra_ocr.airflow.templated import Templated, rendered
from chandra_ocr.manifest import Batch, elsewhere_counts, file_names, incomplete, status_counts

if TYPE_CHECKING:
    from chandra_ocr.airflow.hooks import VllmHook
    from chandra_ocr.ocr.base import OcrEngine
    from chandra_ocr.pdf.passwords import PasswordBook

log = logging.getLogger(__name__)

EVENT_INCOMPLETE_SHOWN = 50  # quarantined or partial documents named in the KB asset event (counts: all)


class ConfiguredOperator(BaseOperator):
    """An operator that works from the run's ``config`` (the preflight task's output)."""

    template_fields: Sequence[str] = ("config",)

    def __init__(self, *, config: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config

    @property
    def run_config(self) -> RunConfig:
        return RunConfig.from_dict(self.config)

    def pre_execute(self, context: Any) -> None:
        """Every task's log names the knowledge base and the settings it works with."""
        log.info("settings: %s", self.run_config.describe())


class DiscoverOperator(ConfiguredOperator):
    """Finds new PDFs in the run's source and plans them into batches → list of ``Batch`` dicts.

    At most ``max_batches`` batches (default: Airflow's ``core.max_map_length``) are returned;
    the documents left over are found again by the next run (which the backfill DAG triggers
    itself, chandra_ocr/airflow/backfill.py). The run's share of the planned batches goes to the
    XCom key ``backfill`` and the log ("N of M batches done" once loaded).

    :param config: the run's ``RunConfig`` dict (templated)
    :param max_batches: cap on the mapped batches of one run
    """

    def __init__(self, *, max_batches: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_batches = max_batches

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from chandra_ocr.sources.discover import recent_note
        from chandra_ocr.stages import Discover

        allow_worker_processes()
        cfg = self.run_config
        options = cfg.ingest_options()
        planned = Discover(cfg.context(context["run_id"]))(run_source(cfg), **cfg.filters())
        discovery, batches = planned.discovery, planned.batches
        limit = self.max_batches or conf.getint("core", "max_map_length")
        planned_batches = len(batches)
        batches = batches[:limit]
        share = backfill.progress(
            context.get("params") or {}, planned_batches, len(batches), sum(len(b.docs) for b in batches),
            discovery.untaken,
        )  # fmt: skip
        if discovery.untaken:
            log.info("max_documents (%s) reached: %d more matching file(s) not taken by this run",
                     cfg.max_documents, discovery.untaken)  # fmt: skip
        if share.left:
            log.warning("%d batches planned; mapping the first %d (core.max_map_length), the rest next run",
                        planned_batches, limit)  # fmt: skip
        if batches:
            log.info(
                "batches %d to %d of %d mapped in this run (%d done before it, %d left after it)",
                share.done_before + 1, share.done, share.total, share.done_before, share.left,
            )  # fmt: skip
        else:
            log.info("nothing new to ingest: no batch mapped, the batch tasks and load are skipped")
        if "ti" in context:
            context["ti"].xcom_push(key=backfill.XCOM_KEY, value=share.to_dict())
        for path, reason in discovery.refused:
            log.warning("refused %s: %s", path, reason)
        if discovery.gone:
            log.warning("%d source entries seen before are gone (their documents stay in the KB): %s",
                        len(discovery.gone), ", ".join(discovery.gone[:5]))  # fmt: skip
        how = f"settle_seconds 0 (Variable {VARIABLE!r} or $CHANDRA_OCR_SETTLE_SECONDS)"
        note = recent_note(discovery.recent, options.pdf.settle_seconds, how)
        if note:
            log.warning(note)
        return [b.to_dict() for b in batches]


class _BatchOperator(ConfiguredOperator):
    """A stage that takes one batch manifest and returns it updated; each mapped instance is labelled in
    the UI with its batch (``label``) instead of a bare map index."""

    template_fields: Sequence[str] = ("config", "batch")

    def __init__(self, *, batch: Templated[dict[str, Any]], **kwargs: Any) -> None:
        kwargs.setdefault("map_index_template", "{{ task.label }}")
        super().__init__(**kwargs)
        self.batch = batch

    @property
    def manifest(self) -> Batch:
        """The batch, once Airflow rendered it (in ``execute``)."""
        return Batch.from_dict(rendered(self.batch))

    @property
    def label(self) -> str:
        """``<batch id>: N doc(s), M pages: first file names`` (the mapped instance's name in the UI)."""
        batch = self.manifest
        return f"{batch.batch_id}: {len(batch.docs)} doc(s), {batch.pages} pages: {file_names(batch.docs, 3)}"


class CompressOperator(_BatchOperator):
    """Pre-compresses each document of one batch into its work folder → the ``Batch`` dict.

    :param config: the run's ``RunConfig`` dict (templated)
    :param batch: one ``Batch`` dict (templated)
    """

    def execute(self, context: Context) -> dict[str, Any]:
        from chandra_ocr.stages import Compress

        allow_worker_processes()
        ctx = self.run_config.context(context["run_id"])
        return Compress(ctx)(self.manifest).to_dict()


class ChandraOcrOperator(_BatchOperator):
    """Reads every page of one batch with the OCR engine (the extract stage) → the ``Batch`` dict.

    Pages are checkpointed as they are read, so a retry resumes where the last try stopped.
    Documents with no page to OCR are written here already (the assemble task passes them by).

    :param config: the run's ``RunConfig`` dict (templated)
    :param batch: one ``Batch`` dict (templated)
    :param engine: ``auto`` | ``text`` | ``cpu`` | ``vllm`` | ``openai``; default: the run's (templated)
    :param preset: model preset of the vllm/openai engines; default: the run's (templated)
    :param vllm_conn_id: ``vllm`` connection of the openai engine; default: the run's (templated)
    :param settings: the DAG settings that give its pool, queue, retries and time limit (keyword
        arguments override them) and the warm model's idle time: the ``vllm`` engine reads through the
        GPU's warm model (one vLLM server per GPU, loaded by the first task that needs it and shared by
        every task after it, ocr/warm_server.py), which frees the GPU after ``model_idle_timeout_s``
        seconds without a task (0: at once); default: the environment's (``DagSettings.from_env``)
    """

    template_fields: Sequence[str] = ("config", "batch", "engine", "preset", "vllm_conn_id")
    ui_color = "#76b900"

    def __init__(
        self,
        *,
        engine: str | None = None,
        preset: str | None = None,
        vllm_conn_id: str | None = None,
        settings: DagSettings | None = None,
        **kwargs: Any,
    ) -> None:
        settings = settings or DagSettings.from_env(os.environ)
        super().__init__(**settings.gpu_task_args() | kwargs)
        self.engine = engine
        self.preset = preset
        self.vllm_conn_id = vllm_conn_id
        self.idle_timeout_s = settings.model_idle_timeout_s

    @cached_property
    def hook(self) -> VllmHook:
        from chandra_ocr.airflow.hooks import VllmHook

        return VllmHook(self.vllm_conn_id or self.run_config.vllm_conn_id)

    @cached_property
    def ocr_engine(self) -> OcrEngine:
        """The engine, built on first use (the vllm kind loads the model only in ``start``)."""
        from chandra_ocr.stages import build_run_engine

        options = self.run_config.ingest_options()
        return build_run_engine(
            options, kind=self.engine, preset=self.preset, connection=self.hook.connection_options,
            warm_idle_timeout_s=self.idle_timeout_s,
        )  # fmt: skip

    def execute(self, context: Context) -> dict[str, Any]:
        from chandra_ocr.stages import Extract

        batch = self.manifest
        ctx = self.run_config.context(context["run_id"], engine=self.ocr_engine, passwords=_pdf_passwords())
        allow_worker_processes()
        self.ocr_engine.start()
        try:
            Extract(ctx)(batch)
            log.info(
                "batch %s: %s; engine metrics %s", batch.batch_id, batch.counts, self.ocr_engine.metrics()
            )
        finally:
            self.ocr_engine.close()
        return batch.to_dict()

    def on_kill(self) -> None:
        if "ocr_engine" in self.__dict__:
            self.ocr_engine.close()


def _pdf_passwords() -> PasswordBook | None:
    """The passwords of encrypted PDFs in the JSON Variable ``chandra_ocr_pdf_passwords`` (each value
    masked in task logs); None when it is not set (then ``pdf.passwords_file`` of the options, if any)."""
    from chandra_ocr.pdf.passwords import parse_passwords

    raw = Variable.get(PASSWORDS_VARIABLE, default=None)
    if raw is None:
        return None
    book = parse_passwords(raw, f"Variable {PASSWORDS_VARIABLE!r}")
    for password in book.entries.values():
        mask_secret(password)
    return book


class AssembleOperator(_BatchOperator):
    """Builds, chunks and stages the rows of one batch's documents → the ``Batch`` dict.

    :param config: the run's ``RunConfig`` dict (templated)
    :param batch: one ``Batch`` dict, after the OCR stage (templated)
    """

    def execute(self, context: Context) -> dict[str, Any]:
        from chandra_ocr.stages import Assemble

        allow_worker_processes()
        ctx = self.run_config.context(context["run_id"])
        return Assemble(ctx)(self.manifest).to_dict()


class LoadOperator(ConfiguredOperator):
    """Loads all batches' staged rows into the KB in one write session and records the run → a summary dict;
    then merges the Parquet files when a size tier has filled up (stages/load.py, store/compact.py).

    The summary (``kb``, ``run_id``, ``documents`` by status, ``pages``, ``chunks``, and ``elsewhere``:
    documents left to other runs, by run) also becomes the ``extra`` of the event of ``kb_asset``,
    which is added to the task's outlets.

    :param config: the run's ``RunConfig`` dict (templated)
    :param batches: the assembled ``Batch`` dicts (templated)
    :param kb_asset: the knowledge base's asset
    :param progress: discover's ``BackfillProgress`` dict (templated): "N of M batches done" goes to
        the log, the run's record (``backfill`` in its metrics, shown by the run report) and the event
    """

    template_fields: Sequence[str] = ("config", "batches", "progress")

    def __init__(
        self,
        *,
        batches: Templated[Sequence[dict[str, Any]]],
        kb_asset: Asset,
        progress: Templated[dict[str, int] | None] = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("pool", DagSettings.from_env(os.environ).loader_pool)
        kwargs["outlets"] = [*kwargs.get("outlets", []), kb_asset]
        super().__init__(**kwargs)
        self.batches = batches
        self.kb_asset = kb_asset
        self.progress = progress

    def execute(self, context: Context) -> dict[str, Any]:
        from chandra_ocr.stages import Load

        cfg = self.run_config
        # Airflow 3.3 resolves the output of a mapped task group with one instance to that instance's
        # value rather than a one-element list (xcom_pull's single-value rule).
        value = rendered(self.batches)
        values = [value] if isinstance(value, dict) else list(value)
        batches = [Batch.from_dict(b) for b in values]
        progress = rendered(self.progress)
        share = backfill.BackfillProgress(**progress).line() if progress else None
        extra = {"backfill": share} if share is not None else None
        loaded = Load(cfg.context(context["run_id"]))(batches, run=batches, metrics=extra)
        summary: dict[str, Any] = {
            "kb": cfg.kb,
            "run_id": context["run_id"],
            "documents": status_counts(batches),
            "pages": loaded["pages"],
            "chunks": loaded["chunks"],
            "incomplete": [
                {"file": d.source, "status": d.status, "reason": d.error} for d in incomplete(batches)
            ][:EVENT_INCOMPLETE_SHOWN],
        }
        for run_id, n in sorted(elsewhere_counts(batches).items()):
            log.info("%d document(s) left to run %s, which claimed or loaded them first", n, run_id)
            summary.setdefault("elsewhere", {})[run_id] = n
        if share is not None:
            log.info("loaded: %s", share)
            summary["backfill"] = share
        context["outlet_events"][self.kb_asset].extra = summary
        note = incomplete_note(summary["documents"], cfg.kb)
        if note:
            add_note(context, note)
        return summary
