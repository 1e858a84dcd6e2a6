"""How many extract tasks keep one warm server's running batch full: a step model of vLLM's scheduler.

    python -m bench.warm_capacity --out bench/results/warm_capacity.json

The server runs at most ``max_num_seqs`` (S) pages at once; every step decodes one token of each
running page and prefills waiting pages (first come, first served) within ``max_num_batched_tokens``;
a step takes ``a + b × running + c × prefill tokens`` (fitted to the H100's olmOCR-2 step times in
bench/results/gpu_h200.json). Pages ask for the corpus's output lengths (bench/results/page_lengths.json).
Each of T task slots runs one batch of B pages at a time, keeping up to L of them in flight; between
batches the slot is empty for ``gap_s`` (the next task process starting). The baseline is one process
with every page, 1.25 × S in flight. The record: pages/s of each design and its ratio to the baseline,
from which `chandra_ocr.ocr.capacity` takes its fill factor.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from bench.gpu import scheduling as gs
from chandra_ocr.ocr.capacity import in_flight_per_task, tasks_per_gpu

REPO = Path(__file__).resolve().parents[1]
# Step time of the H100's olmOCR-2 bf16 engine: ms per step by running pages (session 13's table) and
# the prefill's share that brings one engine to its measured ~5.8 pages/s with a full batch.
STEP_MS = (7.0, 0.095, 0.02)  # a, b per running page, c per prefilled token


@dataclass(frozen=True)
class Server:
    max_num_seqs: int
    batched_tokens: int = 3488
    prompt_tokens: int = 1700


@dataclass(frozen=True)
class Design:
    tasks: int  # slots (extract tasks at once); 0: one process with every page
    batch_pages: int
    in_flight: int  # per task
    gap_s: float  # an empty slot between two tasks


def simulate(server: Server, design: Design, lengths: list[int]) -> float:
    """Seconds until the last of ``lengths`` (one per page, in batch order) is read."""
    a, b, c = STEP_MS
    batches = [lengths[i : i + design.batch_pages] for i in range(0, len(lengths), design.batch_pages)]
    waiting: deque[list[int]] = deque()  # [task, prompt left, output left]
    running: list[list[int]] = []
    tasks: dict[int, dict] = {}  # slot → {"left": pages not yet sent, "open": pages in flight}
    next_batch, now = 0, 0.0
    free_at = [0.0] * design.tasks

    def fill(slot: int) -> None:
        t = tasks[slot]
        while t["left"] and t["open"] < design.in_flight:
            waiting.append([slot, server.prompt_tokens, t["left"].pop(0)])
            t["open"] += 1

    while True:
        for slot in range(design.tasks):
            if slot not in tasks and next_batch < len(batches) and free_at[slot] <= now:
                tasks[slot] = {"left": list(batches[next_batch]), "open": 0}
                next_batch += 1
                fill(slot)
        if not running and not waiting:
            if next_batch >= len(batches):
                return now
            now = min(f for s, f in enumerate(free_at) if s not in tasks)
            continue
        if not any(r[1] for r in running) and (not waiting or len(running) >= server.max_num_seqs):
            step_s = (a + b * len(running)) / 1000  # decode only until the next page ends: jump there
            steps = min(r[2] for r in running)
            starts = [f for s, f in enumerate(free_at) if s not in tasks and f > now]
            if starts and next_batch < len(batches):
                steps = max(1, min(steps, math.ceil((min(starts) - now) / step_s)))
            now += steps * step_s
            for r in running:
                r[2] -= steps
            finish(running, tasks, fill, free_at, now, design.gap_s)
            continue
        budget = server.batched_tokens - sum(1 for r in running if r[1] == 0)
        prefill = 0
        for r in running:  # a page admitted last step still prefilling
            if r[1] and budget > 0:
                take = min(r[1], budget)
                r[1], budget, prefill = r[1] - take, budget - take, prefill + take
        while waiting and budget > 0 and len(running) < server.max_num_seqs:
            r = waiting.popleft()
            take = min(r[1], budget)
            r[1], budget, prefill = r[1] - take, budget - take, prefill + take
            running.append(r)
        decoding = [r for r in running if r[1] == 0]
        now += (a + b * len(running) + c * prefill) / 1000
        for r in decoding:
            r[2] -= 1
        finish(running, tasks, fill, free_at, now, design.gap_s)


def finish(
    running: list[list[int]], tasks: dict, fill, free_at: list[float], now: float, gap_s: float
) -> None:
    """Take the pages whose output is complete off the batch; their tasks send more or end."""
    for r in [r for r in running if r[1] == 0 and r[2] <= 0]:
        running.remove(r)
        t = tasks[r[0]]
        t["open"] -= 1
        fill(r[0])
        if not t["open"] and not t["left"]:
            del tasks[r[0]]
            free_at[r[0]] = now + gap_s


def one_process(server: Server, lengths: list[int]) -> float:
    return simulate(server, Design(1, len(lengths), math.ceil(1.25 * server.max_num_seqs), 0.0), lengths)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pages", type=int, default=6000)
    p.add_argument("--seqs", default="176,368,512", help="max_num_seqs: L40S, H100, H200 (olmocr2)")
    p.add_argument("--batch-pages", default="100,200")
    p.add_argument("--gap-s", type=float, default=3.0, help="a slot's gap between two tasks")
    p.add_argument("--lengths", type=Path, default=REPO / "bench" / "results" / "page_lengths.json")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "warm_capacity.json")
    args = p.parse_args()
    dist = gs.LengthDistribution.load(args.lengths, 8000)
    lengths = [dist.length(f"b{i // 100}", i % 100 + 1) for i in range(args.pages)]
    rows = []
    for seqs in map(int, args.seqs.split(",")):
        server = Server(seqs)
        base = args.pages / one_process(server, lengths)
        for pages in map(int, args.batch_pages.split(",")):
            rule = tasks_per_gpu(seqs, pages)
            for tasks in sorted({4, 8, math.ceil(rule / 2), rule - 2, rule, rule + 4}):
                for capped in (False, True):
                    in_flight = min(pages, in_flight_per_task(seqs, tasks)) if capped else pages
                    rate = args.pages / simulate(server, Design(tasks, pages, in_flight, args.gap_s), lengths)
                    rows.append({"max_num_seqs": seqs, "batch_pages": pages, "tasks": tasks,
                                 "rule": tasks == rule, "in_flight_per_task": in_flight,
                                 "pages_per_s": round(rate, 3), "one_process_pages_per_s": round(base, 3),
                                 "over_one_process": round(rate / base, 3)})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
    record = {"what": __doc__.split("\n")[0], "step_ms": STEP_MS, "pages": args.pages, "gap_s": args.gap_s,
              "command": "python -m bench.warm_capacity", "rows": rows}  # fmt: skip
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
