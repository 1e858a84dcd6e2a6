"""One warm vLLM server per GPU, shared by every extract task of every run on that GPU (Airflow's path).

The first task that needs the model starts a *supervisor*, a detached process (its own session,
``python -m chandra_ocr.ocr.warm_server DIR``) that starts ``vllm.entrypoints.openai.api_server``
on 127.0.0.1 in its own process group and records where it listens in ``DIR/server.json``; later
tasks find it there and read over loopback (`WarmVllmEngine`). A task holds a *lease* while it
reads (``DIR/leases/*.json``; the heartbeat is the file's mtime, refreshed by a thread). The
supervisor stops the server once no live lease is left for ``idle_timeout_s`` (0: a few seconds'
grace), and exits when the server dies. A lease whose task is gone (its PID on this host, or a
heartbeat older than `LEASE_TTL_S`) does not count, so a task killed by Airflow keeps nothing alive.

A server started for another preset or other engine options (its ``fingerprint``) is never used
by a task that asks for different ones: that task marks it *draining* (no new leases), waits for
its leases to end and replaces it. Every change of ``DIR`` happens under ``DIR/lock`` (flock), so
two tasks never start two models on one GPU and a supervisor never stops a server a task has just
leased. ``DIR`` is one folder per GPU (`state_dir`: ``$CUDA_VISIBLE_DEVICES`` names the GPU).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chandra_ocr.errors import EngineError
from chandra_ocr.ocr.server_process import (
    STOP_GRACE_S,
    atomic_write,
    die_with_parent,
    free_port,
    healthy,
    process_alive,
    read_json,
    signal_group,
    stop_group,
    tail,
)

log = logging.getLogger(__name__)

STATE_DIR_ENV = "CHANDRA_OCR_ENGINE_STATE_DIR"  # where the per-GPU folders live (default: under /tmp)
LEASE_TTL_S = 60.0  # a lease whose heartbeat is older than this is gone
HEARTBEAT_S = 5.0  # how often a task refreshes its lease
ZERO_IDLE_GRACE_S = 5.0  # idle_timeout_s = 0: stop after this long without a lease
LOCK_WAIT_S = 180.0  # the longest a task waits for the folder's lock (a server stopping holds it)
POLL_S = 0.5


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """This GPU's folder: ``$CHANDRA_OCR_ENGINE_STATE_DIR`` (else ``<tmp>/chandra_ocr-<uid>/engines``)
    / ``gpu-<$CUDA_VISIBLE_DEVICES>`` (``gpu-all`` when unset)."""
    env = os.environ if environ is None else environ
    default = Path(tempfile.gettempdir()) / f"chandra_ocr-{os.getuid()}" / "engines"
    root = env.get(STATE_DIR_ENV) or str(default)
    gpus = env.get("CUDA_VISIBLE_DEVICES", "").strip() or "all"
    return Path(root) / ("gpu-" + "".join(c if c.isalnum() or c in "-," else "_" for c in gpus))


def serve_argv(engine_args: Mapping[str, Any]) -> list[str]:
    """Command-line flags of vLLM's OpenAI server for ``vllm.LLM`` keyword arguments."""
    argv: list[str] = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list, tuple)):
            argv += [flag, json.dumps(value)]
        elif value is not None:
            argv += [flag, str(value)]
    return argv


@dataclass(frozen=True)
class Lease:
    """A task's hold on a ready server: where it listens and what it cost this task to get it."""

    base_url: str
    api_key: str
    server_id: str
    started_at: float  # epoch seconds the server's start began
    load_s: float  # seconds from that start to ready
    loaded_here: bool  # this task started it
    max_num_seqs: int | None  # the server's running-batch limit, when the engine args set it
    sharing: int  # live leases on the server once it was ready for this one, itself included
    path: Path  # the lease file


