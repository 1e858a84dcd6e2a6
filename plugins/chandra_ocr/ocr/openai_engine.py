"""The ``openai`` engine: pages sent to an OpenAI-compatible vLLM server, results yielded as they finish.

An ``openai.AsyncOpenAI`` client runs on an event loop in a background thread, so ``run`` stays a
plain synchronous iterator. At most ``max_in_flight`` requests are open at once; the next page is
pulled from the caller's iterable only when a slot frees up. Each request has a time limit and is
retried with exponential backoff on connection errors, timeouts, 429 and 5xx; when the retries run
out the whole run raises `EngineError` (the caller writes nothing for the batch) — it never hangs.
Pages are judged and retried with rising temperature exactly as in the in-process engine
(`validity`). The API key is never logged and never put into an exception message.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chandra_ocr.document import PageRequest, PageResult
from chandra_ocr.errors import ConfigError, EngineError
from chandra_ocr.ocr.presets import Preset
from chandra_ocr.ocr.validity import (
    DEFAULT_REPETITION_DETECTION,
    PageAttempts,
    failed_result,
    sampling_fields,
)
from chandra_ocr.ocr.vlm import VlmEngine
from chandra_ocr.watchdog import WAKE_S, WATCHDOG

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 30.0
_DONE = object()


@dataclass(frozen=True)
class ServerOptions:
    """Where the server is and how hard to try; ``api_key`` is kept out of ``repr``."""

    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None  # served model name; None: the preset's model id, or the server's only model
    max_in_flight: int = 64  # open requests at once
    timeout_s: float = 600.0  # per request (a long page at a slow server still finishes)
    max_retries: int = 3  # per request, on connection errors, timeouts, 429 and 5xx
    backoff_s: float = 1.0  # delay before the first retry; doubles each time (at most 30 s)
    max_attempts: int | None = None  # None: one attempt per temperature of the preset
    repetition_detection: Mapping[str, int] | None = field(
        default_factory=lambda: dict(DEFAULT_REPETITION_DETECTION)
    )  # sent as vLLM's `repetition_detection` request field; None for servers without it
    seed: int | None = None  # per-attempt sampling seeds derived from this
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # more vLLM request fields, e.g. ignore_eos

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.max_in_flight < 1 or self.max_retries < 0:
            raise ConfigError("max_in_flight must be ≥ 1 and max_retries ≥ 0")
        if self.timeout_s <= 0 or self.backoff_s < 0:
            raise ConfigError("timeout_s must be > 0 and backoff_s ≥ 0")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError("max_attempts must be ≥ 1")


class OpenAIEngine(VlmEngine):
    """Client of a vLLM OpenAI-compatible server, implementing `OcrEngine` for one preset."""

    name = "openai"

    def __init__(self, preset: Preset, options: ServerOptions | None = None) -> None:
        self.options = o = options or ServerOptions()
        super().__init__(preset, model=o.model, in_flight_pages=o.max_in_flight, max_attempts=o.max_attempts)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._openai: Any = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Open the client and check the server answers and serves the model; raises EngineError."""
        if self._client is not None:
            return
        import openai

        self._openai = openai
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openai-engine-loop", daemon=True)
        self._thread.start()
        self._client = openai.AsyncOpenAI(
            base_url=self.options.base_url,
            api_key=self.options.api_key or "EMPTY",
            max_retries=0,  # retries are ours: logged, bounded, and mapped to EngineError
            timeout=self.options.timeout_s,
            http_client=_http_client(openai, self.options.max_in_flight),
        )
        try:
            self.model = self._call(self._check_server())
        except BaseException:
            self.close()
            raise
        log.info(
            "server %s serves %s; up to %d requests in flight",
            self.options.base_url,
            self.model,
            self.options.max_in_flight,
        )

    def close(self) -> None:
        """Close the client and stop the event loop. Idempotent."""
        client, self._client = self._client, None
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if client is not None:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()

    def metrics(self) -> dict:
        """The server and the client limits used."""
        opts = self.options
        return {
            "base_url": opts.base_url,
            "served_model": self.model,
            "max_in_flight": opts.max_in_flight,
            "timeout_s": opts.timeout_s,
            "max_retries": opts.max_retries,
        }

    def _request_deadline_s(self) -> float:
        """The longest one request may take with all its retries and their backoff."""
        o = self.options
        return (o.timeout_s + _MAX_BACKOFF_S) * (o.max_retries + 1) + 10.0

    def _call(self, coro: Any) -> Any:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=self._request_deadline_s())
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise EngineError(
                f"server {self.options.base_url} gave no answer within {self._request_deadline_s():g} s"
            ) from None

    async def _check_server(self) -> str:
        """List the served models (proves the server is up and accepts the key); returns the model to use."""
        timeout = min(30.0, self.options.timeout_s)
        page = await self._with_retries(lambda: self._client.models.list(timeout=timeout), "the health check")
        served = [m.id for m in page.data]
        wanted = self.options.model
        if wanted is not None and wanted not in served:
            raise EngineError(f"server {self.options.base_url} does not serve {wanted!r}; it serves {served}")
        if wanted is None:
            if self.preset.model_id in served:
                return self.preset.model_id
            if len(served) != 1:
                raise EngineError(f"server {self.options.base_url} serves {served}: set the `model` option")
            return served[0]
        return wanted

    async def _with_retries(self, call: Callable[[], Any], what: str) -> Any:
        """Await ``call()``, retrying transient failures with exponential backoff; else EngineError."""
        oa = self._openai
        transient = (oa.APIConnectionError, oa.RateLimitError, oa.InternalServerError)  # timeouts included
        fatal = (oa.AuthenticationError, oa.PermissionDeniedError, oa.NotFoundError)
        delay, tries = self.options.backoff_s, self.options.max_retries + 1
        for attempt in range(1, tries + 1):
            try:
                return await call()
            except fatal as e:
                raise EngineError(f"server {self.options.base_url} refused {what}: {_describe(e)}") from None
            except transient as e:
                if attempt == tries:
                    raise EngineError(
                        f"server {self.options.base_url} failed {what} after {tries} tries: {_describe(e)}"
                    ) from None
                log.warning(
                    "server %s: %s during %s; retry %d/%d in %.1f s",
                    self.options.base_url,
                    _describe(e),
                    what,
                    attempt,
                    tries - 1,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(max(delay, 0.05) * 2, _MAX_BACKOFF_S)
        raise AssertionError("unreachable")

    # -- the stream --------------------------------------------------------------------------

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Read a stream of rendered pages; yields one result per request in completion order.

        Raises EngineError when the server is unreachable or stops answering (after retries).
        """
        if self._client is None or self._loop is None:
            raise EngineError("OpenAIEngine.run() before start()")
        self._call(self._check_server())
        out: queue.Queue = queue.Queue()
        driver = asyncio.run_coroutine_threadsafe(self._drive(iter(requests), out), self._loop)
        # a page's attempts, each a request with its retries (the slots are served in parallel)
        deadline_s = self._request_deadline_s() * len(self.temperatures)
        try:
            while (item := self._next(out, deadline_s)) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            driver.cancel()

    def _next(self, out: queue.Queue, deadline_s: float) -> Any:
        """The driver's next item; EngineError when nothing came for ``deadline_s``."""
        since = time.monotonic()
        while True:
            try:
                return out.get(timeout=WAKE_S)
            except queue.Empty:
                WATCHDOG.check(lambda: f"the server {self.options.base_url}")
                if time.monotonic() - since > deadline_s:
                    raise EngineError(
                        f"server {self.options.base_url} returned no page for {deadline_s:g} s"
                    ) from None

    async def _drive(self, it: Iterator[PageRequest], out: queue.Queue) -> None:
        """Pull pages as slots free up, run each as a task, hand results (or the failure) to ``out``."""
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(self.options.max_in_flight)
        tasks: set[asyncio.Task] = set()
        failure: list[BaseException] = []

        def finished(task: asyncio.Task) -> None:
            tasks.discard(task)
            slots.release()
            if task.cancelled():
                return
            if task.exception() is not None:
                if not failure:
                    failure.append(task.exception())  # type: ignore[arg-type]
                    for other in tasks:
                        other.cancel()
                return
            out.put(task.result())

        try:
            while not failure:
                await slots.acquire()
                req = None if failure else await loop.run_in_executor(None, next, it, None)
                if req is None or failure:  # the input ended, or a page failed the run meanwhile
                    slots.release()
                    break
                task = loop.create_task(self._page(req))
                tasks.add(task)
                task.add_done_callback(finished)
            while tasks:
                await asyncio.wait(set(tasks))
        except BaseException as e:  # the input iterator failed, or we were cancelled
            failure.append(e)
            for task in tasks:
                task.cancel()
        finally:
            out.put(failure[0] if failure else _DONE)
            if failure:
                out.put(_DONE)

    async def _page(self, req: PageRequest) -> PageResult:
        """All attempts of one page; raises EngineError only when the server fails."""
        if req.image is None:
            return failed_result(req, self.name, self.model, "no rendered image")
        track = PageAttempts(req, self.temperatures)
        url = await asyncio.to_thread(_png_data_url, req.image)
        messages = _with_image_urls(self.preset.build_messages(req.image), url)
        while True:
            response = await self._complete(messages, track, f"page {req.doc_id}/{req.page_no}")
            if isinstance(response, str):  # the server rejected this request: only this page fails
                return failed_result(req, self.name, self.model, response)
            choice = response.choices[0] if response.choices else None
            text = (choice.message.content or "") if choice else ""
            usage = response.usage
            parsed, _ = track.record(
                text,
                choice.finish_reason if choice else "error",
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
                self.preset,
            )
            if parsed is not None or track.exhausted:
                return track.result(self.name, self.model, text, parsed)

    async def _complete(self, messages: list[dict[str, Any]], track: PageAttempts, what: str) -> Any:
        """One chat completion for the next attempt; a str is the reason the server rejected it."""
        values = sampling_fields(self.preset.sampling, track.temperature, track.seed(self.options.seed))
        body: dict[str, Any] = {"repetition_penalty": values.pop("repetition_penalty")}
        if self.options.repetition_detection:
            body["repetition_detection"] = dict(self.options.repetition_detection)
        body.update(self.options.extra_body)
        oa = self._openai
        try:
            return await self._with_retries(
                lambda: self._client.chat.completions.create(
                    model=self.model, messages=messages, extra_body=body, **values
                ),
                what,
            )
        except (oa.BadRequestError, oa.UnprocessableEntityError, oa.ConflictError) as e:
            log.warning("server rejected %s: %s", what, _describe(e))
            return f"rejected: {_describe(e)}"


def _http_client(openai: Any, in_flight: int) -> Any:
    """The client's connection pool: a kept-alive connection per request in flight (the library keeps
    100, so a task with more in flight would open a new connection for every page past them)."""
    import httpx

    room = in_flight + 8  # and the health checks beside the pages
    limits = httpx.Limits(max_connections=room, max_keepalive_connections=room)
    return openai.DefaultAsyncHttpxClient(limits=limits)


def _png_data_url(image: Any) -> str:
    """The page as a base64 PNG data URL (fast compression: the bytes only cross a local network)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _with_image_urls(messages: list[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    """The preset's messages with PIL image parts replaced by ``image_url`` parts."""
    converted = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": url}} if part.get("type") == "image_pil" else part
                for part in content
            ]
        converted.append({**message, "content": content})
    return converted


def _describe(e: BaseException) -> str:
    """A short description of a client error (status and message; never request headers)."""
    status = getattr(e, "status_code", None)
    return f"{type(e).__name__}{f' {status}' if status else ''}: {e}"
