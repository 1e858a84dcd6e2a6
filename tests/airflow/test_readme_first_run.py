"""README's "First run, step by step", run as written: ``airflow standalone`` (a real scheduler with the
LocalExecutor), the setup script, the Variable, unpausing, triggering and watching, on the samples.

The commands come from README's ``bash first-run`` block, so the two cannot drift apart; only the two
install lines are left out (this venv is the project's, installed already). The environment stands in
for a new user's shell: ``HOME`` is a fresh folder (``$HOME/airflow`` lives there), the venv's ``bin``
comes first on ``PATH``, and the API server listens on a free port (others may use 8080 here).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from kb_query import kb_rows

from chandra_ocr.airflow.settings import DagSettings
from chandra_ocr.airflow.setup import extract_tasks_per_gpu
from chandra_ocr.testing.processes import signal_group, stop_process_group

REPO = Path(__file__).resolve().parents[2]
INSTALL = ("python3.11 -m venv", "pip install")  # lines the test leaves out
DEADLINE_S = 600  # ~3 min on a quiet machine; each `airflow` command starts a Python


def readme_commands() -> list[str]:
    """The lines of README's ``bash first-run`` block (comments dropped), install lines left out."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash first-run\n", 1)[1].split("\n```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert sum(line.startswith(INSTALL) for line in lines) == 2, "README's install lines changed"
    return [line for line in lines if not line.startswith(INSTALL)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _task_problems(logs: Path) -> str:
    """The warnings and errors of every task log (JSON lines), for a failure's message."""
    lines = []
    for path in sorted(logs.glob("dag_id=*/**/attempt=*.log")):
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("level") in ("warning", "error", "critical"):
                    lines.append(
                        f"{path.parent.name}: {record.get('event')} {record.get('error_detail', '')}"
                    )
    return "\n".join(lines)[-6000:]


def _stop(shell: subprocess.Popen) -> None:
    """SIGTERM the script's process group (standalone shuts its components down), then what is left."""
    signal_group(shell, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(shell.pid, 0)
        except ProcessLookupError:
            break
        shell.poll()
        time.sleep(1)
    stop_process_group(shell, 10)


def test_readme_commands_take_a_newcomer_to_a_finished_run(tmp_path: Path) -> None:
    commands = readme_commands()
    assert any(c.startswith("airflow standalone") for c in commands)
    home, port = tmp_path / "home", _free_port()
    home.mkdir()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CHANDRA_OCR_"))}
    env = inherited | {
        "HOME": str(home),
        "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        # caches a new user builds once (the embedding model's ONNX export, matplotlib's font list):
        # the real home's, so that the test times the run, not their first build
        "CHANDRA_OCR_MODEL_CACHE": str(Path.home() / ".cache" / "chandra_ocr" / "onnx"),
        "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR") or str(Path.home() / ".cache" / "matplotlib"),
    }
    script = tmp_path / "first-run.sh"
    script.write_text("set -eu\n" + "\n".join(commands) + "\n")
    log = tmp_path / "first-run.log"
    with open(log, "wb") as out:
        shell = subprocess.Popen(
            ["bash", str(script)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        code = shell.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _stop(shell)  # the script leaves `airflow standalone` running in its group, as README's user would
    output = log.read_text(errors="replace")
    detail = output[-3000:] + _task_problems(home / "airflow" / "logs")
    assert code == 0, detail
    per_gpu = extract_tasks_per_gpu(DagSettings(), env)[0]  # one GPU's pool slots: the tasks that share it
    assert f"pools ready: chandra_ocr_gpu ({per_gpu} slots), chandra_ocr_loader (1 slot)" in output
    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        runs = db.execute("SELECT dag_id, run_type, state FROM dag_run ORDER BY id").fetchall()
    # the run the user triggered, then the feed run its asset event started; no scheduled run beside them
    assert runs == [("chandra_ocr_ingest", "manual", "success"),
                    ("chandra_ocr_vector_feed", "asset_triggered", "success")], detail  # fmt: skip
    kb = home / "airflow" / "kb"
    statuses = dict(kb_rows(kb, "SELECT file_name, status FROM documents"))
    samples = {p.name for p in (REPO / "samples").glob("*.pdf")}
    assert set(statuses) == samples and statuses["broken.pdf"] == "quarantined", statuses
    assert {s for n, s in statuses.items() if n != "broken.pdf"} == {"ingested"}
    assert (kb / "report" / "report.html").exists() and list((kb / "outbox").glob("vector-*.parquet"))


pytestmark = pytest.mark.slow
