"""Time bounds that hold on a busy machine: a quiet machine's figure times the slowdown measured now.

The slowdown is the wall time a fixed CPU-bound loop takes over this process's CPU time for it: about 1
on an idle machine, about 2 with two CPU-bound processes beside this one on two cores. A test that
bounds a wait (a kill must come long before the work would have ended) scales its quiet-machine bound
with it; a test that bounds its own CPU work measures ``time.process_time`` instead, which other
processes do not move.
"""

from __future__ import annotations

import time

SAMPLE_CPU_S = 0.2


def slowdown() -> float:
    """Wall time over CPU time of a ``SAMPLE_CPU_S`` busy loop, at least 1."""
    wall, cpu = time.perf_counter(), time.process_time()
    while time.process_time() - cpu < SAMPLE_CPU_S:
        sum(range(1000))
    return max(1.0, (time.perf_counter() - wall) / (time.process_time() - cpu))


def scaled(quiet_s: float) -> float:
    """``quiet_s`` (a bound that holds on an idle machine) times the slowdown now."""
    return quiet_s * slowdown()
