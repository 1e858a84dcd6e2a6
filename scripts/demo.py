"""The demo: the ``chandra_ocr_ingest`` DAG, run through Airflow on the bundled samples; then queries.

Airflow runs locally: a SQLite metadata DB under ``./.airflow`` (created, migrated and given the
pools by the project's setup command), the DAG run by ``dag.test()`` (no scheduler needed). The
knowledge base lands in ``./kb``. Run it again: nothing is new, nothing is redone.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KB = REPO / "kb"

# Airflow reads its configuration when first imported: set it before any Airflow import.
os.environ.update(
    {
        "AIRFLOW_HOME": str(REPO / ".airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR"),
        "CHANDRA_OCR_SOURCE": str(REPO / "samples"),
        "CHANDRA_OCR_KB": str(KB),
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
    }
)

QUERIES = {
    "Documents and how they ended": (
        "SELECT file_name, status, n_pages, error FROM documents ORDER BY file_name"
    ),
    "Chunks that mention nitrate": (
        "SELECT d.file_name, c.page_start, c.header_path, left(c.text, 70) AS text "
        "FROM chunks c JOIN documents d USING (doc_id) WHERE c.text ILIKE '%nitrate%' ORDER BY ALL"
    ),
}


def run_ingest() -> None:
    """Set Airflow up (idempotent) and run ``chandra_ocr_ingest`` once; print what each task did."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from chandra_ocr.airflow.settings import DagSettings
    from chandra_ocr.airflow.setup import setup_airflow

    setup_airflow(DagSettings.from_env(os.environ))
    t0 = time.monotonic()
    run = DagBag(dag_folder=str(REPO / "dags")).dags["chandra_ocr_ingest"].test()
    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id="chandra_ocr_ingest", run_id=run.run_id)
        states = sorted(f"{ti.task_id}{_index(ti.map_index)}={ti.state}" for ti in tis)
        load = session.query(XComModel).filter_by(run_id=run.run_id, task_id="load", key="return_value")
        load = load.first()
    print(f"\nDAG run {run.run_id}: {run.state} in {time.monotonic() - t0:.1f} s")
    print("tasks: " + ", ".join(states))
    print(f"loaded: {load.value}" if load else "nothing new to ingest (every sample is already in the KB)")
    if str(run.state) != "success":
        raise SystemExit("the DAG run failed; see the task logs above")


def _index(map_index: int) -> str:
    return "" if map_index < 0 else f"[{map_index}]"


def show_queries() -> None:
    from chandra_ocr.store.duckdb_store import connect
    from chandra_ocr.store.layout import KbLayout

    layout = KbLayout(KB)
    print(f"DuckDB: {layout.duckdb_path}\n")
    con = connect(layout, read_only=True)
    try:
        for title, sql in QUERIES.items():
            print(f"-- {title}\n{sql};")
            con.sql(sql).show(max_width=160)
    finally:
        con.close()


def next_steps() -> None:
    """Where the run report is and what to type next (the CLI is in the project's .venv)."""
    report = KB / "report" / "report.html"
    cli = Path(sys.executable).parent / "chandra-ingest"
    print(f"Run report: {report}" + ("" if report.is_file() else " (not written: see the task logs)"))
    print(f"  open it in a browser, e.g. xdg-open {report.relative_to(REPO)}\n")
    print("Next, in the repository folder (or `source .venv/bin/activate`, then just `chandra-ingest`):")
    print(f'  {_here(cli)} query --kb kb "SELECT file_name, status, n_pages FROM documents"')
    print(f"  {_here(cli)} table --kb kb report.pdf 1 1")
    print(f"  {_here(cli)} serve --kb kb    # browse it: pages with their boxes, review, search")
    print(f"  {_here(cli)} run YOUR_PDF_FOLDER --kb kb --settle-seconds 0")


def _here(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (as the user would type it)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main() -> int:
    run_ingest()
    show_queries()
    next_steps()
    return 0


if __name__ == "__main__":
    sys.exit(main())
