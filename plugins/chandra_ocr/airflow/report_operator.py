"""The ingest DAG's last task: the knowledge base's run report (``chandra_ocr.report``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from chandra_ocr.airflow.settings import RunConfig
from chandra_ocr.airflow.templated import Templated, rendered
from chandra_ocr.report import write_report

log = logging.getLogger(__name__)


class ReportOperator(BaseOperator):
    """Writes ``<kb>/report/report.html`` and ``report.png`` for the run's KB → their paths.

    :param config: the run's ``RunConfig`` dict (templated)
    """

    template_fields: Sequence[str] = ("config",)
    ui_color = "#fff3e0"

    def __init__(self, *, config: Templated[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config

    def execute(self, context: Context) -> dict[str, str]:
        files = write_report(RunConfig.from_dict(rendered(self.config)).kb)
        log.info("run report: %s (overview %s)", files.html, files.png)
        return {"html": str(files.html), "png": str(files.png)}
