"""A process pool for PDF work: per-task time limits enforced by killing the worker, capped memory.

MuPDF ignores Python signals (a crafted file can make it spin for minutes), so a stuck task
is ended by killing its process (pebble does that and starts a replacement). Workers cap
their address space, so a decompression bomb raises MemoryError instead of waking the OOM
killer.

Workers come from a forkserver by default. pebble forks replacements from a background thread at
any moment; a fork copies every file descriptor the parent has open at that instant. If another
thread of the parent is running a subprocess then (the cpu engine's Tesseract), the long-lived
worker keeps that child's pipe ends open, the child's stdin never sees EOF and its reader never
sees EOF either: the run hangs. A forkserver's children are forked from a process that runs no
other thread and holds none of the parent's descriptors. Only a caller whose process runs no
threads that create descriptors while the pool lives (the ``text`` engine: ``OcrEngine.threads``
is False) may ask for ``fork``: workers then start in milliseconds with the parent's modules
instead of a fresh interpreter importing PyMuPDF (~1.3 s per run here).

Every wait here has a deadline: pebble kills a task at its limit, so while the pool works some
task finishes within the largest running limit; ``in_order`` and ``render_stream`` fail the
tasks still pending when none finished for that long (plus ``_GRACE_S``), and beat/check the
stall watchdog while they wait.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import pickle
import resource
import signal
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, wait
from typing import Any, TypeVar

import pebble
import pymupdf
from PIL import Image

from chandra_ocr.document import PageRequest, RenderSpec
from chandra_ocr.errors import BadDocumentError, ChandraOcrError, ConfigError, StageTimeoutError
from chandra_ocr.pdf.render import render_page
from chandra_ocr.watchdog import WAKE_S, WATCHDOG

log = logging.getLogger(__name__)

T = TypeVar("T")

_PRELOAD = ["chandra_ocr.pdf.render"]  # imported once in the fork server (pymupdf takes seconds)
# Past a task's own limit: time for pebble to notice, kill the worker and start another (forkserver).
_GRACE_S = 30.0
_CLOSE_S = 30.0  # close() waits this long for the pool to wind down, then kills it
# pebble's pool threads poll in steps of ``CONSTS.sleep_unit`` (0.1 s): a pool's start and close each
# wait out about one step of its manager and message loops, ~0.15 s a pool and two pools a run
# (bench/born_digital.py's ``fixed_cost``). At 10 ms the two loops of a live pool wake ~200 times a
# second (microseconds each); deadlines and kills are unaffected (they are whole seconds).
POLL_S = 0.01
pebble.common.CONSTS.sleep_unit = POLL_S


class PdfWorkers:
    """A pool of ``workers`` processes, each limited to ``memory_limit_mb`` of address space.

    Use as a context manager. Futures fail with ``StageTimeoutError`` (time limit: the worker
    was killed), ``BadDocumentError`` (memory limit, or the worker died, e.g. MuPDF crashed),
    or whatever the task itself raised. ``fork=True`` forks workers from this process (see the
    module doc: only while it runs no native threads); their cap is then ``memory_limit_mb``
    on top of the address space they inherit.
    """

    def __init__(self, workers: int, memory_limit_mb: int, *, fork: bool = False) -> None:
        if workers < 1 or memory_limit_mb < 256:
            raise ConfigError("PdfWorkers needs workers ≥ 1 and memory_limit_mb ≥ 256")
        self.workers = workers
        self.memory_limit_mb = memory_limit_mb
        self._finished = False
        self._done = 0  # tasks of this pool that ended (done, failed or cancelled): its progress
        context: multiprocessing.context.BaseContext
        if fork:
            context = multiprocessing.get_context("fork")
        else:
            server = multiprocessing.get_context("forkserver")
            server.set_forkserver_preload(_PRELOAD)
            context = server
        self._pool = pebble.ProcessPool(
            max_workers=workers,
            initializer=_init_worker,
            initargs=(memory_limit_mb, fork),
            context=context,
        )

    def __enter__(self) -> PdfWorkers:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(cancel=exc_type is not None)

    def close(self, *, cancel: bool = False) -> None:
        """Stop the pool; with ``cancel`` pending tasks are dropped and running ones killed. A pool
        that has not wound down within ``_CLOSE_S`` is stopped (its workers killed)."""
        if cancel or self._finished:
            self._pool.stop()
        else:
            self._pool.close()
        try:
            self._pool.join(timeout=_CLOSE_S)
        except TimeoutError:
            log.warning("PDF workers still busy %g s after close; killing them", _CLOSE_S)
            self._pool.stop()
            self._pool.join(timeout=_CLOSE_S)

    def finish(self) -> None:
        """Every submitted task is done and no more will come: the pool winds down now (pebble notices
        within 0.1 s), while the caller does other work, and ``close`` then returns at once."""
        self._finished = True
        self._pool.stop()

    def submit(self, fn: Callable[..., T], *args: Any, timeout: float) -> Future[T]:
        """Run ``fn(*args)`` in a worker; killed after ``timeout`` seconds of running."""
        named = getattr(fn, "func", fn)  # functools.partial → the wrapped function's name
        return self._schedule(fn, args, timeout, getattr(named, "__name__", "task"))

    def submit_largest_first(
        self, fn: Callable[..., T], jobs: list[tuple], sizes: list[int], *, timeout: float
    ) -> list[Future[T]]:
        """``submit`` every job, the largest (by ``sizes``) first: a large document started last would
        keep one worker busy after the others ran dry. The futures come back in the order of ``jobs``."""
        futures: list[Future[T] | None] = [None] * len(jobs)
        for i in sorted(range(len(jobs)), key=lambda i: -sizes[i]):
            futures[i] = self.submit(fn, *jobs[i], timeout=timeout)
        return futures  # type: ignore[return-value]

    def _schedule(self, fn: Callable[..., T], args: tuple, timeout: float, what: str) -> Future[T]:
        source = self._pool.schedule(_guarded, args=(fn, *args), timeout=timeout)
        source.add_done_callback(self._ended)
        return _translated(source, what, timeout, self.memory_limit_mb)

    def _ended(self, _: Future) -> None:
        self._done += 1  # pebble's result thread alone runs these callbacks

    def in_order(self, futures: Sequence[Future[T]], stage: str) -> Iterator[Future[T]]:
        """Each of ``futures`` (from ``submit``) once it is done, in their order.

        While waiting, the stall watchdog is checked; when no task of the pool (``futures`` or others
        queued before them) finished for the largest limit among those pending plus ``_GRACE_S``, the
        pending futures fail with StageTimeoutError (their tasks are cancelled, running ones killed)."""
        # Waits are on the next future alone; the pool's progress is read only when a wait wakes empty.
        finished, progress_at = self._done, time.monotonic()
        for n, future in enumerate(futures):
            while not wait((future,), timeout=WAKE_S).done:
                WATCHDOG.check(_waiting_on(len(futures) - n, stage))
                now_finished, now = self._done, time.monotonic()
                limit = _stall_limit(futures[n:])
                if now_finished > finished:
                    finished, progress_at = now_finished, now
                elif now - progress_at >= limit:
                    _expire_all([f for f in futures if not f.done()], stage, limit)
            yield future

    def _wait_any(self, pending: Sequence[Future], stage: str) -> set[Future]:
        """Wait until one of ``pending`` (a render window) is done; returns the done ones. When none is
        done for the largest limit among them plus ``_GRACE_S``, they all fail (see ``in_order``)."""
        last = time.monotonic()
        while True:
            done, _ = wait(pending, timeout=WAKE_S, return_when=FIRST_COMPLETED)
            if done:
                return done
            WATCHDOG.check(_waiting_on(len(pending), stage))
            limit = _stall_limit(pending)
            if time.monotonic() - last >= limit:
                _expire_all(pending, stage, limit)
                return set(pending)

    def render_stream(
        self,
        requests: Iterable[PageRequest],
        spec: RenderSpec,
        *,
        timeout: float,
        window: int,
        passwords: Mapping[str, str] | None = None,
    ) -> Iterator[tuple[PageRequest, Exception | None]]:
        """Render pages as they come, yielding ``(request, None)`` with ``request.image`` set, or
        ``(request, error)``; completion order. At most ``window`` renders are queued or running,
        and ``requests`` is pulled lazily, so memory stays bounded. ``passwords``: doc_id → password.
        """
        pending: dict[Future[tuple[int, int, bytes]], PageRequest] = {}
        source = iter(requests)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < max(1, window):
                    request = next(source, None)
                    if request is None:
                        exhausted = True
                        break
                    password = (passwords or {}).get(request.doc_id)
                    args = (request.pdf_path, request.page_no, spec, password)
                    what = f"rendering page {request.page_no}"
                    pending[self._schedule(_render_raw, args, timeout, what)] = request
                if not pending:
                    return
                for future in self._wait_any(list(pending), "rendering"):
                    yield _collect(pending.pop(future), future)
        finally:
            for future in pending:
                future.cancel()


def _collect(
    request: PageRequest, future: Future[tuple[int, int, bytes]]
) -> tuple[PageRequest, Exception | None]:
    """Attach the rendered image to ``request``, or return the render's error."""
    try:
        width, height, data = future.result()
    except Exception as e:  # every failure becomes a per-page error record
        if not isinstance(e, ChandraOcrError):
            e = BadDocumentError(f"page {request.page_no} could not be rendered: {type(e).__name__}: {e}")
        return request, e
    request.image = Image.frombytes("RGB", (width, height), data)
    return request, None


