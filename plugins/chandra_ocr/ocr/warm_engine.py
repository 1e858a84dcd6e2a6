"""The ``vllm`` engine of Airflow's extract tasks: the GPU's warm vLLM server (`warm_server`), read
over loopback by the ``openai`` engine's client, with the in-process engine's options and sampling.

The model loads once per GPU and serves every task of every run while it is warm; each task only
holds a lease. The engine args are the ones `VllmEngine` would use (the same sizer and options), so
the two differ only in where vLLM runs. ``model_use`` in the metrics tells the run record whether
this task loaded the model (and how long that took), which server read its pages, and when pages
were in flight (`busy`), from which the run's GPU busy share is computed (chandra_ocr.model_use).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from chandra_ocr.document import PageRequest, PageResult
from chandra_ocr.ocr.capacity import in_flight_per_task
from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
from chandra_ocr.ocr.presets import Preset
from chandra_ocr.ocr.vllm_args import VllmOptions
from chandra_ocr.ocr.vllm_engine import VllmEngine
from chandra_ocr.ocr.warm_server import Lease, WarmServers, serve_argv, state_dir

log = logging.getLogger(__name__)

DEFAULT_IN_FLIGHT = 64  # pages a task keeps at the server when its engine args set no max_num_seqs
_MERGE_GAP_S = 0.5  # in-flight periods closer than this count as one


class WarmVllmEngine(OpenAIEngine):
    """`OcrEngine` over the GPU's warm vLLM server for one preset (started when none serves it)."""

    name = "vllm"

    def __init__(
        self,
        preset: Preset,
        options: VllmOptions | None = None,
        *,
        idle_timeout_s: float = 600.0,
        servers: WarmServers | None = None,
    ) -> None:
        self.vllm_options = options or VllmOptions()
        o = self.vllm_options
        super().__init__(
            preset,
            ServerOptions(
                model=preset.model_id,
                max_in_flight=o.in_flight_pages or DEFAULT_IN_FLIGHT,
                max_attempts=o.max_attempts,
                repetition_detection=o.repetition_detection,
                seed=o.seed,
            ),
        )
        self.idle_timeout_s = idle_timeout_s
        self.servers = servers or WarmServers(state_dir())
        self.lease: Lease | None = None
        self._busy: list[list[float]] = []
        self._pages = 0
        self._span: list[float] = []

    def fingerprint(self) -> str:
        """What a server must have been started with to serve this engine: model, engine args, options."""
        o: dict[str, Any] = dataclasses.asdict(self.vllm_options)
        for name in ("max_attempts", "in_flight_pages", "repetition_detection", "seed"):
            o.pop(name)  # per request: the client's business
        identity = [self.preset.name, self.preset.model_id, self.preset.engine_args, o]
        return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def _server_argv(self) -> list[str]:
        """The server's flags: the model and the engine args the in-process engine would use."""
        return [
            "--model",
            self.preset.model_id,
            *serve_argv(VllmEngine(self.preset, self.vllm_options).engine_args()),
        ]

    def start(self) -> None:
        """Lease the GPU's warm server (starting it when none serves this preset), then open the client."""
        if self.lease is not None:
            return
        t0 = time.monotonic()
        lease = self.servers.acquire(
            self.fingerprint(),
            self._server_argv,
            idle_timeout_s=self.idle_timeout_s,
            label=f"{self.preset.name} {self.preset.model_id}",
        )
        self.lease = lease
        in_flight = self.vllm_options.in_flight_pages
        if in_flight is None and lease.max_num_seqs:
            in_flight = in_flight_per_task(lease.max_num_seqs, lease.sharing)
        self.options = dataclasses.replace(
            self.options,
            base_url=lease.base_url,
            api_key=lease.api_key,
            max_in_flight=in_flight or DEFAULT_IN_FLIGHT,
        )
        self.in_flight_pages = self.options.max_in_flight
        try:
            super().start()
        except BaseException:
            self.close()
            raise
        if lease.loaded_here:
            log.info("model loaded for this GPU in %.1f s (server %s)", lease.load_s, lease.server_id)
        if lease.max_num_seqs:
            log.info(
                "the model runs up to %d pages at once; %d task(s) read through it, this one keeps up to %d "
                "pages in flight",
                lease.max_num_seqs,
                lease.sharing,
                self.options.max_in_flight,
            )
        else:
            log.info(
                "warm model found (server %s, loaded %.0f s ago in %.1f s); ready in %.1f s",
                lease.server_id,
                time.time() - lease.started_at - lease.load_s,
                lease.load_s,
                time.monotonic() - t0,
            )

    def close(self) -> None:
        """Close the client and end the lease (the server stays warm for its idle time). Idempotent."""
        super().close()
        lease, self.lease = self.lease, None
        if lease is not None:
            self.servers.release(lease.path)

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        """As `OpenAIEngine.run`, timing when pages are in flight (for the GPU busy share)."""
        in_flight = 0

        def counted() -> Iterator[PageRequest]:
            nonlocal in_flight
            for req in requests:
                if in_flight == 0:
                    self._mark_busy()
                in_flight += 1
                yield req

        self._span = self._span or [time.time()]
        try:
            for result in super().run(counted()):
                in_flight -= 1
                self._pages += 1
                if in_flight == 0:
                    self._busy[-1][1] = time.time()
                yield result
        finally:
            if in_flight and self._busy:
                self._busy[-1][1] = time.time()
            self._span[1:] = [time.time()]

    def _mark_busy(self) -> None:
        now = time.time()
        if self._busy and now - self._busy[-1][1] < _MERGE_GAP_S:
            self._busy[-1][1] = now
        else:
            self._busy.append([now, now])

    def metrics(self) -> dict:
        """The client's limits, plus ``model_use``: this task's share of the warm model."""
        values = super().metrics()
        values.pop("base_url", None)  # a loopback port: differs per server, says nothing
        lease = self.lease
        if lease is None:
            return values
        values["model_use"] = {
            "server_id": lease.server_id,
            "loaded_at": round(lease.started_at, 3),
            "load_s": round(lease.load_s, 3),
            "loaded_here": lease.loaded_here,
            "pages": self._pages,
            "busy": [[round(a, 3), round(b, 3)] for a, b in self._busy],
            "span": [round(t, 3) for t in self._span],
        }
        return values
