"""A real CeleryExecutor deployment on 127.0.0.1: PostgreSQL, Redis, Airflow's components, two workers.

Every process is started here with its own session (process group) and stopped here by its PID
(the group's id), in reverse order, also when the test fails. PostgreSQL refuses to run as root,
so as root it runs as the ``postgres`` user (``setpriv`` execs it: the PID is the server's own).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
from pace import scaled

from chandra_ocr.testing.processes import signal_group, stop_process_group

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin() -> Path | None:
    """Debian's PostgreSQL server binaries (newest major version), or None when not installed."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


@dataclass
class Processes:
    """Started processes by name; ``stop_all`` ends each one's process group by its PID, newest first."""

    logs: Path
    started: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps writing to it
        self.started[name] = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def run_once(self, name: str, argv: list[str], env: dict[str, str], timeout_s: float) -> int:
        """Run a command to completion (output in its log); returns its exit code. ``timeout_s`` is a
        quiet machine's, scaled by the slowdown now."""
        self.start(name, argv, env)
        proc = self.started.pop(name)
        try:
            return proc.wait(timeout=scaled(timeout_s))
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)
            return -9

    def check_alive(self) -> None:
        """Raise with the log's tail when a started process has exited."""
        for name, proc in self.started.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")

    def tail(self, name: str, chars: int = 4000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_all(self, grace_s: float = 20.0) -> None:
        for name, proc in reversed(list(self.started.items())):
            stop_process_group(proc, grace_s)
            del self.started[name]


def wait_until(check: Callable[[], object], timeout_s: float, what: str, procs: Processes) -> object:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout_s`` (a quiet
    machine's, scaled by the slowdown now)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            value = check()
        except (OSError, psycopg2.Error):
            value = None
        if value:
            return value
        time.sleep(1.0)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")


def start_postgres(procs: Processes, root: Path) -> str:
    """A fresh cluster on a free port (trust auth, loopback only) → the ``airflow`` database's DSN."""
    bindir = postgres_bin()
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir(parents=True)
    as_user: list[str] = []
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "postgres:postgres", str(root)], check=True)
        as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
    subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "airflow", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1",
            "-k", str(sockets), "-c", "fsync=off", "-c", "max_connections=200"]  # fmt: skip
    procs.start("postgres", [*as_user, *argv], dict(os.environ))
    admin = f"host=127.0.0.1 port={port} user=airflow dbname=postgres"
    wait_until(lambda: psycopg2.connect(admin).close() or True, 60, "PostgreSQL accepting connections", procs)
    con = psycopg2.connect(admin)
    con.autocommit = True
    con.cursor().execute("CREATE DATABASE airflow")
    con.close()
    return f"host=127.0.0.1 port={port} user=airflow dbname=airflow"


def start_redis(procs: Processes, root: Path) -> str:
    """Redis on a free loopback port, no persistence → its URL."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(root)]  # fmt: skip
    procs.start("redis", argv, dict(os.environ))

    def ping() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    wait_until(ping, 30, "Redis answering PING", procs)
    return f"redis://127.0.0.1:{port}/0"


def airflow_env(home: Path, dsn: str, broker: str, api_port: int) -> dict[str, str]:
    """The configuration every Airflow component of the deployment shares."""
    pg = dict(part.split("=", 1) for part in dsn.split())
    url = f"postgresql://{pg['user']}@{pg['host']}:{pg['port']}/{pg['dbname']}"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CHANDRA_OCR_"))}
    return inherited | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url.replace("postgresql://", "postgresql+psycopg2://"),
        "AIRFLOW__CELERY__BROKER_URL": broker,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + url.replace("postgresql://", "postgresql+psycopg2://"),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "CHANDRA_OCR_SCHEDULE": "none",  # only the test's run; no scheduled run beside it
        "CHANDRA_OCR_RETRIES": "0",
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # loopback only: the test's REST calls
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
    }


def start_airflow(procs: Processes, env: dict[str, str], api_port: int) -> None:
    """api-server, scheduler, dag-processor, and the two Celery workers: ``gpu`` and ``default`` queues.

    Each worker reports its own host name (``core.hostname_callable`` → ``worker_name.hostname``),
    which Airflow records on the task instances it runs.
    """
    airflow = str(VENV_BIN / "airflow")
    procs.start("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(api_port),
                               "--workers", "1"], env)  # fmt: skip
    procs.start("scheduler", [airflow, "scheduler"], env)
    procs.start("dag-processor", [airflow, "dag-processor"], env)
    for queue, concurrency in (("gpu", 1), ("default", 2)):
        worker_env = env | {
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "worker_name.hostname",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
            "SCALEOUT_WORKER_NAME": f"{queue}-worker",
        }
        argv = [airflow, "celery", "worker", "--queues", queue, "--concurrency", str(concurrency),
                "--celery-hostname", f"{queue}@%h", "--skip-serve-logs"]  # fmt: skip
        procs.start(f"worker-{queue}", argv, worker_env)
