#!/usr/bin/env sh
# Prepare Airflow for the chandra_ocr DAGs (idempotent): `airflow db migrate`, the pools
# chandra_ocr_gpu (CHANDRA_OCR_EXTRACT_TASKS_PER_GPU slots per GPU) and chandra_ocr_loader (1 slot), and the Variable
# chandra_ocr_pools that the DAGs' preflight task checks. Run it where `airflow` runs, e.g.
#   AIRFLOW_HOME=... scripts/airflow-setup.sh --gpu-slots 4
set -eu
PYTHON="${PYTHON:-$(dirname "$0")/../.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" -m chandra_ocr.airflow.setup "$@"
