"""The step model of vLLM's scheduler behind the capacity rule (bench/warm_capacity.py) runs and agrees
with it: the rule's tasks per GPU keep the batch as busy as one process, today's 4 did not."""

from __future__ import annotations

import math

from bench.gpu import scheduling as gs
from bench.warm_capacity import REPO, Design, Server, one_process, simulate
from chandra_ocr.ocr.capacity import in_flight_per_task, tasks_per_gpu


def test_the_capacity_rule_keeps_the_running_batch_full_where_four_tasks_did_not():
    dist = gs.LengthDistribution.load(REPO / "bench" / "results" / "page_lengths.json", 8000)
    lengths = [dist.length(f"b{i // 100}", i % 100 + 1) for i in range(3000)]
    server, pages = Server(368), 100
    base = one_process(server, lengths)
    ruled = tasks_per_gpu(server.max_num_seqs, pages)

    def ratio(tasks: int) -> float:
        in_flight = min(pages, in_flight_per_task(server.max_num_seqs, tasks))
        return base / simulate(server, Design(tasks, pages, in_flight, gap_s=3.0), lengths)

    assert ratio(ruled) >= 0.95 > ratio(4)
    assert ratio(math.ceil(ruled / 2)) < ratio(ruled)  # half as many tasks leave the batch short
