"""Every test here runs against the session's real Airflow metadata DB (configured in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow_runs import Inputs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session", autouse=True)
def _airflow_db(airflow_db):
    """The metadata DB for every test of this folder."""
    return airflow_db


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
