"""The backfill DAG's last task: the next run of the backfill while batches are left (airflow/backfill.py).

A module of its own: Airflow's TriggerDagRunOperator takes seconds to import, which only the backfill
DAG's file pays when it is parsed.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunLink, TriggerDagRunOperator
from airflow.sdk import BaseOperator, Context

from chandra_ocr.airflow.backfill import XCOM_KEY, BackfillProgress, next_conf, stop_reason

log = logging.getLogger(__name__)


class _TriggeredRunLink(TriggerDagRunLink):
    """The "Triggered DAG" link, empty when the task triggered nothing: the base link's look-up of
    the triggered run's XCom would log "XCom not found" as an error after every finished backfill."""

    def get_link(self, operator: BaseOperator, *, ti_key: Any) -> str:
        if not getattr(operator, "triggered", False):
            return ""
        return super().get_link(operator, ti_key=ti_key)


class ContinueBackfillOperator(TriggerDagRunOperator):
    """The backfill DAG's last task: triggers its next run while batches are left (see the module);
    the run that ends the backfill logs why (all done, or ``max_documents`` reached and what is left).

    :param discover_task_id: the task that recorded the run's ``BackfillProgress``
    """

    operator_extra_links = [_TriggeredRunLink()]
    triggered = False  # set once this task instance has triggered the next run

    def __init__(self, *, discover_task_id: str, trigger_dag_id: str, **kwargs: Any) -> None:
        super().__init__(trigger_dag_id=trigger_dag_id, **kwargs)
        self.discover_task_id = discover_task_id

    def execute(self, context: Context) -> None:
        value = context["ti"].xcom_pull(task_ids=self.discover_task_id, key=XCOM_KEY)
        done = BackfillProgress(**value)
        conf = next_conf(dict(context["dag_run"].conf or {}), done)
        if conf is None:
            log.info("backfill complete: %s; stopped because %s", done.line(),
                     stop_reason(dict(context["dag_run"].conf or {}), done))  # fmt: skip
            return
        log.info("backfill: %s; triggering the next run for the %d left", done.line(), done.left)
        self.conf = conf
        self.triggered = True
        super().execute(context)
