"""``core.hostname_callable`` of the test's Celery workers: both run on one machine, so each names itself."""

import os


def hostname() -> str:
    """The worker's name from ``SCALEOUT_WORKER_NAME``; Airflow records it as the task instance's host."""
    return os.environ["SCALEOUT_WORKER_NAME"]