class WarmServers:
    """The servers of one GPU folder: ``acquire`` a lease (starting or replacing the server when
    needed), ``release`` it. ``argv`` builds the server's model and engine flags; it is called only
    when this task starts a server."""

    def __init__(self, folder: Path, *, start_timeout_s: float = 1800.0) -> None:
        self.folder = folder
        self.start_timeout_s = start_timeout_s
        self._beat: dict[Path, threading.Event] = {}

    # -- the task's side ---------------------------------------------------------------------

    def acquire(
        self, fingerprint: str, argv: Callable[[], list[str]], *, idle_timeout_s: float, label: str = ""
    ) -> Lease:
        """A lease on a ready server of ``fingerprint``; raises EngineError when none can be had in time."""
        (self.folder / "leases").mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.start_timeout_s
        started = ""
        while True:
            with self._locked():
                server = self._current()
                if server is None:
                    server = self._start(fingerprint, argv, idle_timeout_s, label)
                    started = server["server_id"]
                if server["fingerprint"] == fingerprint and not server.get("draining"):
                    path = self._add_lease(idle_timeout_s)
                    self._heartbeat(path)
                    break
                if not server.get("draining"):
                    log.warning(
                        "the warm model on this GPU (%s) was started with other settings: replacing it "
                        "once its %d task(s) are done",
                        server.get("label"),
                        len(self._live_leases()),
                    )
                    self._write(server | {"draining": True})
                if not self._live_leases():
                    self._stop(server, "replaced by one with other settings")
                    continue
            if time.monotonic() > deadline:
                raise EngineError(
                    f"the GPU's warm model ({server.get('label')}) kept serving other tasks for "
                    f"{self.start_timeout_s:g} s; it uses other settings than this task"
                )
            time.sleep(2.0)
        try:
            server = self._wait_ready(server["server_id"], deadline)
            with self._locked():  # counted once ready: the tasks that came during a load count too
                sharing = len(self._live_leases())
        except BaseException:
            self.release(path)
            raise
        return Lease(
            base_url=f"http://127.0.0.1:{server['port']}/v1",
            api_key=server["api_key"],
            server_id=server["server_id"],
            started_at=server["started_at"],
            load_s=server["ready_at"] - server["started_at"],
            loaded_here=server["server_id"] == started,
            max_num_seqs=server.get("max_num_seqs"),
            sharing=sharing,
            path=path,
        )

    def release(self, path: Path) -> None:
        """End a lease (the idle time of the server starts when its last lease ends). Idempotent."""
        stop = self._beat.pop(path, None)
        if stop is not None:
            stop.set()
        path.unlink(missing_ok=True)

    def _start(self, fingerprint: str, argv: Callable[[], list[str]], idle_s: float, label: str) -> dict:
        """Launch a supervisor (detached) for a new server; its record, state ``starting``."""
        server_id = uuid.uuid4().hex[:12]
        port = free_port()
        record = {
            "server_id": server_id,
            "fingerprint": fingerprint,
            "label": label,
            "state": "starting",
            "port": port,
            "api_key": secrets.token_hex(16),
            "started_at": time.time(),
            "starter_pid": os.getpid(),
            "host": socket.gethostname(),
            "idle_timeout_s": idle_s,
        }
        flags = argv()
        record["max_num_seqs"] = _flag_int(flags, "--max-num-seqs")
        record["argv"] = flags
        self._write(record)
        with open(self.folder / "server.log", "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "chandra_ocr.ocr.warm_server", str(self.folder)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        record["supervisor_pid"] = proc.pid
        self._write(record)
        log.info(
            "starting the model for this GPU (%s): vLLM server on 127.0.0.1:%d, supervisor pid %d, log %s",
            label,
            port,
            proc.pid,
            self.folder / "server.log",
        )
        return record

    def _wait_ready(self, server_id: str, deadline: float) -> dict:
        while time.monotonic() < deadline:
            server = read_json(self.folder / "server.json")
            if (
                server is None
                or server["server_id"] != server_id
                or not process_alive(server.get("supervisor_pid"))
            ):
                raise EngineError(
                    f"the GPU's vLLM server stopped while starting; its log: "
                    f"{self.folder / 'server.log'}\n{tail(self.folder / 'server.log')}"
                )
            if server["state"] == "ready":
                return server
            time.sleep(POLL_S)
        raise EngineError(
            f"the GPU's vLLM server was not ready after {self.start_timeout_s:g} s; "
            f"its log: {self.folder / 'server.log'}"
        )

    def _add_lease(self, idle_timeout_s: float) -> Path:
        path = self.folder / "leases" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        body = {"pid": os.getpid(), "host": socket.gethostname(), "idle_timeout_s": idle_timeout_s}
        atomic_write(path, body)
        return path

    def _heartbeat(self, path: Path) -> None:
        stop = threading.Event()
        self._beat[path] = stop

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                with contextlib.suppress(FileNotFoundError):
                    os.utime(path)

        threading.Thread(target=beat, name="warm-model-lease", daemon=True).start()

    # -- shared ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "lock", "a+b") as fh:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EngineError(f"{self.folder / 'lock'} stayed locked for {wait_s:g} s") from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _current(self) -> dict | None:
        """The recorded server if its supervisor lives; a dead one's leftovers are cleaned up (locked)."""
        server = read_json(self.folder / "server.json")
        if server is None:
            return None
        if process_alive(server.get("supervisor_pid")):
            return server
        self._stop(server, "its supervisor is gone")
        return None

    def _stop(self, server: dict, why: str) -> None:
        """Stop a server and its supervisor, wait until they are gone, forget the record (under the lock)."""
        log.info("stopping the GPU's vLLM server %s: %s", server.get("server_id"), why)
        for pid in (server.get("supervisor_pid"), server.get("pgid")):
            signal_group(pid, signal.SIGTERM)
        pids = (server.get("supervisor_pid"), server.get("pgid"))
        end = time.monotonic() + STOP_GRACE_S + 10
        while time.monotonic() < end and any(process_alive(p) for p in pids):
            time.sleep(0.2)
        for pid in (server.get("supervisor_pid"), server.get("pgid")):
            signal_group(pid, signal.SIGKILL)
        (self.folder / "server.json").unlink(missing_ok=True)

    def _live_leases(self) -> list[Path]:
        """The leases whose task still runs; the others are removed."""
        live = []
        host = socket.gethostname()
        for path in (self.folder / "leases").glob("*.json"):
            body = read_json(path)
            try:
                age = time.time() - path.stat().st_mtime
            except FileNotFoundError:
                continue
            dead = body is not None and body.get("host") == host and not process_alive(body.get("pid"))
            if body is None or age > LEASE_TTL_S or dead:
                path.unlink(missing_ok=True)
            else:
                live.append(path)
        return live

    def _idle_timeout_s(self, default: float) -> float:
        """The idle time the newest live lease asked for (``default`` without one)."""
        leases = sorted(self._live_leases(), key=lambda p: p.stat().st_mtime)
        bodies = [read_json(p) for p in leases]
        values = [b["idle_timeout_s"] for b in bodies if b and "idle_timeout_s" in b]
        return float(values[-1]) if values else default

    def _write(self, record: dict) -> None:
        atomic_write(self.folder / "server.json", record)

    # -- the supervisor's side ---------------------------------------------------------------

    def supervise(self) -> int:
        """Run the recorded server until it is idle for its idle time or dies (the supervisor process)."""
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        server = read_json(self.folder / "server.json")
        if server is None or server.get("supervisor_pid") not in (None, os.getpid()):
            return 2
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *server["argv"],
            "--host",
            "127.0.0.1",
            "--port",
            str(server["port"]),
            "--api-key",
            server["api_key"],
        ]
        print(f"[supervisor {os.getpid()}] {' '.join(cmd[:-1])} ***", flush=True)
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True, preexec_fn=die_with_parent
        )  # this process runs no threads: safe
        with self._locked():
            self._write((server := read_json(self.folder / "server.json") or server) | {"pgid": proc.pid})
        idle_s = float(server.get("idle_timeout_s", 600.0))
        last_used = time.monotonic()
        try:
            while not stopping.wait(POLL_S):
                if proc.poll() is not None:
                    print(f"[supervisor] the server exited with {proc.returncode}", flush=True)
                    with self._locked():
                        self._forget(server["server_id"])
                    return 1
                if server["state"] == "starting":
                    if healthy(server["port"]):
                        with self._locked():
                            now = read_json(self.folder / "server.json") or server
                            server = now | {"state": "ready", "ready_at": time.time()}
                            self._write(server)
                        took = server["ready_at"] - server["started_at"]
                        print(f"[supervisor] ready after {took:.1f} s", flush=True)
                        last_used = time.monotonic()
                    continue
                if self._live_leases():
                    last_used = time.monotonic()
                    idle_s = self._idle_timeout_s(idle_s)
                    continue
                idle_for = time.monotonic() - last_used
                limit = idle_s if idle_s > 0 else ZERO_IDLE_GRACE_S
                if idle_for >= limit and self._stop_when_idle(proc, server["server_id"], idle_for):
                    return 0
        finally:
            stop_group(proc)
        return 0

    def _stop_when_idle(self, proc: subprocess.Popen, server_id: str, idle_for: float) -> bool:
        """Stop the server unless a lease came meanwhile; False when one did or the lock stayed taken."""
        try:
            with self._locked(wait_s=10.0):
                if self._live_leases():
                    return False
                print(f"[supervisor] idle for {idle_for:.0f} s: stopping", flush=True)
                stop_group(proc)
                self._forget(server_id)
                return True
        except EngineError:  # the lock stayed taken: try again at the next poll
            return False

    def _forget(self, server_id: str) -> None:
        current = read_json(self.folder / "server.json")
        if current is not None and current.get("server_id") == server_id:
            (self.folder / "server.json").unlink(missing_ok=True)


def _flag_int(argv: list[str], flag: str) -> int | None:
    return int(argv[argv.index(flag) + 1]) if flag in argv[:-1] else None


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    sys.exit(WarmServers(Path(sys.argv[1])).supervise())
