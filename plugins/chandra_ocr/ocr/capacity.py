"""How many extract tasks share one GPU's warm server, and how many pages each keeps in flight.

The server runs at most ``max_num_seqs`` pages at once (the sizer's figure: the pages of the expected
length that its KV cache holds). An extract task sends its batch's pages and ends when the last one is
read, so it holds fewer and fewer pages in the running batch as its long pages finish last. Page output
lengths are close to exponential (the corpus's text-layer counts: median 0.61×, p90 2.4×, p99 4.4× the
mean; exponential: 0.69×, 2.3×, 4.6×), and the longest of B such pages is about H(B) times the mean
(H the harmonic number: 5.2 for 100 pages). A task's pages are in flight for B × mean of its ≈ H(B) × mean
life, so it holds on average B / H(B) pages in the batch, and ``ceil(max_num_seqs × H(B) / B) + 1``
tasks keep the batch full (the one more covers a slot whose next task is starting).
``bench/warm_capacity.py`` checks the rule on a step model of vLLM's scheduler
(``bench/results/warm_capacity.json``).

Pages waiting at the server hold their preprocessed image in its memory (about 36 MiB an olmOCR-2 page,
measured on an H100: bench/results/dag_throughput.json), so the tasks together keep about
``IN_FLIGHT_SHARE × max_num_seqs`` pages there: each task's share is that over the tasks reading through
the server once it is ready for them (a lone nightly task sends its whole batch).
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
from dataclasses import dataclass

from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.presets import Preset, plan_for_preset

log = logging.getLogger(__name__)

IN_FLIGHT_SHARE = 2.0  # pages at the server, all tasks together, per running-batch slot
MIN_TASKS, MAX_TASKS = 2, 64
NO_GPU_TASKS = 4  # extract tasks at once where no GPU is known (CPU engines: no model to share)
UNSIZED_MAX_NUM_SEQS = 256  # assumed running batch of a preset without model dimensions


def harmonic(n: int) -> float:
    """H(n) = 1 + 1/2 + … + 1/n: the expected longest of n exponential lengths, in means."""
    return sum(1.0 / k for k in range(1, n + 1))


def tasks_per_gpu(max_num_seqs: int, batch_pages: int) -> int:
    """Extract tasks that keep a running batch of ``max_num_seqs`` pages full with ``batch_pages``-page
    batches (within [MIN_TASKS, MAX_TASKS])."""
    if max_num_seqs < 1 or batch_pages < 1:
        raise ConfigError("max_num_seqs and batch_pages must be ≥ 1")
    wanted = math.ceil(max_num_seqs * harmonic(batch_pages) / batch_pages) + 1
    return min(MAX_TASKS, max(MIN_TASKS, wanted))


def in_flight_per_task(max_num_seqs: int, sharing: int) -> int:
    """Pages one task keeps at a server of ``max_num_seqs`` that ``sharing`` tasks (itself included) read."""
    return max(1, math.ceil(IN_FLIGHT_SHARE * max_num_seqs / max(1, sharing)))


@dataclass(frozen=True)
class TasksPlan:
    """Extract tasks per GPU and the numbers behind them."""

    tasks_per_gpu: int
    max_num_seqs: int
    batch_pages: int
    gpu_gib: float
    reason: str


def plan_tasks_per_gpu(preset: Preset, batch_pages: int, gpu_total_bytes: int) -> TasksPlan:
    """Tasks per GPU for ``preset`` on a GPU of ``gpu_total_bytes`` (its sizer's ``max_num_seqs``)."""
    gib = gpu_total_bytes / 2**30
    given = preset.engine_args.get("max_num_seqs")
    if given:
        seqs, source = int(given), "the preset's max_num_seqs"
    elif preset.dims is not None:
        seqs = plan_for_preset(preset, gpu_total_bytes=gpu_total_bytes).max_num_seqs
        source = f"the sizer's max_num_seqs on a GPU of {gib:.1f} GiB"
    else:
        seqs, source = UNSIZED_MAX_NUM_SEQS, "assumed max_num_seqs (the preset has no model dimensions)"
    tasks = tasks_per_gpu(seqs, batch_pages)
    reason = (
        f"{preset.name}: {seqs} pages run at once ({source}); a {batch_pages}-page batch holds on average "
        f"{batch_pages / harmonic(batch_pages):.0f} of them over its life → {tasks} extract tasks per GPU"
    )
    return TasksPlan(tasks, seqs, batch_pages, round(gib, 1), reason)


def visible_gpu_bytes() -> int | None:
    """Total memory of this machine's first GPU (``nvidia-smi``; no CUDA context), or None."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        log.warning("cannot read the GPU's memory with nvidia-smi: %s", e)
        return None
