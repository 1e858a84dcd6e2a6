"""Prepare Airflow for the DAGs: migrate the metadata database, create the pools, record them for preflight.

Run ``python -m chandra_ocr.airflow.setup [--gpu-slots N] [--gpu-memory-gib G]`` where the ``airflow``
command would run (same ``AIRFLOW_HOME`` / ``AIRFLOW__*`` settings); it is idempotent. Pool names and
the GPU pool's size come from ``CHANDRA_OCR_GPU_POOL``, ``CHANDRA_OCR_LOADER_POOL``,
``CHANDRA_OCR_GPU_SLOTS`` and ``CHANDRA_OCR_EXTRACT_TASKS_PER_GPU``; unset, the extract tasks per GPU
follow from the model's capacity on the GPU (chandra_ocr.ocr.capacity) for the deployment's preset and
batch size (``CHANDRA_OCR_PRESET``, ``CHANDRA_OCR_BATCH_PAGES``). ``--plan`` prints that figure only.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Mapping

from chandra_ocr.airflow.settings import POOLS_VARIABLE, DagSettings
from chandra_ocr.run_settings import BY_NAME

log = logging.getLogger(__name__)

DESCRIPTIONS = {
    "gpu": "chandra_ocr: OCR tasks, CHANDRA_OCR_EXTRACT_TASKS_PER_GPU slots per GPU (sharing its warm model)",
    "loader": "chandra_ocr: DuckDB writers (loader, vector feed); one slot, DuckDB allows one writer",
}


def extract_tasks_per_gpu(
    settings: DagSettings, environ: Mapping[str, str], gpu_memory_gib: float | None = None
) -> tuple[int, str]:
    """The extract tasks per GPU and why: ``CHANDRA_OCR_EXTRACT_TASKS_PER_GPU`` when set, else the
    capacity rule for the preset and batch size of the environment on a GPU of ``gpu_memory_gib``
    (else this machine's first GPU; with neither, `NO_GPU_TASKS`)."""
    if settings.extract_tasks_per_gpu is not None:
        return settings.extract_tasks_per_gpu, "CHANDRA_OCR_EXTRACT_TASKS_PER_GPU"
    from chandra_ocr.config import IngestOptions
    from chandra_ocr.ocr.capacity import NO_GPU_TASKS, plan_tasks_per_gpu, visible_gpu_bytes
    from chandra_ocr.ocr.presets import get_preset

    defaults = IngestOptions()
    preset, batch = (BY_NAME[name] for name in ("preset", "batch_pages"))
    name = environ.get(preset.env or "") or defaults.preset
    raw_pages = environ.get(batch.env or "")
    pages = batch.convert(raw_pages) if raw_pages else defaults.batch_pages
    if gpu_memory_gib is not None:
        gpu, where = int(gpu_memory_gib * 2**30), "--gpu-memory-gib"
    elif (seen := visible_gpu_bytes()) is not None:
        gpu, where = seen, "this machine's GPU"
    else:
        return NO_GPU_TASKS, (
            "no GPU on this machine: CPU engines; where the GPU workers are other machines, give "
            "--gpu-memory-gib (one GPU's memory) to size the pool from the model's capacity"
        )
    plan = plan_tasks_per_gpu(get_preset(name), pages, gpu)
    return plan.tasks_per_gpu, f"{plan.reason}, from {where}"


def setup_airflow(
    settings: DagSettings, *, migrate: bool = True, tasks_per_gpu: int | None = None
) -> dict[str, int]:
    """Migrate the metadata DB (``airflow db migrate``), create or resize the pools and record them.

    Uses Airflow's database models directly, like the ``airflow`` CLI: this runs where the
    scheduler's database is reachable, not inside a task. ``tasks_per_gpu`` None: `extract_tasks_per_gpu`
    for this environment. Returns pool name → slots.
    """
    from airflow.models.pool import Pool
    from airflow.models.variable import Variable
    from airflow.utils import db

    if migrate:
        db.upgradedb()
    if tasks_per_gpu is None:
        tasks_per_gpu = extract_tasks_per_gpu(settings, os.environ)[0]
    pools = settings.pools(tasks_per_gpu)
    for name, slots in pools.items():
        kind = "gpu" if name == settings.gpu_pool else "loader"
        Pool.create_or_update_pool(name, slots, DESCRIPTIONS[kind], include_deferred=False)
        log.info("pool %s: %d slot(s)", name, slots)
    Variable.set(
        POOLS_VARIABLE, pools, description="pools created by chandra_ocr.airflow.setup", serialize_json=True
    )
    return pools


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chandra_ocr.airflow.setup", description=__doc__)
    parser.add_argument("--gpu-slots", type=int, help="GPUs (default: $CHANDRA_OCR_GPU_SLOTS or 1)")
    parser.add_argument("--gpu-memory-gib", type=float, help="memory of one GPU worker's GPU in GiB, e.g. "
                        "79.6 for an H100 80GB (default: this machine's first GPU)")  # fmt: skip
    parser.add_argument("--plan", action="store_true", help="print the extract tasks per GPU and exit")
    parser.add_argument("--no-migrate", action="store_true", help="skip `airflow db migrate`")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = DagSettings.from_env(os.environ)
    if args.gpu_slots is not None:
        settings = dataclasses.replace(settings, gpu_slots=args.gpu_slots)
    per_gpu, why = extract_tasks_per_gpu(settings, os.environ, args.gpu_memory_gib)
    print(f"extract tasks per GPU: {per_gpu} ({why})")
    if args.plan:
        return 0
    pools = setup_airflow(settings, migrate=not args.no_migrate, tasks_per_gpu=per_gpu)
    ready = ", ".join(f"{name} ({slots} slot{'s' * (slots != 1)})" for name, slots in pools.items())
    print(f"pools ready: {ready}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
