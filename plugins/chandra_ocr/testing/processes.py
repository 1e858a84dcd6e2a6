"""Stopping the process groups that tests and benchmarks start (servers, Airflow components) without
leftovers."""

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
