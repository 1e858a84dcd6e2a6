"""Prepare Airflow for the DAGs: migrate the metadata database, create the pools, record them for preflight.

Run ``python -m chandra_ocr.airflow.setup [--gpu-slots N]`` where the ``airflow`` command would
run (same ``AIRFLOW_HOME`` / ``AIRFLOW__*`` settings); it is idempotent. Pool names and the GPU
pool's size come from ``CHANDRA_OCR_GPU_POOL``, ``CHANDRA_OCR_LOADER_POOL``, ``CHANDRA_OCR_GPU_SLOTS``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from chandra_ocr.airflow.settings import POOLS_VARIABLE, DagSettings

log = logging.getLogger(__name__)

DESCRIPTIONS = {
    "gpu": "chandra_ocr: OCR tasks, CHANDRA_OCR_EXTRACT_TASKS_PER_GPU slots per GPU (sharing its warm model)",
    "loader": "chandra_ocr: DuckDB writers (loader, vector feed); one slot, DuckDB allows one writer",
}


def setup_airflow(settings: DagSettings, *, migrate: bool = True) -> dict[str, int]:
    """Migrate the metadata DB (``airflow db migrate``), create or resize the pools and record them.

    Uses Airflow's database models directly, like the ``airflow`` CLI: this runs where the
    scheduler's database is reachable, not inside a task. Returns pool name → slots.
    """
    from airflow.models.pool import Pool
    from airflow.models.variable import Variable
    from airflow.utils import db

    if migrate:
        db.upgradedb()
    pools = settings.pools()
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
    parser.add_argument("--no-migrate", action="store_true", help="skip `airflow db migrate`")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = DagSettings.from_env(os.environ)
    if args.gpu_slots is not None:
        settings = dataclasses.replace(settings, gpu_slots=args.gpu_slots)
    pools = setup_airflow(settings, migrate=not args.no_migrate)
    ready = ", ".join(f"{name} ({slots} slot{'s' * (slots != 1)})" for name, slots in pools.items())
    print(f"pools ready: {ready}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
