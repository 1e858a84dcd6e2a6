"""How many tasks of a `dag_throughput_gpu.sh` queue item fit the device time left.

    python3 -m bench.gpu.queue_fit SHAPE MODE K B LEFT_S [RESULTS.json ...]   # prints the K to run, 0: skip

The estimate of an item is its model load plus K tasks of B pages after the load, plus a
fixed allowance (imports, the warm design's nightly probe, the server's stop). Both figures come from
the items of the same shape already in RESULTS (this queue's gpu.json and warmup.json: a load with
the compile cache warm, seconds per 100 pages after the load); a shape not loaded yet pays the cold
compile cache. Defaults are the slowest measured on an H100 or H200 (bench/results/dag_throughput.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COLD_LOAD_S = 210.0  # the first load of a shape on a fresh machine (H200: 208 s, H100: 121-133 s)
WARM_LOAD_S = 100.0  # a later load, compile cache warm (52-96 s measured)
TASK_S = 20.0  # seconds per 100-page task after the load (olmOCR-2 bf16, H100: 5.2 pages/s)
ALLOWANCE_S = 40.0  # imports, the nightly probe and the server's stop
WARMUP_S = 45.0  # the warm-up's pages after its load (its longest page decoded alone)
MIN_TASKS = 5  # fewer tasks than this measure the load more than the design: skip the item instead


def estimate(shape: str, results: list[dict[str, Any]]) -> tuple[float, float]:
    """(load seconds, seconds per 100-page task after the load) for ``shape`` from earlier records."""
    entries = [e for doc in results for key, e in doc.get("runs", {}).items() if key.endswith(f"| {shape}")]
    records = [e[m] for e in entries for m in ("warm", "one_process") if m in e]
    if not records:
        return COLD_LOAD_S, TASK_S
    warm_loads = [s for r in records if r.get("compile_cache_warm_at_start") for s in r["model_load_s"]]
    rates = [r["after_load_s"] / (r["pages"] / 100) for r in records if r["pages"] >= 1000]
    return max(warm_loads, default=WARM_LOAD_S), max(rates, default=TASK_S)


def fit(mode: str, tasks: int, left_s: float, load_s: float, task_s: float) -> int:
    """The tasks of the item that end within ``left_s`` (0: too few to be worth running);
    ``task_s``: seconds per task after the load."""
    if mode == "warmup":
        return 1 if left_s >= load_s + WARMUP_S + ALLOWANCE_S else 0
    if mode == "per_task":  # a load in every task; its tasks are slices that add up across queues
        return max(0, min(tasks, int((left_s - ALLOWANCE_S) // (task_s + load_s))))
    room = int((left_s - load_s - ALLOWANCE_S) // task_s)
    return min(tasks, room) if room >= min(tasks, MIN_TASKS) else 0


def main(argv: list[str]) -> int:
    shape, mode, tasks, pages, left = argv[0], argv[1], int(argv[2]), int(argv[3]), float(argv[4])
    results = [json.loads(Path(p).read_text()) for p in argv[5:] if Path(p).is_file()]
    load_s, per_100 = estimate(shape, results)
    task_s = per_100 * pages / 100
    k = fit(mode, tasks, left, load_s, task_s)
    print(k)
    said = f"{left:.0f} s left, load ~{load_s:.0f} s, ~{task_s:.0f} s per task → {k} of {tasks}"
    print(f"{shape}:{mode}: {said}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
