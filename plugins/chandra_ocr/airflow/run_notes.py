"""The DAG run's note: what a run's tasks found worth saying, where Airflow's UI shows a run (its details
in the grid, the runs list), without opening a log — e.g. "1 quarantined of 4 documents: see …".

A task adds a line with ``add_note`` (an XCom under ``NOTE_KEY``). When the run ends, successful or
failed, the scheduler calls this module's listener (the plugin ``chandra_ocr_run_notes``), which
writes the run's lines, in the order they were added, as its note: tasks cannot write it themselves
(Airflow 3's task API has no call for it, and tasks have no access to the metadata DB). A note that a
person wrote stays first, with the lines under it.

Airflow imports every plugin in every task process, so this module imports nothing heavy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)

NOTE_KEY = "chandra_ocr_note"
NOTE_MAX_CHARS = 1000  # Airflow's dag_run_note.content


def add_note(context: Mapping[str, Any], line: str) -> None:
    """Add ``line`` to the note of the task's DAG run (written when the run ends); logged as well."""
    log.info("run note: %s", line)
    if "ti" in context:  # absent where an operator is called outside a DAG run (tests/ingest_paths.py)
        context["ti"].xcom_push(key=NOTE_KEY, value=line)


def incomplete_note(counts: Mapping[str, int], kb: str) -> str | None:
    """The ingest run's line when documents ended quarantined or partial (``counts``: by status)."""
    parts = [f"{counts[s]} {s}" for s in ("quarantined", "partial") if counts.get(s)]
    if not parts:
        return None
    return (
        f"{', '.join(parts)} of {sum(counts.values())} documents: see the run report "
        f"({kb}/report/report.html), or Knowledge base → Review"
    )


def run_note(session: Any, dag_run: Any) -> str | None:
    """The note of ``dag_run`` with its tasks' lines (None: no line)."""
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    rows = session.scalars(
        select(XComModel)
        .where(XComModel.dag_run_id == dag_run.id, XComModel.key == NOTE_KEY)
        .order_by(XComModel.timestamp, XComModel.task_id, XComModel.map_index)
    ).all()
    lines = list(dict.fromkeys(str(XComModel.deserialize_value(r)) for r in rows))
    if not lines:
        return None
    ours = "\n\n".join(lines)
    mine = dag_run.dag_run_note
    if mine is not None and mine.user_id and mine.content:  # a person's note stays, ours goes under it
        if ours in mine.content:
            return None
        ours = f"{mine.content}\n\n{ours}"
    return ours if len(ours) <= NOTE_MAX_CHARS else ours[: NOTE_MAX_CHARS - 1] + "…"


def _write_note(dag_run: Any) -> None:
    """Saved with the run's new state, in the caller's transaction (the scheduler's); in a session of
    its own where the run is not in one (``dag.test()``)."""
    from sqlalchemy.orm import object_session

    try:
        session = object_session(dag_run)
        if session is not None:
            _set_note(session, dag_run)
            return
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session

        with create_session() as own:
            _set_note(own, own.get(DagRun, dag_run.id))
    except Exception:  # the scheduler goes on whatever happens here
        log.exception("could not write the note of DAG run %s", getattr(dag_run, "run_id", "?"))


def _set_note(session: Any, dag_run: Any) -> None:
    note = run_note(session, dag_run)
    if note is not None and note != dag_run.note:
        dag_run.note = note


class _NoteWriter:
    """The listener: the scheduler calls it as a DAG run ends (and the API server when a user marks one)."""

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        _write_note(dag_run)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        _write_note(dag_run)


class RunNotesPlugin(AirflowPlugin):
    """Registered through the ``airflow.plugins`` entry point of this distribution."""

    name = "chandra_ocr_run_notes"
    listeners = [_NoteWriter()]
