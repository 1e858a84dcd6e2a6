"""Claims: which run works on which document, so that runs overlapping on one knowledge base do not
both read it, and a run that died holds nothing up.

- Every run has an owner record, ``staging/<run>/.owner.json`` (run id, host, pid, lease). A CLI run is
  *process-bound* (``process_run``): it holds a POSIX lock on ``staging/<run>/.owner.lock`` for its
  life and is alive exactly while the lock is held; the kernel drops the lock when the process dies.
  An Airflow run has no process that lives through it (each task is a process, maybe on another
  host): every claim a task makes renews the run's lease (``LEASE_S``), and the run is alive until
  the lease runs out, or until another run of its *series* starts: the runs of an Airflow DAG never
  overlap (``max_active_runs=1``), so a rerun after a failure takes its failed predecessor's claims.
- A claim, ``claims/<doc_id>``, names the run that took it; a claim whose run is not alive is free.
  Claims are read and written under a short lock (``claims/.lock``): two runs never both take one.
- ``sweep`` removes what dead runs left: their claims, and their staged rows (a process-bound run's
  at once; a lease-bound run's ``KEEP_S`` after its lease ran out, so that an Airflow task cleared
  and rerun days later still finds them).

Claims only save work: whatever they say, the loader loads a document once (store/duckdb_store.py).
POSIX locks (``lockf``), not ``flock``: a PDF worker forked while one is held does not inherit it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass

from chandra_ocr.store.atomic import write_text_atomic
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.store.locks import take_lock

log = logging.getLogger(__name__)

LEASE_S = 3600.0  # an Airflow run none of whose tasks started for this long is taken for dead
KEEP_S = 7 * 86400.0  # how long a dead lease-bound run's staged rows are kept
LOCK_WAIT_S = 60.0  # the claims lock is held for milliseconds; past this something is wrong
HOST = socket.gethostname()
_IN_PROCESS = threading.Lock()  # POSIX locks do not exclude threads of one process from each other


@dataclass(frozen=True)
class Owner:
    """A run's owner record: who runs it, and until when it counts as alive (None: while its lock is held)."""

    run_id: str
    host: str
    pid: int
    lease_until: float | None
    series: str | None = None  # the Airflow DAG of the run: two runs of one series never overlap


def _owner_file(layout: KbLayout, run_id: str):
    return layout.staging_dir(run_id) / ".owner.json"


def _lock_file(layout: KbLayout, run_id: str):
    return layout.staging_dir(run_id) / ".owner.lock"


def read_owner(layout: KbLayout, run_id: str) -> Owner | None:
    """The run's owner record; None once the run ended (or before it started)."""
    try:
        return Owner(**json.loads(_owner_file(layout, run_id).read_text(encoding="utf-8")))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _write_owner(layout: KbLayout, owner: Owner) -> None:
    write_text_atomic(_owner_file(layout, owner.run_id), json.dumps(asdict(owner)))


@contextmanager
def process_run(layout: KbLayout, run_id: str) -> Iterator[None]:
    """Register ``run_id`` as alive while this process runs the block (the CLI's runs); at its end,
    however it ends, the run's claims are released and what it staged is removed."""
    layout.staging_dir(run_id).mkdir(parents=True, exist_ok=True)
    fd = os.open(_lock_file(layout, run_id), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new run id: nobody else holds it
        _write_owner(layout, Owner(run_id, HOST, os.getpid(), None))
        yield
    finally:
        try:
            end_run(layout, run_id)
        finally:
            os.close(fd)


def renew(layout: KbLayout, run_id: str, series: str | None = None) -> None:
    """Extend the lease of a lease-bound run (every Airflow task of the run calls this through ``claim``);
    a process-bound run of this process needs none."""
    owner = read_owner(layout, run_id)
    if owner is not None and owner.lease_until is None and _this_process(owner):
        return
    _write_owner(layout, Owner(run_id, HOST, os.getpid(), time.time() + LEASE_S, series))


def alive(layout: KbLayout, run_id: str, series: str | None = None) -> bool:
    """Whether ``run_id`` may still load what it claimed: its lease runs, or its process holds its lock.
    Asked by a run of ``series``, another run of the same series is over."""
    owner = read_owner(layout, run_id)
    if owner is None or (series is not None and owner.series == series):
        return False
    if owner.lease_until is not None:
        return time.time() < owner.lease_until
    return _this_process(owner) or _lock_held(_lock_file(layout, run_id))


def _this_process(owner: Owner) -> bool:
    return owner.host == HOST and owner.pid == os.getpid()


def _lock_held(path: os.PathLike) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # EAGAIN / EACCES: another process holds it
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)  # this process holds no other lock on that file (it is another run's)


