"""The ingest DAG's last task: the knowledge base's run report (``chandra_ocr.report``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from chandra_ocr.airflow.settings import RunConfig
from chandra_ocr.airflow.templated import Templated, rendered

log = logging.getLogger(__name__)


class ReportOperator(BaseOperator):
    """Writes ``<kb>/report/report.html`` and ``report.png`` for the run's KB → their paths; then, with
    the run setting ``fail_on_incomplete``, fails (no retry) when the run left a document quarantined or
    partial.

    :param config: the run's ``RunConfig`` dict (templated)
    """

    template_fields: Sequence[str] = ("config",)
    ui_color = "#fff3e0"

    def __init__(self, *, config: Templated[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config

    def execute(self, context: Context) -> dict[str, str]:
        from chandra_ocr.report import write_report

        config = RunConfig.from_dict(rendered(self.config))
        files = write_report(config.kb)
        log.info("run report of kb %s: %s (overview %s)", config.kb, files.html, files.png)
        if config.ingest_options().fail_on_incomplete:
            _fail_on_incomplete(config, context["run_id"])
        return {"html": str(files.html), "png": str(files.png)}


def _fail_on_incomplete(config: RunConfig, run_id: str) -> None:
    """Raise (no retry) when the run left a document quarantined or partial: a red run to alert on."""
    from chandra_ocr.report import run_incomplete

    found = run_incomplete(config.layout(), run_id)
    if found:
        listed = "; ".join(f"{status} {name}: {reason}" for name, status, reason, _ in found[:5])
        more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
        raise AirflowFailException(
            f"{len(found)} document(s) quarantined or partial in this run (fail_on_incomplete is on; "
            f"the report lists them): {listed}{more}"
        )
