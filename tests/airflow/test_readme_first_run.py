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
import urllib.request
from pathlib import Path

import pytest
from kb_query import kb_rows
from pace import scaled

from chandra_ocr.airflow.settings import DagSettings
from chandra_ocr.airflow.setup import extract_tasks_per_gpu
from chandra_ocr.testing.processes import signal_group, stop_process_group

REPO = Path(__file__).resolve().parents[2]
INSTALL = ("python3.11 -m venv", "pip install")  # lines the test leaves out
# ~3 min on a quiet machine, over 10 on a busy one (each `airflow` command and each task starts a
# Python that imports Airflow): the block fails when nothing moved for STALL_S (no new output of the
# script, no task log written), or after CAP_S in all
STALL_S, CAP_S = 600, 3600
EXECUTION_API_TIMEOUT_S = 30  # a quiet machine's, scaled by the slowdown when the test starts


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


def _wait_while_moving(shell: subprocess.Popen, watched: list[Path]) -> int | None:
    """The script's exit code; None when nothing under ``watched`` changed for ``STALL_S`` (stuck),
    or after ``CAP_S``."""
    start = moved = time.monotonic()
    seen: tuple = ()
    while time.monotonic() - start < CAP_S:
        try:
            return shell.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        now = tuple(sorted(size for w in watched for size in _sizes(w)))
        if now != seen:
            seen, moved = now, time.monotonic()
        elif time.monotonic() - moved > STALL_S:
            return None
    return None


def _sizes(path: Path) -> list[tuple[str, int]]:
    """(path, size) of the file ``path`` or of every file under the folder ``path``."""
    files = [path] if path.is_file() else list(path.rglob("*")) if path.is_dir() else []
    sizes = []
    for f in files:
        with contextlib.suppress(OSError):  # a file removed meanwhile, or a folder
            if f.is_file():
                sizes.append((str(f), f.stat().st_size))
    return sizes


def _api_views(airflow_home: Path, port: int) -> dict[str, dict]:
    """Plugin and DAG import errors and the ingest DAG's runs, from the API server (signed in as
    README's user: admin, with the password standalone generated)."""
    base = f"http://127.0.0.1:{port}"
    users = json.loads((airflow_home / "simple_auth_manager_passwords.json.generated").read_text())
    body = json.dumps({"username": "admin", "password": users["admin"]}).encode()
    request = urllib.request.Request(f"{base}/auth/token", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=scaled(60)) as response:
        token = json.load(response)["access_token"]

    def get(path: str) -> dict:
        request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=scaled(60)) as response:
            return json.load(response)

    return {
        "plugin_errors": get("/api/v2/plugins/importErrors"),
        "dag_errors": get("/api/v2/importErrors"),
        "ingest_runs": get("/api/v2/dags/chandra_ocr_ingest/dagRuns"),
    }


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
        # a task's first call to the API server took 64 s here while the machine was busy (default: 5 s
        # a try, 5 tries): the task failed before it ran
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(round(scaled(EXECUTION_API_TIMEOUT_S))),
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
    api: dict[str, dict] = {}
    try:
        code = _wait_while_moving(shell, [log, home / "airflow" / "logs"])
        if code == 0:  # what the UI shows, through the REST API of the Airflow the script left running
            api = _api_views(home / "airflow", port)
    finally:
        _stop(shell)  # the script leaves `airflow standalone` running in its group, as README's user would
    output = log.read_text(errors="replace")
    detail = output[-3000:] + _task_problems(home / "airflow" / "logs")
    assert code == 0, detail
    # no red "Plugin Import Error" on the home page: each plugin of the package registers once
    assert api["plugin_errors"]["total_entries"] == 0, api["plugin_errors"]
    assert api["dag_errors"]["total_entries"] == 0, api["dag_errors"]
    # the green run says that a document was quarantined, where the run list and the grid show it
    (ingest,) = api["ingest_runs"]["dag_runs"]
    report = home / "airflow" / "kb" / "report" / "report.html"
    n_samples = len(list(REPO.glob("samples/*.pdf")))
    assert ingest["note"] == (f"1 quarantined of {n_samples} documents: see the run report ({report}), "
                              "or Knowledge base → Review")  # fmt: skip
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
