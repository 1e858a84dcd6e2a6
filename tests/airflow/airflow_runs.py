"""Run a DAG of ``dags/`` with ``dag.test()`` and read back what the metadata DB and the KB recorded."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb_query import kb_rows as query

DAGS = Path(__file__).resolve().parents[2] / "dags"


@dataclass(frozen=True)
class Inputs:
    """Test PDFs by role (``born_*``, ``scanned``, ``broken_*``) and a phrase printed on the scanned one."""

    pdfs: dict[str, Path]
    scanned_phrase: str

    def by_role(self, prefix: str) -> list[str]:
        return sorted(name for name in self.pdfs if name.startswith(prefix))


@dataclass
class DagRunResult:
    run_id: str
    state: str
    tasks: dict[tuple[str, int], str]  # (task_id, map_index) → state
    note: str | None = None  # the DAG run's note, as Airflow's UI shows it
    logs: list[logging.LogRecord] = field(default_factory=list)  # what the run's tasks logged

    def states(self, task_id: str) -> list[str]:
        return [s for (t, _), s in sorted(self.tasks.items()) if t == task_id]

    def messages(self, logger: str, level: int = logging.INFO) -> list[str]:
        """What the logger ``logger`` logged at ``level`` or above during the run."""
        return [r.getMessage() for r in self.logs if r.name == logger and r.levelno >= level]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def dagbag():
    """A fresh parse for every run: ``dag.test()`` keeps a run's Params on the DAG object it ran."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def run_dag(dag_id: str, **conf: Any) -> DagRunResult:
    """One ``dag.test()`` run with ``conf`` as the run's Params; the task states as recorded in the DB."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    records, root = _Records(), logging.getLogger()
    root.addHandler(records)
    try:
        run = dagbag().dags[dag_id].test(run_conf=conf)
    finally:
        root.removeHandler(records)
    with create_session() as session:
        tis = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id
        )
        tasks = {(ti.task_id, ti.map_index): str(ti.state) for ti in tis}
        note = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run.run_id).one().note
    return DagRunResult(run.run_id, str(run.state), tasks, note, records.records)


def asset_events(name: str = "chandra_ocr_kb") -> list[dict[str, Any]]:
    """Every event of the asset ``name``: its extra plus the run that emitted it, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.name == name)
            .order_by(AssetEvent.id)
        )
        return [{"extra": dict(e.extra), "source_run_id": e.source_run_id} for e in rows]


def xcom(dag_id: str, run_id: str, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id, key="return_value")
            .one()
        )
        return row.value


def table_fingerprints(kb: Path) -> dict[str, list[tuple]]:
    tables = ("documents", "pages", "blocks", "chunks", "chunk_tombstones", "runs")
    return {t: query(kb, f"SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM {t}") for t in tables}


def mtimes(folder: Path) -> dict[str, int]:
    """path → mtime_ns of every file under ``folder`` (what a rerun would have to rewrite)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def landing(tmp: Path, pdfs: dict[str, Path]) -> Path:
    """A landing folder with copies of ``pdfs`` (named by their key), old enough to be settled."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, src in pdfs.items():
        dst = tmp / f"{name}.pdf"
        shutil.copyfile(src, dst)
        os.utime(dst, (1_700_000_000, 1_700_000_000))
    return tmp
