"""Extract tasks per GPU and pages in flight per task from the engine's capacity (ocr/capacity.py)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.capacity import (
    IN_FLIGHT_SHARE,
    MAX_TASKS,
    MIN_TASKS,
    harmonic,
    in_flight_per_task,
    plan_tasks_per_gpu,
    tasks_per_gpu,
)
from chandra_ocr.ocr.presets import PRESETS, get_preset, plan_for_preset

REPO = Path(__file__).resolve().parents[2]
MIB = 2**20
GPUS = {"L40S": 46_068 * MIB, "H100 80GB": 81_559 * MIB, "H200": 143_771 * MIB}  # nvidia-smi's totals


def test_harmonic_estimates_the_longest_of_a_batch_of_corpus_page_lengths():
    """The rule's premise: the longest of B pages drawn from the corpus's lengths is about H(B) means
    (within 15 %, H errs long: the corpus's tail is a little lighter than the exponential's)."""
    tokens = json.loads((REPO / "bench" / "results" / "page_lengths.json").read_text())["tokens_sorted"]
    mean = sum(tokens) / len(tokens)
    rng = random.Random(7)
    for batch in (25, 100, 200):
        longest = sum(max(rng.choice(tokens) for _ in range(batch)) for _ in range(400)) / 400
        assert 0.85 <= longest / mean / harmonic(batch) <= 1.05, batch


def test_tasks_fill_the_running_batch_with_the_average_pages_a_task_holds():
    for seqs in (16, 176, 368, 512):
        for batch in (10, 50, 100, 400):
            n = tasks_per_gpu(seqs, batch)
            assert MIN_TASKS <= n <= MAX_TASKS
            if MIN_TASKS < n < MAX_TASKS:  # n − 1 tasks hold at least the batch, n − 2 fall short of it
                held = batch / harmonic(batch)
                assert (n - 1) * held >= seqs > (n - 2) * held, (seqs, batch, n)
    assert tasks_per_gpu(368, 100) > tasks_per_gpu(368, 400) and tasks_per_gpu(512, 100) > tasks_per_gpu(
        176, 100
    )
    assert tasks_per_gpu(368, 1) == MAX_TASKS and tasks_per_gpu(1, 1000) == MIN_TASKS
    with pytest.raises(ConfigError):
        tasks_per_gpu(0, 100)


def test_tasks_together_keep_twice_the_running_batch_in_flight():
    for sharing in (1, 3, 21):
        per_task = in_flight_per_task(368, sharing)
        assert IN_FLIGHT_SHARE * 368 <= per_task * sharing < IN_FLIGHT_SHARE * 368 + sharing
    assert in_flight_per_task(368, 1) >= 100  # a lone nightly task sends its whole batch
    assert in_flight_per_task(1, 1000) == 1


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_the_plan_uses_the_sizer_of_each_preset_on_each_gpu(gpu):
    for name, preset in PRESETS.items():
        plan = plan_tasks_per_gpu(preset, 100, GPUS[gpu])
        sized = plan_for_preset(preset, gpu_total_bytes=GPUS[gpu]).max_num_seqs
        assert (plan.max_num_seqs, plan.tasks_per_gpu) == (sized, tasks_per_gpu(sized, 100)), name
        assert (
            f"{sized} pages run at once" in plan.reason and f"→ {plan.tasks_per_gpu} extract" in plan.reason
        )
    # more memory, more pages at once, more tasks; a preset's own max_num_seqs wins over the sizer
    olmocr = get_preset("olmocr2")
    assert (
        plan_tasks_per_gpu(olmocr, 100, GPUS["H200"]).tasks_per_gpu
        > plan_tasks_per_gpu(olmocr, 100, GPUS["L40S"]).tasks_per_gpu
    )
    pinned = get_preset("olmocr2", engine_args={"max_num_seqs": 64})
    assert (
        plan_tasks_per_gpu(pinned, 100, GPUS["H200"]).tasks_per_gpu == math.ceil(64 * harmonic(100) / 100) + 1
    )


def test_the_operations_guide_table_is_the_rule_for_100_page_batches():
    """docs/operations.md's tasks-per-GPU table holds what the rule gives (nvidia-smi's totals)."""
    text = (REPO / "docs" / "operations.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip(" `") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in PRESETS:
            rows[cells[0]] = [int(c) for c in cells[1:]]
    assert set(rows) == set(PRESETS)
    for name, figures in rows.items():
        ruled = [
            plan_tasks_per_gpu(PRESETS[name], 100, GPUS[g]).tasks_per_gpu
            for g in ("L40S", "H100 80GB", "H200")
        ]
        assert figures == ruled, name