def claim(layout: KbLayout, run_id: str, doc_ids: Iterable[str], series: str | None = None) -> dict[str, str]:
    """Take the claims of ``doc_ids`` for ``run_id`` of ``series`` (renewing its lease) → doc_id → run
    id of those another live run holds (this run must leave them)."""
    renew(layout, run_id, series)
    taken: dict[str, str] = {}
    living: dict[str, bool] = {}
    with _claims_lock(layout):
        for doc_id in doc_ids:
            other = _claimant(layout, doc_id)
            if other == run_id:
                continue
            if other is not None and living.setdefault(other, alive(layout, other, series)):
                taken[doc_id] = other
            else:
                write_text_atomic(layout.claim(doc_id), run_id)
    return taken


def _claimant(layout: KbLayout, doc_id: str) -> str | None:
    try:
        return layout.claim(doc_id).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def end_run(layout: KbLayout, run_id: str) -> None:
    """The run is over: release its claims and remove its staging folder (owner record included)."""
    with _claims_lock(layout):
        for path in _claim_files(layout):
            with suppress(FileNotFoundError):
                if path.read_text(encoding="utf-8") == run_id:
                    path.unlink()
    shutil.rmtree(layout.staging_dir(run_id), ignore_errors=True)
    with suppress(OSError):  # the last run's folder gone: no empty staging folder is left behind
        layout.staging_root.rmdir()


def sweep(layout: KbLayout) -> int:
    """Remove the claims and staged rows that dead runs left (see the module doc) → runs swept."""
    now = time.time()
    dead: list[str] = []
    if layout.staging_root.is_dir():
        for folder in layout.staging_root.iterdir():
            owner = _folder_owner(folder)
            if owner is None:
                gone = folder.is_dir() and now - folder.stat().st_mtime > LEASE_S  # never registered
            elif owner.lease_until is None:
                gone = not alive(layout, owner.run_id)
            else:
                gone = now > owner.lease_until + KEEP_S
            if gone:
                log.info("removing what run %s left in %s", owner.run_id if owner else folder.name, folder)
                shutil.rmtree(folder, ignore_errors=True)
                dead.append(folder.name)
    with _claims_lock(layout):
        living: dict[str, bool] = {}
        for path in _claim_files(layout):
            with suppress(FileNotFoundError):
                run_id = path.read_text(encoding="utf-8")
                if not living.setdefault(run_id, alive(layout, run_id)):
                    path.unlink()
    return len(dead)


def _folder_owner(folder) -> Owner | None:
    try:
        return Owner(**json.loads((folder / ".owner.json").read_text(encoding="utf-8")))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _claim_files(layout: KbLayout):
    if not layout.claims_dir.is_dir():
        return []
    return [p for p in layout.claims_dir.iterdir() if not p.name.startswith(".")]


@contextmanager
def _claims_lock(layout: KbLayout) -> Iterator[None]:
    """The claims lock: held for the few file operations of one call, waited for up to ``LOCK_WAIT_S``."""
    layout.claims_dir.mkdir(parents=True, exist_ok=True)
    path = layout.claims_dir / ".lock"
    with _IN_PROCESS:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            take_lock(
                lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                LOCK_WAIT_S,
                f"{path} was held for over {LOCK_WAIT_S:.0f} s",
                max_delay_s=0.2,
            )
            yield
        finally:
            os.close(fd)  # releases the lock
