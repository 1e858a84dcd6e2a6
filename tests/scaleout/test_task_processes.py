"""A task process forked from a Celery prefork pool process (as Airflow 3 runs tasks) starts PDF workers.

Real billiard (Celery's pool), a real ``os.fork`` like Airflow's task supervisor, and the real
``PdfWorkers`` pool in the forked process, whose main module is a script that cannot be imported
there — as the ``airflow`` command cannot in a task process (no metadata-DB URL). The scenario
runs in a fresh interpreter, so that nothing this test process started (a forkserver) leaks in.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

SCENARIO = """
import os, sys, types
import billiard
from chandra_ocr.airflow.task_processes import allow_worker_processes
from chandra_ocr.pdf.workers import PdfWorkers

def task_process(fixed):
    pid = os.fork()
    if pid == 0:  # the task process
        code = 1
        try:
            main = types.ModuleType("__main__")
            main.__file__ = sys.argv[2]  # like the `airflow` console script: a path, no module spec
            sys.modules["__main__"] = main
            if fixed:
                allow_worker_processes()
            with PdfWorkers(1, 1024) as workers:
                code = 0 if workers.submit(abs, -3, timeout=30).result() == 3 else 2
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

if __name__ == "__main__":
    with billiard.Pool(1) as pool:
        (code,) = pool.map(task_process, [sys.argv[1] == "fixed"])
    sys.exit(code)
"""


def _scenario(tmp_path: Path, mode: str) -> int:
    script = tmp_path / "airflow_like.py"
    script.write_text("raise RuntimeError('the main script must not run in a PDF worker')\n")
    probe = tmp_path / "probe.py"
    probe.write_text(SCENARIO)
    return subprocess.run([sys.executable, str(probe), mode, str(script)], timeout=120).returncode


def test_a_task_process_of_a_celery_pool_process_can_start_pdf_workers(tmp_path: Path):
    assert _scenario(tmp_path, "unfixed") != 0  # no children, or children that die at start
    assert _scenario(tmp_path, "fixed") == 0


def test_an_ordinary_process_keeps_its_identity():
    from chandra_ocr.airflow.task_processes import allow_worker_processes

    before = multiprocessing.current_process().authkey
    allow_worker_processes()
    assert multiprocessing.current_process().authkey == before
