"""The processes and files of a server started on this host: its health, its process group, its
parent's death, free ports and the JSON records it is known by (`warm_server`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

STOP_GRACE_S = 30.0  # SIGTERM → SIGKILL for the server's process group


def healthy(port: int) -> bool:
    """Whether the server on 127.0.0.1:``port`` answers its health check."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL what is left after `STOP_GRACE_S`."""
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def die_with_parent() -> None:
    """In the server's process before exec: SIGKILL when the supervisor dies (Linux's PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def signal_group(pgid: int | None, sig: int) -> None:
    """Send ``sig`` to the process group ``pgid``, if there is one."""
    if pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def process_alive(pid: int | None) -> bool:
    """Whether a process (or group leader) ``pid`` exists on this host and is not a zombie."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``; None when it is missing or half-written."""
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def atomic_write(path: Path, value: dict) -> None:
    """Replace ``path`` with ``value`` as JSON at once, readable by this user only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the record holds the API key
    with os.fdopen(fd, "w") as fh:
        json.dump(value, fh)
    os.replace(tmp, path)


def tail(path: Path, n: int = 3000) -> str:
    """The last ``n`` characters of a log file ("" when there is none)."""
    try:
        return path.read_text(errors="replace")[-n:]
    except FileNotFoundError:
        return ""
