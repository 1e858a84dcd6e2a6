"""Stopping the process groups that tests start (servers, Airflow components) without leftovers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the group ``start_new_session`` gave ``proc`` (its PID); gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop_process_group(proc: subprocess.Popen | None, grace_s: float = 30.0) -> None:
    """SIGTERM the group, SIGKILL it after ``grace_s`` (and any children the leader left behind)."""
    if proc is None:
        return
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=30)
    signal_group(proc, signal.SIGKILL)  # pool children, log servers


def pipe_inodes() -> set[int]:
    """The inodes of the pipes this process holds descriptors of (this module is light enough to be
    imported in a memory-capped PDF worker)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("pipe:["):
                inodes.add(int(target[6:-1]))
    return inodes
