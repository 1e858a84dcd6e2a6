"""A task process forked from a Celery prefork pool process (as Airflow 3 runs tasks) starts PDF workers.

Real billiard (Celery's pool), a real ``os.fork`` like Airflow's task supervisor, and the real
``PdfWorkers`` pool in the forked process, whose main module is a script that cannot be imported
there — as the ``airflow`` command cannot in a task process (no metadata-DB URL).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import billiard

from chandra_ocr.airflow.task_processes import allow_worker_processes
from chandra_ocr.pdf.workers import PdfWorkers


def _task_process(args: tuple[bool, str]) -> int:
    """In a billiard pool process: fork a task process that starts a PdfWorkers pool; its exit code."""
    fixed, main_script = args
    pid = os.fork()
    if pid == 0:  # the task process
        code = 1
        try:
            main = types.ModuleType("__main__")
            main.__file__ = main_script  # like the `airflow` console script: a path, no module spec
            sys.modules["__main__"] = main
            if fixed:
                allow_worker_processes()
            with PdfWorkers(1, 1024) as workers:
                code = 0 if workers.submit(abs, -3, timeout=30).result() == 3 else 2
        except BaseException:  # the child must never return into the pool's code
            code = 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_task_process_of_a_celery_pool_process_can_start_pdf_workers(tmp_path: Path):
    script = tmp_path / "airflow_like.py"
    script.write_text("raise RuntimeError('the main script must not run in a PDF worker')\n")
    with billiard.Pool(1) as pool:
        unfixed, fixed = pool.map(_task_process, [(False, str(script)), (True, str(script))])
    assert unfixed != 0  # what the workers hit without it: no children, or children that die at start
    assert fixed == 0


def test_an_ordinary_process_keeps_its_identity():
    import multiprocessing

    before = multiprocessing.current_process().authkey
    allow_worker_processes()
    assert multiprocessing.current_process().authkey == before
