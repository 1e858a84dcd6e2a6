"""The ``preflight`` task: the pools set up, the run's settings resolved once, and everything about them
checked before any work, by the same checks as the CLI's (chandra_ocr/preflight.py)."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context, Variable

from chandra_ocr.airflow.settings import (
    BASE_DIR_ENV,
    POOLS_VARIABLE,
    VARIABLE,
    RunConfig,
    base_dir,
    check_run_conf,
    resolve_run_config,
)
from chandra_ocr.airflow.sources import run_source
from chandra_ocr.errors import ConfigError
from chandra_ocr.preflight import check_run
from chandra_ocr.run_settings import json_object

log = logging.getLogger(__name__)


class PreflightOperator(BaseOperator):
    """Checks that the setup command created ``pools`` and that the run's conf names only Params of its
    DAG, resolves the run's settings (logging where each came from) and checks them (``check_run_paths``:
    the source, when ``needs_source``; the KB folder; the preset, passwords, engines) → ``RunConfig`` dict.

    Tasks cannot read pools in Airflow 3 (no database access, and the Task SDK's API has no pool
    endpoint), so the setup command records the pools it created in the Variable
    ``chandra_ocr_pools``, which this task reads; without it a task in a missing pool would wait
    in ``scheduled`` forever.

    :param pools: the pools the DAG's tasks run in
    :param needs_source: whether the run reads the source (the ingest DAGs; not the feed)
    """

    ui_color = "#e8f4fd"

    def __init__(self, *, pools: Sequence[str], needs_source: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.pools = list(pools)
        self.needs_source = needs_source

    def execute(self, context: Context) -> dict[str, Any]:
        pools_text = Variable.get(POOLS_VARIABLE, default=None)
        ready = json_object(pools_text, f"Variable {POOLS_VARIABLE!r}") if pools_text else {}
        missing = [p for p in self.pools if p not in ready]
        if missing:
            raise ConfigError(
                f"Airflow pool(s) {missing} are not set up: run `python -m chandra_ocr.airflow.setup` "
                f"(or scripts/airflow-setup.sh), which creates them and records them in Variable "
                f"{POOLS_VARIABLE!r}"
            )
        if context.get("dag_run") is not None and self.has_dag():
            check_run_conf(context["dag_run"].conf or {}, self.dag.params, self.dag.dag_id)
        # the text, parsed here: deserialize_json=True turns text that is not JSON into "not set"
        variable = Variable.get(VARIABLE, default=None)
        config = resolve_run_config(context["params"], variable, os.environ)
        kbs = triggering_kbs(context)
        if len(kbs) == 1:  # the feed: the knowledge base whose update started this run
            origins = config.origins | {"kb": "the triggering asset event"}
            config = dataclasses.replace(config, kb=kbs[0], origins=origins)
        log.info("run settings (value, where it came from):\n%s", config.provenance())
        if kbs:
            log.info("knowledge base(s) of the triggering asset event(s): %s", ", ".join(kbs))
        check_run_paths(config, os.environ, source=self.needs_source)
        return config.to_dict()


def check_run_paths(config: RunConfig, environ: Mapping[str, str], *, source: bool = True) -> None:
    """The run's checks (``chandra_ocr.preflight.check_run``) on its resolved settings: the source (when
    ``source``) holds PDFs, the KB folder can be written, …; raises ConfigError.

    A message about a path names the resolved path and the folder that relative settings resolve against.
    """
    where = (
        f"; set the run's Param, the Variable {VARIABLE!r} or $CHANDRA_OCR_SOURCE / $CHANDRA_OCR_KB "
        f"(relative paths resolve against {base_dir(environ)}: ${BASE_DIR_ENV}, else $AIRFLOW_HOME)"
    )
    check_run(run_source(config) if source else None, config.kb, config.ingest_options(), where=where)


def triggering_kbs(context: Context) -> list[str]:
    """The knowledge bases named by the asset events that triggered the run (``extra["kb"]``), sorted."""
    events = context.get("triggering_asset_events") or {}
    return sorted({e.extra["kb"] for evs in events.values() for e in evs if e.extra.get("kb")})