def _render_raw(
    pdf_path: str, page_no: int, spec: RenderSpec, password: str | None
) -> tuple[int, int, bytes]:
    """Worker side of ``render_stream``: raw RGB bytes travel back (no PNG encode/decode)."""
    image = render_page(pdf_path, page_no, spec, password=password)
    return image.width, image.height, image.tobytes()


def _guarded(fn: Callable[..., T], *args: Any) -> T:
    """Worker side of ``submit``: MuPDF exceptions cannot be pickled back, so they are turned into
    MemoryError (allocation failures, MuPDF's size limits) or BadDocumentError (the rest)."""
    try:
        return fn(*args)
    except (MemoryError, ChandraOcrError):
        raise
    except Exception as e:
        message = str(e.args[0]) if e.args else str(e)
        if isinstance(e, pymupdf.mupdf.FzErrorLimit) or "malloc" in message:
            raise MemoryError(message) from None
        try:
            pickle.dumps(e)
        except Exception:
            raise BadDocumentError(f"{type(e).__name__}: {message}") from None
        raise


def _init_worker(limit_mb: int, forked: bool = False) -> None:
    """Worker initializer: cap the address space (huge allocations fail with MemoryError) and let
    SIGTERM kill at once: pebble's own handler is Python code, which cannot run while MuPDF is
    busy in C, so a stuck task would otherwise linger until pebble's SIGKILL three seconds later.
    (The pool holds the result channel's lock while it stops a worker.) A forked worker's cap
    counts from the address space it inherited."""
    limit = limit_mb * 1024 * 1024 + (_address_space() if forked else 0)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # MuPDF prints every repaired syntax error to stdout (thousands of lines for one hostile file,
    # straight into the task log); failures that matter come back as exceptions.
    pymupdf.TOOLS.mupdf_display_errors(False)
    # Text extraction makes many short-lived objects and few cycles: the collector ran every 700
    # allocations and walked everything a forked worker inherited (~3 % of its time).
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


