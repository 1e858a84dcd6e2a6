"""Process plumbing of task processes that start their own worker processes (no Airflow import)."""

from __future__ import annotations

import importlib.machinery
import multiprocessing
import os
import sys


def allow_worker_processes() -> None:
    """Let this task process start the PDF worker processes (``PdfWorkers``) under Airflow.

    Two things stand in the way, both harmless to undo in a task process, which joins its own
    workers. Celery's prefork pool runs billiard processes, which install themselves as
    ``multiprocessing``'s current process: daemonic, with an authkey that refuses to be pickled;
    Airflow 3 runs each task in a fork of one, where ``multiprocessing`` would then refuse to
    start children. And forkserver/spawn children re-run the parent's main script first: in a task
    process that is the ``airflow`` command, whose import fails there (tasks get no metadata-DB
    URL), so every worker would die at start; the workers need nothing from it.
    """
    current = multiprocessing.current_process()
    if current.daemon or not isinstance(current, multiprocessing.process.BaseProcess):
        config = current._config  # type: ignore[attr-defined]
        config["daemon"] = False
        authkey = multiprocessing.process.AuthenticationString  # type: ignore[attr-defined]  # not in typeshed
        config["authkey"] = authkey(os.urandom(32))
    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None and getattr(main, "__file__", None):
        # A module spec named "__main__" tells multiprocessing's children to leave main alone.
        main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
