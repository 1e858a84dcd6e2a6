"""A real Airflow for one test: ``airflow standalone`` (scheduler with the LocalExecutor, DAG processor,
API server, triggerer) on a SQLite metadata DB in a temporary AIRFLOW_HOME, started in its own
process group and stopped by it. Runs are triggered with the ``airflow`` CLI; state is read straight
from the metadata DB (read-only)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path

from pace import scaled

from chandra_ocr.testing.processes import stop_process_group

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TERMINAL = {"success", "failed"}


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AirflowStack:
    """``airflow standalone`` for the DAGs of ``dags/``; ``env`` adds CHANDRA_OCR_* settings. Nothing
    AIRFLOW*/CHANDRA_OCR_* of the test process (e.g. the in-process Airflow tests' setup) leaks in."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        port = _free_port()
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CHANDRA_OCR_"))}
        self.env = (
            inherited
            | {
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # standalone runs `airflow ...`
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__API__PORT": str(port),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                # a task's first call to the API server took a minute on a busy machine (default 5 s)
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(round(scaled(30))),
            }
            | env
        )
        self.proc: subprocess.Popen | None = None
        self.log = home / "standalone.log"

    def start(self) -> None:
        """Migrate the DB and create the pools (the project's setup command), then start the stack."""
        self.home.mkdir(parents=True, exist_ok=True)
        setup = [sys.executable, "-m", "chandra_ocr.airflow.setup"]
        done = subprocess.run(setup, env=self.env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(BIN / "airflow"), "standalone"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after 30 s."""
        stop_process_group(self.proc)

    def query(self, sql: str, *args: object) -> list[tuple]:
        """Read the metadata DB (read-only; waits while the scheduler writes)."""
        with closing(
            sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=60)
        ) as con:
            return con.execute(sql, args).fetchall()

    def wait_for_dags(self, dag_ids: list[str], timeout_s: float = 900) -> None:
        """Until the DAG processor has stored every DAG of ``dag_ids`` (unpaused) and the API server
        answers (a task started before it fails)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._alive()
            if (self.home / "airflow.db").exists():
                found = {r[0] for r in self.query("SELECT dag_id FROM dag WHERE NOT is_paused")}
                if set(dag_ids) <= found and self._api_answers():
                    return
            time.sleep(2)
        raise AssertionError(f"DAGs {dag_ids} not parsed within {timeout_s:.0f} s:\n{self.tail()}")

    def trigger(self, dag_id: str, run_id: str, conf: dict) -> subprocess.Popen:
        """``airflow dags trigger`` in the background (the CLI takes seconds to start)."""
        cmd = [
            str(BIN / "airflow"),
            "dags",
            "trigger",
            dag_id,
            "--run-id",
            run_id,
            "--conf",
            json.dumps(conf),
        ]
        return subprocess.Popen(
            cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def airflow(self, *args: str) -> str:
        """Run an ``airflow`` CLI command against this stack (e.g. ``pools set``); returns its stdout."""
        done = subprocess.run(
            [str(BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def wait_for_runs(self, stall_s: float = 600, cap_s: float = 3600) -> list[tuple]:
        """Until every DAG run (asset-triggered ones included) has ended; returns them all. Fails when no
        task changed its state or try for ``stall_s`` (stuck: a busy machine makes runs slower, not
        still), or after ``cap_s`` in all."""
        start = moved = time.monotonic()
        seen: list[tuple] = []
        while time.monotonic() - moved < stall_s and time.monotonic() - start < cap_s:
            self._alive()
            tasks = self.query("SELECT dag_id, run_id, task_id, map_index, state, try_number "
                               "FROM task_instance ORDER BY 1, 2, 3, 4")  # fmt: skip
            if tasks != seen:
                seen, moved = tasks, time.monotonic()
            runs = self.query("SELECT dag_id, run_id, state, start_date, end_date FROM dag_run")
            if runs and all(r[2] in TERMINAL for r in runs):
                time.sleep(10)  # an asset event of the last load may be about to start a feed run
                again = self.query("SELECT dag_id, run_id, state, start_date, end_date FROM dag_run")
                if len(again) == len(runs) and all(r[2] in TERMINAL for r in again):
                    return again
            time.sleep(2)
        raise AssertionError(
            f"runs still going, no task moved for {time.monotonic() - moved:.0f} s:\n{self.tail()}"
        )

    def _api_answers(self) -> bool:
        url = f"http://127.0.0.1:{self.env['AIRFLOW__API__PORT']}/execution/health"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return reply.status == 200
        except OSError:  # not listening yet, or too busy to answer
            return False

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def _alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"airflow standalone exited with {self.proc.returncode}:\n{self.tail()}")