def _address_space() -> int:
    """This process's mapped address space in bytes (VmSize)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _waiting_on(n: int, stage: str) -> Callable[[], str]:
    """What a wait on ``n`` tasks of ``stage`` waits for, as ``Watchdog.check`` asks (bound now)."""
    return lambda: f"{n} {stage} task(s) in the PDF workers"


def _stall_limit(futures: Sequence[Future]) -> float:
    """How long the pool may finish none of ``futures``: the largest limit among those still pending
    (each task's, from ``_translated``) plus ``_GRACE_S``."""
    return max((float(getattr(f, "limit_s", 0.0)) for f in futures if not f.done()), default=0.0) + _GRACE_S


def _expire_all(pending: Sequence[Future], stage: str, limit: float) -> None:
    """Fail the futures the pool never answered; their tasks are cancelled (running ones killed)."""
    log.error("%s: no PDF worker task finished for %.0f s; %d fail", stage, limit, len(pending))
    for future in pending:
        try:
            future.set_exception(
                StageTimeoutError(f"{stage}: no answer from the PDF workers within {limit:g} s")
            )
        except InvalidStateError:  # it finished meanwhile
            continue
        future.cancel_task()  # type: ignore[attr-defined]


def _translated(source: pebble.ProcessFuture, what: str, timeout: float, limit_mb: int) -> Future:
    """A plain Future mirroring ``source`` with pool failures turned into project errors."""
    target: Future = Future()
    target.limit_s = timeout  # type: ignore[attr-defined]

    def relay(done: pebble.ProcessFuture) -> None:
        if target.done():  # cancelled, or expired by a deadline
            return
        try:
            if done.cancelled():
                target.cancel()
                target.set_running_or_notify_cancel()
                return
            error = done.exception()
            if error is None:
                target.set_result(done.result())
            else:
                target.set_exception(_project_error(error, what, timeout, limit_mb))
        except InvalidStateError:  # expired between the check and the set
            return

    # Only a weak reference back to ``source``: a strong one would close a reference cycle (source →
    # relay → target → cancel_source → source) that keeps every finished render's pixels (tens of MB)
    # alive until the cyclic garbage collector happens to run.
    source_ref = weakref.ref(source)

    def cancel_task() -> None:
        pending = source_ref()
        if pending is not None:
            pending.cancel()

    def cancel_source(done: Future) -> None:
        if done.cancelled():
            cancel_task()

    target.add_done_callback(cancel_source)
    target.cancel_task = cancel_task  # type: ignore[attr-defined]
    source.add_done_callback(relay)  # type: ignore[arg-type]  # pebble's future is a Future subclass
    return target


def _project_error(error: BaseException, what: str, timeout: float, limit_mb: int) -> BaseException:
    """Map pool-level failures onto the project's exceptions; task exceptions pass unchanged."""
    if isinstance(error, TimeoutError):
        new: BaseException = StageTimeoutError(f"{what} exceeded its {timeout:g} s limit; worker killed")
    elif isinstance(error, MemoryError):
        detail = f": {error}" if str(error) else ""
        new = BadDocumentError(f"{what} ran out of memory (worker limit {limit_mb} MB){detail}")
    elif isinstance(error, pebble.ProcessExpired):
        new = BadDocumentError(f"{what} crashed its worker (exit code {error.exitcode})")
    else:
        return error
    new.__cause__ = error
    return new
