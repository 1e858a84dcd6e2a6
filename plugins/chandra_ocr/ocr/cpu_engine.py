"""The ``cpu`` engine: Tesseract's command-line program, one single-threaded process per page.

The CLI rather than tesserocr/pytesseract: neither is installed, a child process can be killed
when a page exceeds its time limit (an in-process C++ call cannot), its memory goes back to the
OS with it, and the threads that drive the processes only wait, so no GIL is held while reading.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from PIL import Image

from chandra_ocr.document import PageRequest, PageResult, RenderSpec
from chandra_ocr.errors import ConfigError, EngineError, StageTimeoutError
from chandra_ocr.ocr.tesseract_tsv import Word, mean_confidence, parse_tsv, words_to_blocks
from chandra_ocr.watchdog import WAKE_S, WATCHDOG

log = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install tesseract-ocr tesseract-ocr-eng"
_VALID_PSM = (1, 3, 4, 5, 6, 7, 11, 12, 13)  # 0 (OSD only) and 2 (no OCR) produce no text
_REAP_S = 5.0  # after a kill: how long to wait for a tesseract process's pipes and its exit


@dataclass(frozen=True)
class CpuOptions:
    """Options of the Tesseract engine (build from a mapping with ``config.from_mapping``)."""

    lang: str = "eng"  # Tesseract language(s), e.g. "eng+deu"
    workers: int = 2  # parallel tesseract processes, each limited to one thread
    psm: int = 1  # page segmentation mode; 1 = automatic with orientation detection (needs osd)
    timeout_s: float = 120.0  # per page; the process is killed and the page fails after this
    dpi: int = 300  # render resolution of pages for this engine
    max_pixels: int = 12_000_000  # render cap (a Letter/A4 page at 300 dpi is ~8.7 Mpx)
    min_confidence: float = 30.0  # drop words below this that have no letter or digit (noise)
    flip_below: float = 50.0  # mean word confidence below this → also read the page turned 180°
    tesseract_cmd: str = "tesseract"  # program name (looked up on PATH) or path
    tessdata_dir: str | None = None  # passed as --tessdata-dir when set

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError("workers must be ≥ 1")
        if self.psm not in _VALID_PSM:
            raise ConfigError(f"psm must be one of {_VALID_PSM}, got {self.psm}")
        if self.timeout_s <= 0:
            raise ConfigError("timeout_s must be > 0")
        if self.dpi < 72 or self.max_pixels < 100_000:
            raise ConfigError("dpi must be ≥ 72 and max_pixels ≥ 100000")
        if not self.lang or any(not part for part in self.lang.split("+")):
            raise ConfigError(f"lang must be like 'eng' or 'eng+deu', got {self.lang!r}")


class CpuEngine:
    """Tesseract on the CPU, implementing `OcrEngine`; pages render at ``render_spec``."""

    name = "cpu"
    threads = True  # threads that spawn tesseract processes (their pipes)
    reads_images = True

    def __init__(self, options: CpuOptions | None = None) -> None:
        self.options = options or CpuOptions()
        self.model: str | None = None
        self.render_spec = RenderSpec(dpi=self.options.dpi, max_pixels=self.options.max_pixels)
        # Rendered pages the caller queues ahead: rendering outpaces Tesseract, and each queued page
        # is up to max_pixels × 3 bytes in the caller's process (16 would hold ~600 MB at 300 dpi).
        self.in_flight_pages: int | None = 2 * self.options.workers
        self._binary: str | None = None
        self._env: dict[str, str] = {}
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._counts = {"pages": 0, "failed": 0, "timeouts": 0, "turned": 0}
        self._busy_s = 0.0

    def start(self) -> None:
        """Find the tesseract program and its languages; raises ConfigError when either is missing."""
        if self._binary is not None:
            return
        binary = shutil.which(self.options.tesseract_cmd)
        if binary is None:
            raise ConfigError(
                f"tesseract program {self.options.tesseract_cmd!r} not found on PATH; "
                f"install it, e.g. `{INSTALL_HINT}`"
            )
        # Tesseract's OpenMP threads make it several times slower on a busy machine; we
        # parallelise across pages instead. The rest of the environment (TESSDATA_PREFIX) is kept.
        self._env = dict(os.environ, OMP_THREAD_LIMIT="1")
        version = self._call(binary, "--version").split()[1]
        self._check_languages(binary)
        self._binary, self.model = binary, f"tesseract-{version}"
        log.info("cpu engine: %s at %s, lang=%s", self.model, binary, self.options.lang)

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Yield one result per request in completion order, with at most ``workers`` pages in flight.

        Requests are pulled lazily; one without ``image`` is rendered here (in the calling
        thread, as PyMuPDF is not thread-safe) at ``render_spec``. Failed pages come back as
        ``status="failed"`` results; nothing is raised for a single page.
        """
        self.start()
        source = iter(requests)
        pending: dict[Future[PageResult], tuple[PageRequest, float]] = {}
        pool = ThreadPoolExecutor(self.options.workers, thread_name_prefix="tesseract")
        try:
            while True:
                while len(pending) < self.options.workers:
                    request = next(source, None)
                    if request is None:
                        break
                    image, error = self._image_of(request)
                    if image is None:
                        yield self._failed(request, error, 0.0)
                        continue
                    pending[pool.submit(self._read_page, request, image)] = (request, time.monotonic())
                if not pending:
                    return
                yield from self._next_results(pending)
        finally:  # the consumer stopped early (or failed): drop queued pages, kill running ones
            for future in pending:
                future.cancel()
            if pending:
                self._kill_all()
                wait(pending, timeout=2 * _REAP_S)  # the killed processes are reaped by their threads
            pool.shutdown(wait=False, cancel_futures=True)

    def _next_results(
        self, pending: dict[Future[PageResult], tuple[PageRequest, float]]
    ) -> Iterator[PageResult]:
        """The results of the pages that finish next. A page whose thread has not answered within its
        deadline (``timeout_s`` plus the time to reap killed processes) fails; its process is killed."""
        done, _ = wait(pending, timeout=WAKE_S, return_when=FIRST_COMPLETED)
        for future in done:
            pending.pop(future)
            yield future.result()
        if done:
            return
        WATCHDOG.check(lambda: f"tesseract on {len(pending)} page(s)")
        limit = self.options.timeout_s + 3 * _REAP_S
        for future, (request, since) in list(pending.items()):
            if time.monotonic() - since > limit:
                pending.pop(future)
                self._kill_all()
                yield self._failed(request, f"tesseract gave no answer within {limit:g} s", limit)

    def close(self) -> None:
        """Kill any tesseract process still running; the engine can be started again."""
        self._kill_all()
        self._binary = None

    def metrics(self) -> dict:
        """Pages read, failed and timed out, and the summed per-page busy seconds."""
        with self._lock:
            return {**self._counts, "busy_s": round(self._busy_s, 3), "workers": self.options.workers}

    def _image_of(self, request: PageRequest) -> tuple[Image.Image | None, str]:
        if request.image is not None:
            return request.image, ""
        from chandra_ocr.pdf.render import render_page

        try:
            return render_page(request.pdf_path, request.page_no, self.render_spec), ""
        except Exception as e:  # MuPDF raises its own exception types (FzErrorFormat, ...), not only these
            return None, f"render failed: {type(e).__name__}: {e}"

    def _read_page(self, request: PageRequest, image: Image.Image) -> PageResult:
        started = time.perf_counter()
        deadline = started + self.options.timeout_s
        image = ocr_ready(image)
        dpi = round(image.width * 72 / request.width_pt) if request.width_pt > 0 else self.options.dpi
        dpi = min(max(dpi, 70), 2400)
        try:
            words = self._words(image, dpi, deadline)
            confidence = mean_confidence(words)
            if confidence is not None and confidence < self.options.flip_below:
                words = self._try_upside_down(image, dpi, deadline, words, confidence)
        except (StageTimeoutError, EngineError) as e:
            return self._failed(request, str(e), time.perf_counter() - started)
        scale = (request.width_pt / image.width, request.height_pt / image.height)
        blocks = words_to_blocks(
            words, scale, (request.width_pt, request.height_pt), self.options.min_confidence
        )
        elapsed = time.perf_counter() - started
        with self._lock:
            self._counts["pages"] += 1
            self._busy_s += elapsed
        return PageResult.of(
            request, self.name, self.model, text="\n\n".join(block.text for block in blocks), blocks=blocks,
            finish_reason="stop", latency_ms=elapsed * 1000,
        )  # fmt: skip

    def _try_upside_down(
        self, image: Image.Image, dpi: int, deadline: float, words: list[Word], confidence: float
    ) -> list[Word]:
        """Tesseract's OSD turns only vertical text; a page scanned upside down reads as low-confidence
        garbage. Read it turned by 180° and keep the more confident reading (boxes mapped back)."""
        try:
            turned = self._words(image.rotate(180), dpi, deadline)
        except StageTimeoutError:
            return words
        if (mean_confidence(turned) or 0.0) <= confidence:
            return words
        with self._lock:
            self._counts["turned"] += 1
        w, h = image.size
        return [
            replace(word, box=(w - word.box[2], h - word.box[3], w - word.box[0], h - word.box[1]))
            for word in turned
        ]

    def _words(self, image: Image.Image, dpi: int, deadline: float) -> list[Word]:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=1)
        return parse_tsv(self._tesseract(buffer.getvalue(), dpi, deadline))

    def _tesseract(self, png: bytes, dpi: int, deadline: float) -> str:
        """Run one tesseract process on ``png`` until ``deadline``; its TSV output.

        Raises StageTimeoutError (process killed) or EngineError (non-zero exit)."""
        o = self.options
        cmd = [self._binary or o.tesseract_cmd, "stdin", "stdout", "--dpi", str(dpi), "--psm", str(o.psm)]
        cmd += ["-l", o.lang] + (["--tessdata-dir", o.tessdata_dir] if o.tessdata_dir else []) + ["tsv"]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._env
        )
        with self._lock:
            self._procs.add(proc)
        try:
            out, err = proc.communicate(png, timeout=max(deadline - time.perf_counter(), 0.001))
        except subprocess.TimeoutExpired as e:
            _reap(proc)
            raise StageTimeoutError(f"tesseract timed out after {o.timeout_s:g} s") from e
        finally:
            with self._lock:
                self._procs.discard(proc)
        if proc.returncode != 0:
            detail = err.decode(errors="replace").strip()[-500:]
            raise EngineError(f"tesseract exited with status {proc.returncode}: {detail}")
        return out.decode("utf-8", errors="replace")

    def _failed(self, request: PageRequest, error: str, elapsed_s: float) -> PageResult:
        log.warning("cpu engine: %s page %d failed: %s", request.doc_id, request.page_no, error)
        with self._lock:
            self._counts["failed"] += 1
            self._counts["timeouts"] += "timed out" in error
        return PageResult.of(request, self.name, self.model, error=error, latency_ms=elapsed_s * 1000)

    def _kill_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            proc.kill()

    def _call(self, binary: str, *args: str) -> str:
        try:
            done = subprocess.run([binary, *args], capture_output=True, env=self._env, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError) as e:
            raise ConfigError(
                f"cannot run {binary} {' '.join(args)}: {e}; reinstall: `{INSTALL_HINT}`"
            ) from e
        return done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")

    def _check_languages(self, binary: str) -> None:
        args = ("--list-langs",) + (
            ("--tessdata-dir", self.options.tessdata_dir) if self.options.tessdata_dir else ()
        )
        listing = self._call(binary, *args).splitlines()
        installed = {line.strip() for line in listing[1:]}
        wanted = self.options.lang.split("+") + (["osd"] if self.options.psm == 1 else [])
        missing = [lang for lang in wanted if lang not in installed]
        if missing:
            packages = " ".join(f"tesseract-ocr-{lang}" for lang in missing)
            raise ConfigError(
                f"tesseract language data missing: {', '.join(missing)} (installed: {sorted(installed)}); "
                f"install it, e.g. `apt-get install {packages}`"
                + (" or set psm=3" if "osd" in missing else "")
            )


def _reap(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and collect it within bounded time, even if another process holds its pipes open
    (its output is then dropped: the pipes are closed without reading them to EOF)."""
    proc.kill()
    try:
        proc.communicate(timeout=_REAP_S)
    except subprocess.TimeoutExpired:
        log.warning("tesseract pid %d: output pipes still open after kill; closing them", proc.pid)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(timeout=_REAP_S)
        except subprocess.TimeoutExpired:
            log.error("tesseract pid %d did not exit %g s after SIGKILL", proc.pid, 2 * _REAP_S)


def ocr_ready(image: Image.Image) -> Image.Image:
    """The image as 8-bit grey or RGB (1-bit, palette, alpha and 16-bit images converted)."""
    if image.mode in ("L", "RGB"):
        return image
    if image.mode == "1":
        return image.convert("L")
    if image.mode in ("LA", "RGBA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if image.mode.startswith("I;16"):
        return image.point(lambda value: value / 256).convert("L")
    return image.convert("RGB")
