"""A real Airflow 3 for these tests: a SQLite metadata DB in a session AIRFLOW_HOME, migrated once.

The environment is set here, at import time, because Airflow reads its configuration when it is
first imported. The DAG-shaping settings the DAG files read at parse time are set here too: no
retries (a failing task fails the run at once instead of waiting out the retry delay) and no
settle time (test files were just copied).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from airflow_runs import Inputs

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="chandra-ocr-airflow-"))

if "airflow" in sys.modules:  # pragma: no cover - a guard for test ordering, not for the code
    raise RuntimeError("airflow was imported before tests/airflow/conftest.py could configure it")
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "CHANDRA_OCR_RETRIES": "0",
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session", autouse=True)
def airflow_db():
    """The session's metadata DB: migrated, pools created and recorded (the project's setup command)."""
    from chandra_ocr.airflow.settings import DagSettings
    from chandra_ocr.airflow.setup import setup_airflow

    pools = setup_airflow(DagSettings.from_env(os.environ))
    yield pools
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def inputs(request: pytest.FixtureRequest, samples: Path) -> Inputs:
    """Mixed PDFs: two born-digital, one scanned, broken ones (corpus files; the samples without it)."""
    try:
        root = request.getfixturevalue("corpus")
    except pytest.skip.Exception:
        return Inputs(
            {"born_a": samples / "report.pdf", "born_b": samples / "mixed.pdf",
             "scanned": samples / "scanned_memo.pdf", "broken_a": samples / "broken.pdf"},
            scanned_phrase="ledgers",
        )  # fmt: skip
    return Inputs(
        {
            "born_a": root / "docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf",
            "born_b": root / "docling/tests/data/pdf/sources/code_and_formula.pdf",
            "scanned": root / "derived/phototest.scan.pdf",  # text: tesseract-test/testing/phototest.gold.txt
            "broken_a": root / "ocrmypdf/tests/resources/invalid.pdf",  # 44 bytes, not a PDF
            "broken_b": root / "pdfplumber/tests/pdfs/empty.pdf",  # 0 bytes
        },
        scanned_phrase="quick brown dog",
    )
