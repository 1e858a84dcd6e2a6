"""GPU numbers with dummy-weight model shapes: raw engine vs our engine vs Chandra's client design, server.

    # one GPU, in-process, modes interleaved and repeated: (a) LLM.chat on all pages at once, (b) VllmEngine
    # from PDFs, (c) Chandra 0.2.0's client design (per-file barrier batches), (d) olmOCR's (work items of
    # ~500 pages, workers admitted by the queue depth, one request per page), (b0) VllmEngine on images
    python3 -m bench.gpu.h200 engine --shape qwen2_5_vl_7b --model DIR --source PDFS --pages 1024 \\
        --lengths bench/results/page_lengths.json [--quantization fp8] --out X.json
    # the operator's multi-GPU mode: one VllmEngine per GPU (CUDA_VISIBLE_DEVICES), pages split between them
    python3 -m bench.gpu.h200 multi --gpus 0,1 --shape qwen2_5_vl_7b --model DIR --source PDFS --out X.json
    # `vllm serve` on loopback (optionally --data-parallel-size N) read by the OpenAI engine's async client
    python3 -m bench.gpu.h200 serve --dp 2 --shape qwen2_5_vl_7b --model DIR --source PDFS --out X.json

Model folders come from ``bench/models/build.py``; weights are ``load_format="dummy"``. Each page asks
for its own number of tokens (``ignore_eos``, greedy, one attempt): drawn from the corpus's text-layer
token counts with ``--lengths`` (capped by the preset's ``max_tokens``), else exactly
``--output-tokens``. Each mode does the same work and the compute per page is the real model's.
Results: JSON per job; ``gpu_h200_report.py`` merges.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gpu import scheduling as gs  # page collection, rendering and the a/b/c modes
from bench.models.shapes import SHAPES

log = logging.getLogger("gpu_h200")
PROFILE_DIR = Path(tempfile.gettempdir()) / "gpu_h200_profile"
PROFILE_TABLE = PROFILE_DIR / "profiler_out_0.txt"  # vLLM's key-averages table of rank 0


def shape_preset(shape: str, model: Path, output_tokens: int | None):
    """The production preset for ``shape`` pointed at the dummy folder; ``output_tokens`` fixes every
    page's length (and the sizer's expectation), None keeps the preset's ``max_tokens`` as the cap."""
    from chandra_ocr.ocr.presets import get_preset

    preset = get_preset(SHAPES[shape].preset, model_id=str(model))
    sampling = dataclasses.replace(preset.sampling, temperatures=(0.0,), stop=())
    if output_tokens is not None:
        sampling = dataclasses.replace(sampling, max_tokens=output_tokens)
        preset = dataclasses.replace(preset, expected_output_tokens=output_tokens)
    engine_args = dict(preset.engine_args) | {
        "load_format": "dummy",
        "enable_prefix_caching": False,  # the modes read the same pages: no reuse between them
        "mm_processor_cache_gb": 0,
    }
    if shape == "chandra_ocr_2" and importlib.util.find_spec("flashinfer") is None:
        # Chandra 2's linear-attention (GDN) layers prefill with FlashInfer on Hopper by default; a
        # vLLM wheel shipped without it must use the Triton kernels (vLLM's own installs have both).
        engine_args["gdn_prefill_backend"] = "triton"
    return dataclasses.replace(preset, sampling=sampling, engine_args=engine_args)


def flashinfer_given() -> dict[str, str | None] | None:
    """The FlashInfer this job could use (``None``: none importable) and the flashinfer-cubin stand-in."""
    if importlib.util.find_spec("flashinfer") is None:
        return None
    return {
        "version": importlib.metadata.version("flashinfer-python"),
        "VLLM_HAS_FLASHINFER_CUBIN": os.environ.get("VLLM_HAS_FLASHINFER_CUBIN"),
    }


def bench_lengths(args: argparse.Namespace, requests, preset) -> dict[tuple[str, int], int]:
    """Each page's output length for this job (see the module docstring)."""
    if args.lengths is None:
        return gs.page_lengths(requests, args.output_tokens)
    return gs.page_lengths(requests, gs.LengthDistribution.load(args.lengths, preset.sampling.max_tokens))


def make_engine(args: argparse.Namespace, lengths: dict[tuple[str, int], int] | None = None):
    """The job's VllmEngine; with ``lengths`` every page asks for its own ``max_tokens``."""
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    class BenchEngine(VllmEngine):
        warmup_max_tokens: int | None = None  # set while warming up: short pages, every batch size
        exact_max_tokens: int | None = None  # set for the kernel profile: every page this long
        steps: StepTimes | None = None  # set while a mode's engine steps are timed

        def _step(self):
            if self.steps is None:
                return super()._step()
            t0 = time.perf_counter()
            outputs = super()._step()
            self.steps.add(self._llm.llm_engine.get_num_unfinished_requests(), time.perf_counter() - t0)
            return outputs

        def _timed(self, kind, call, *args):
            if self.steps is None:
                return call(*args)
            t0 = time.perf_counter()
            out = call(*args)
            self.steps.loop_work(kind, time.perf_counter() - t0)
            return out

        def _submit(self, track, pending, rendered=None):
            return self._timed("submit", super()._submit, track, pending, rendered)

        def _settle(self, track, output, pending):
            return self._timed("settle", super()._settle, track, output, pending)

        def sampling_params(self, request, temperature, seed):
            params = super().sampling_params(request, temperature, seed)
            params.ignore_eos = True  # every page runs to its length
            if lengths is not None:
                params.max_tokens = lengths.get((request.doc_id, request.page_no), params.max_tokens)
            if self.warmup_max_tokens is not None:
                params.max_tokens = min(params.max_tokens, self.warmup_max_tokens)
            if self.exact_max_tokens is not None:
                params.max_tokens = self.exact_max_tokens
            return params

    preset = shape_preset(args.shape, args.model, None if args.lengths else args.output_tokens)
    options = VllmOptions(
        max_attempts=1,
        repetition_detection=None,  # ignore_eos output may loop; every page must run to its length
        paging=args.paging,
        quantization=args.quantization,
        kv_cache_dtype=args.kv_cache_dtype,
        compile_encoder={"auto": None, "on": True, "off": False}[args.compile_encoder],
        render_threads=args.render_threads,
        engine_args=profiler_args(args) | args.engine_arg,
    )
    return BenchEngine(preset, options)


class StepTimes:
    """Wall time of each ``llm_engine.step()`` of a mode (one engine-core step's outputs each) by the
    number of unfinished requests then: how a step's cost falls with the batch through a run's tail;
    and the engine loop's other work: enqueueing pages (with ``render_threads`` 0 it renders them too)
    and judging finished ones."""

    BUCKETS = (1, 8, 32, 128, 256, 384, 512, 640)

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.by_bucket: dict[int, list[float]] = {b: [0, 0.0] for b in self.BUCKETS}
        self.timeline: list[tuple[float, int, int]] = []  # (s since start, unfinished, steps) every 2 s
        self.steps = 0
        self.loop: dict[str, list[float]] = {"submit": [0, 0.0], "settle": [0, 0.0]}

    def loop_work(self, kind: str, seconds: float) -> None:
        self.loop[kind][0] += 1
        self.loop[kind][1] += seconds

    def add(self, unfinished: int, seconds: float) -> None:
        bucket = max([b for b in self.BUCKETS if b <= unfinished] or [1])
        self.by_bucket[bucket][0] += 1
        self.by_bucket[bucket][1] += seconds
        self.steps += 1
        t = time.perf_counter() - self.t0
        if not self.timeline or t - self.timeline[-1][0] >= 2.0:
            self.timeline.append((round(t, 1), unfinished, self.steps))

    def summary(self) -> dict[str, Any]:
        """Steps and mean ms a step per bucket (a bucket counts ≥ its key unfinished requests)."""
        buckets = {
            f">={b}": {"steps": n, "ms_per_step": round(1000 * s / n, 2)}
            for b, (n, s) in self.by_bucket.items()
            if n
        }
        loop = {
            kind: {"n": n, "s": round(s, 2)} | ({"ms_each": round(1000 * s / n, 2)} if n else {})
            for kind, (n, s) in self.loop.items()
        }
        return {"steps": self.steps, "by_unfinished": buckets, "loop": loop, "timeline": self.timeline}


def profiler_args(args: argparse.Namespace) -> dict[str, Any]:
    """vLLM's own torch profiler in the engine process, for ``--profile-pages`` or ``--kernel-profile``
    (idle until started): it records ``max_iterations`` engine steps after ``delay_iterations``."""
    if args.kernel_profile:
        delay, steps = args.kernel_profile[2:]
    elif args.profile_pages:
        delay, steps = args.profile_delay, 200
    else:
        return {}
    PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    config = {"profiler": "torch", "torch_profiler_dir": str(PROFILE_DIR), "torch_profiler_with_stack": False}
    config |= {"ignore_frontend": True, "delay_iterations": delay, "max_iterations": steps}
    return {"profiler_config": config}


def kernel_profile(args: argparse.Namespace, engine, images) -> dict[str, Any]:
    """``--kernel-profile PAGES,TOKENS,DELAY,STEPS``: one pass of PAGES pages at TOKENS output tokens
    each through the engine, vLLM's profiler over STEPS engine steps after DELAY (400,100 on 512 pages
    at 600 tokens: full-batch decode; 20,60: prefill-heavy steps); its kernel table (self CUDA time)
    lands beside the job's JSON. Run after the modes, untimed by them. The profiler slows the steps
    it records, so only GPU time is read from it, not wall time."""
    pages, tokens, delay, steps = args.kernel_profile
    engine.exact_max_tokens = tokens
    try:
        start_profiler(engine)
        run = gs.measure(lambda: gs.from_images(engine, images[:pages]))
        engine._llm.stop_profile()
    finally:
        engine.exact_max_tokens = None
    kernels = read_profile_table()
    args.out.with_suffix(".kernels.txt").write_text(kernels)
    window = {"pages": pages, "output_tokens": tokens, "delay_steps": delay, "steps": steps}
    return {"window": window, "run": run, "kernel_table_head": kernels.splitlines()[:60]}


def start_profiler(engine) -> None:
    """Start vLLM's profiler once an earlier job's table is gone (read_profile_table waits for a new one)."""
    PROFILE_TABLE.unlink(missing_ok=True)
    engine._llm.start_profile()


def read_profile_table(limit_s: float = 120) -> str:
    """The profiler's key-averages table, once vLLM has written it (empty when it never did)."""
    deadline = time.monotonic() + limit_s
    while not PROFILE_TABLE.is_file() and time.monotonic() < deadline:
        time.sleep(1)
    return PROFILE_TABLE.read_text() if PROFILE_TABLE.is_file() else ""


def prefill_only(engine, pages) -> dict[str, Any]:
    """``pages`` at 1 output token, all at once: preprocessing, image encoder and prefill without decode
    (compared with a full mode's time a page, it splits where the time goes; untimed by the modes)."""
    engine.warmup_max_tokens = 1
    try:
        run = gs.measure(lambda: gs.raw_chat(engine, pages))
    finally:
        engine.warmup_max_tokens = None
    return run | {"s_per_page": round(run["wall_s"] / max(run["pages"], 1), 4)}


def profile_split(args: argparse.Namespace, engine, images) -> dict[str, Any]:
    """Where a page's time goes: ``--profile-pages`` pages with 1 output token (image encoder,
    preprocessing and prefill only) against the same pages at full length, then vLLM's profiler over
    200 engine steps of the full-length run after ``--profile-delay`` steps (decode, all prefills done);
    its kernel table (self CUDA time) lands beside the job's JSON."""
    pages = images[: args.profile_pages]
    prefill = prefill_only(engine, pages)
    full = gs.measure(lambda: gs.raw_chat(engine, pages))
    start_profiler(engine)
    profiled = gs.measure(lambda: gs.raw_chat(engine, pages))
    engine._llm.stop_profile()
    kernels = read_profile_table()
    args.out.with_suffix(".profile.txt").write_text(kernels)
    n = len(pages)
    return {
        "pages": n,
        "prefill_only": prefill,
        "full": full,
        "profiled_run": profiled,
        "prefill_s_per_page": prefill["s_per_page"],
        "decode_s_per_page": round((full["wall_s"] - prefill["wall_s"]) / n, 4),
        "profile_window": {"delay_steps": args.profile_delay, "steps": 200},
        "kernel_table_head": kernels.splitlines()[:45],
    }


def pages_and_images(args, pool, engine):
    requests = gs.collect_requests(args.source, args.pages)
    gs.render_all(pool, gs.fresh_requests(requests[: 2 * pool.workers]), engine.render_spec)  # warm
    t0 = time.perf_counter()
    images = gs.render_all(pool, gs.fresh_requests(requests), engine.render_spec)
    return requests, images, time.perf_counter() - t0


def run_engine(args: argparse.Namespace) -> dict[str, Any]:
    """One GPU, one engine: the modes interleaved ``--repeats`` times after a warm-up; the job's record."""
    from chandra_ocr.pdf.workers import PdfWorkers

    requests = gs.collect_requests(args.source, args.pages)
    preset = shape_preset(args.shape, args.model, None if args.lengths else args.output_tokens)
    lengths = bench_lengths(args, requests, preset)
    engine = make_engine(args, lengths)
    t0 = time.perf_counter()
    engine.start()
    record: dict[str, Any] = {"job": "engine", "shape": args.shape, "engine_load_s": time.perf_counter() - t0}
    record |= {"paging_overrides": args.paging, "quantization": args.quantization}
    record["kv_cache_dtype"] = args.kv_cache_dtype
    record["compile_encoder"] = args.compile_encoder
    record["render_threads"] = args.render_threads
    record["engine_args_given"] = args.engine_arg
    record["flashinfer"] = flashinfer_given()
    record["output_lengths"] = gs.length_summary(lengths) | {
        "source": str(args.lengths) if args.lengths else f"fixed {args.output_tokens}",
        "cap": engine.preset.sampling.max_tokens,
    }
    record["files"] = len({r.doc_id for r in requests})
    record["engine"] = engine.metrics()
    try:
        with PdfWorkers(args.render_workers, 3072) as pool:
            gs.render_all(pool, gs.fresh_requests(requests[: 2 * pool.workers]), engine.render_spec)  # warm
            t0 = time.perf_counter()
            images = gs.render_all(pool, gs.fresh_requests(requests), engine.render_spec)
            record["render_alone_s"] = round(time.perf_counter() - t0, 3)
            t0 = time.perf_counter()
            engine.warmup_max_tokens = 128
            gs.raw_chat(engine, images[: args.warmup_pages])  # warm-up: every batch size up to it
            gs.from_images(engine, images[: args.warmup_pages])  # and the engine's own path
            engine.warmup_max_tokens = None
            record["warmup_s"] = round(time.perf_counter() - t0, 1)
            if args.profile_pages:
                record["profile"] = profile_split(args, engine, images)
                save(record, args.out)
            if args.split_pages:
                record["prefill_only"] = prefill_only(engine, images[: args.split_pages])
                save(record, args.out)
            modes = {
                "a": lambda: gs.raw_chat(engine, images),
                "b": lambda: gs.streamed(engine, pool, gs.fresh_requests(requests)),
                "c": lambda: gs.chandra_design(
                    engine, gs.fresh_requests(requests), args.batch, args.c_budget_s
                ),
                "b0": lambda: gs.from_images(engine, images),
                "d": lambda: gs.olmocr_design(
                    engine, pool, gs.fresh_requests(requests), args.group_pages, cooldown_s=args.cooldown_s
                ),
            }
            runs: dict[str, list] = {m: [] for m in args.modes}
            for _ in range(args.repeats):
                for name in args.modes:  # interleaved: b a c, b a c, …
                    engine.steps = StepTimes() if args.step_times and name in ("b", "b0") else None
                    runs[name].append(gs.measure(modes[name]))
                    if engine.steps is not None:
                        runs[name][-1]["step_times"] = engine.steps.summary()
                        engine.steps = None
                    log.info("%s mode %s: %s", args.shape, name, runs[name][-1])
                    record[name] = gs.median_run(runs[name])
                    save(record, args.out)
            if args.kernel_profile:
                record["kernel_profile"] = kernel_profile(args, engine, images)
    finally:
        engine.close()
    return record


def run_preprocess(args: argparse.Namespace) -> dict[str, Any]:
    """The Hugging Face image processor vLLM runs in its front-end process for each page, timed alone
    per backend (torchvision, PIL) on ``--pages`` corpus pages rendered at the preset's budget."""
    from transformers import AutoImageProcessor

    from chandra_ocr.pdf.render import render_page

    preset = shape_preset(args.shape, args.model, args.output_tokens)
    requests = gs.collect_requests(args.source, args.pages)
    images = [render_page(r.pdf_path, r.page_no, preset.render) for r in requests]
    record: dict[str, Any] = {"job": "preprocess", "shape": args.shape, "pages": len(images)}
    record["sizes"] = sorted({im.size for im in images})[:8]
    for backend in ("torchvision", "pil"):
        try:
            processor = AutoImageProcessor.from_pretrained(args.model, backend=backend)
        except Exception as e:  # the backend is not installed here
            record[backend] = {"error": f"{type(e).__name__}: {e}"[:300]}
            continue
        processor(images=[images[0]], return_tensors="pt")  # warm
        t0 = time.perf_counter()
        for image in images:
            out = processor(images=[image], return_tensors="pt")
        seconds = (time.perf_counter() - t0) / len(images)
        pixels = out["pixel_values"]
        record[backend] = {
            "image_processor": type(processor).__name__,
            "ms_per_page": round(1000 * seconds, 2),
            "pixel_values": [list(pixels.shape), str(pixels.dtype)],
        }
        save(record, args.out)
    return record


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One process of the multi-GPU mode: load, say ready, wait for go, read this GPU's share from PDFs."""
    from chandra_ocr.pdf.workers import PdfWorkers

    engine = make_engine(args)
    engine.start()
    try:
        with PdfWorkers(args.render_workers, 3072) as pool:
            requests = gs.collect_requests(args.source, args.pages)[args.rank :: args.world]
            gs.render_all(pool, gs.fresh_requests(requests[: 2 * pool.workers]), engine.render_spec)
            gs.raw_chat(engine, gs.render_all(pool, gs.fresh_requests(requests[:4]), engine.render_spec))
            Path(f"{args.out}.ready").write_text("1")
            while not Path(args.go).exists():
                time.sleep(0.05)
            start = time.time()
            pages, prompt, output = gs.streamed(engine, pool, gs.fresh_requests(requests))
            end = time.time()
    finally:
        engine.close()
    record = {"rank": args.rank, "pages": pages, "prompt_tokens": prompt, "output_tokens": output}
    return record | {"start": start, "end": end, "engine": engine.metrics()}


def run_multi(args: argparse.Namespace) -> dict[str, Any]:
    """Start one worker per GPU, release them together, and time from release to the last page."""
    gpus = args.gpus.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="gpu_h200_"))
    go = tmp / "go"
    procs, outs = [], []
    for rank, gpu in enumerate(gpus):
        out = tmp / f"rank{rank}"
        cmd = [sys.executable, "-m", __spec__.name, "worker", *common_argv(args), "--out", str(out)]
        cmd += ["--rank", str(rank), "--world", str(len(gpus)), "--go", str(go)]
        env = os.environ | {"CUDA_VISIBLE_DEVICES": gpu}
        procs.append(subprocess.Popen(cmd, env=env))
        outs.append(out)
    t0 = time.perf_counter()
    while not all(Path(f"{o}.ready").exists() for o in outs):
        if any(p.poll() not in (None, 0) for p in procs):
            raise SystemExit("a multi-GPU worker failed before it was ready")
        time.sleep(0.1)
    load_s = time.perf_counter() - t0
    go.write_text("go")
    released = time.time()
    for p in procs:
        p.wait()
    ranks = [json.loads(o.read_text()) for o in outs]
    wall = max(r["end"] for r in ranks) - released
    pages = sum(r["pages"] for r in ranks)
    output = sum(r["output_tokens"] for r in ranks)
    return {
        "job": "multi",
        "shape": args.shape,
        "gpus": len(gpus),
        "engines_ready_s": round(load_s, 1),
        "wall_s": round(wall, 3),
        "pages": pages,
        "prompt_tokens": sum(r["prompt_tokens"] for r in ranks),
        "output_tokens": output,
        "pages_per_s": round(pages / wall, 3),
        "output_tok_per_s": round(output / wall, 1),
        "ranks": ranks,
    }


def run_serve(args: argparse.Namespace) -> dict[str, Any]:
    """``vllm serve`` with the sizer's settings, read by OpenAIEngine on pre-rendered pages."""
    from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
    from chandra_ocr.ocr.warm_server import serve_argv
    from chandra_ocr.pdf.workers import PdfWorkers

    local = make_engine(args)  # only for the engine args the in-process engine would use
    engine_args = local.engine_args()
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(args.model)]
    cmd += ["--port", str(args.port)] + serve_argv(engine_args) + ["--data-parallel-size", str(args.dp)]
    log.info("starting: %s", " ".join(cmd))
    t0 = time.perf_counter()
    server = subprocess.Popen(cmd)
    try:
        in_flight = args.dp * (engine_args["max_num_seqs"] + engine_args["max_num_seqs"] // 4)
        options = ServerOptions(
            base_url=f"http://127.0.0.1:{args.port}/v1",
            model=str(args.model),
            max_in_flight=in_flight,
            timeout_s=900,
            max_attempts=1,
            repetition_detection=None,
            extra_body={"ignore_eos": True},
        )
        client = OpenAIEngine(local.preset, options)
        wait_for_server(client, server)
        load_s = time.perf_counter() - t0
        with PdfWorkers(args.render_workers, 3072) as pool:
            requests, images, _ = pages_and_images(args, pool, local)
        list(client.run(gs.fresh_requests(images[:4], with_images=True)))  # warm-up
        result = gs.measure(lambda: tally(client.run(gs.fresh_requests(images, with_images=True))))
        client.close()
    finally:
        server.terminate()
        server.wait(60)
    record = {"job": "serve", "shape": args.shape, "data_parallel_size": args.dp, "server_load_s": load_s}
    record |= {"engine_args": {k: str(v) for k, v in engine_args.items()}, "in_flight": in_flight}
    return record | result


def wait_for_server(client, server, limit_s: float = 400) -> None:
    from chandra_ocr.errors import EngineError

    deadline = time.monotonic() + limit_s
    while True:
        if server.poll() is not None:
            raise SystemExit(f"vllm serve exited with {server.returncode}")
        try:
            client.start()
            return
        except EngineError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def tally(results) -> tuple[int, int, int]:
    n = prompt = output = 0
    for r in results:
        n, prompt, output = n + 1, prompt + r.prompt_tokens, output + r.output_tokens
    return n, prompt, output


def common_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--shape", args.shape, "--model", str(args.model), "--source", str(args.source)]
    argv += ["--pages", str(args.pages), "--output-tokens", str(args.output_tokens)]
    return argv + ["--render-workers", str(args.render_workers)]


def save(record: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=str) + "\n")


def parse_args() -> argparse.Namespace:
    from chandra_ocr.ocr.vllm_engine import VllmOptions

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("job", choices=("engine", "multi", "worker", "serve", "preprocess"))
    p.add_argument("--shape", required=True, choices=sorted(SHAPES))
    p.add_argument("--model", type=Path, required=True, help="folder written by bench/models/build.py")
    p.add_argument("--source", type=Path, required=True, help="folder of PDFs (cycled until --pages)")
    p.add_argument("--pages", type=int, default=256)
    p.add_argument("--output-tokens", type=int, default=1000, help="exact output tokens per page")
    p.add_argument("--lengths", type=Path, default=None, help="page_lengths.json: per-page lengths from it")
    p.add_argument("--quantization", default=None, help="VllmOptions.quantization (fp8: online FP8)")
    p.add_argument("--kv-cache-dtype", default="auto", help="VllmOptions.kv_cache_dtype (fp8: FP8 KV cache)")
    p.add_argument(
        "--compile-encoder",
        choices=("auto", "on", "off"),
        default="auto",
        help="VllmOptions.compile_encoder (auto: the preset's default on a GPU)",
    )
    p.add_argument(
        "--render-threads",
        type=int,
        default=VllmOptions().render_threads,
        help="VllmOptions.render_threads (0: vLLM renders each page on the engine loop, like LLM.chat)",
    )
    p.add_argument("--profile-pages", type=int, default=0, help="time and profile this many pages first")
    p.add_argument("--split-pages", type=int, default=0, help="time this many pages at 1 output token first")
    p.add_argument("--profile-delay", type=int, default=150, help="engine steps before the profiler records")
    p.add_argument(
        "--kernel-profile",
        type=lambda t: [int(x) for x in t.split(",")],
        default=None,
        help="PAGES,TOKENS,DELAY,STEPS: after the modes, profile STEPS engine steps of one such pass",
    )
    p.add_argument("--step-times", action="store_true", help="time each engine step of modes b/b0")
    p.add_argument("--repeats", type=int, default=2, help="interleaved runs of each mode (median counts)")
    p.add_argument("--warmup-pages", type=int, default=64)
    p.add_argument("--c-budget-s", type=float, default=None, help="mode (c) stops after the file past this")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--render-workers", type=int, default=6)
    p.add_argument("--batch", type=int, default=28, help="Chandra's batch size (pages of one file), mode (c)")
    p.add_argument("--group-pages", type=int, default=500, help="olmOCR's pages per work item, mode (d)")
    p.add_argument(
        "--cooldown-s", type=float, default=30.0, help="olmOCR's seconds between worker releases (d)"
    )
    p.add_argument("--modes", type=lambda s: s.split(","), default=["b", "a", "c"], help="in this order")
    p.add_argument(
        "--paging",
        type=paging_override,
        action="append",
        default=[],
        help="KEY=INT sizer override (max_num_seqs, max_num_batched_tokens), repeatable",
    )
    p.add_argument(
        "--engine-arg",
        type=engine_arg,
        action="append",
        default=[],
        help="KEY=VALUE more vllm.LLM arguments (VllmOptions.engine_args; VALUE as JSON, else a string), "
        "e.g. attention_backend=TRITON_ATTN; repeatable",
    )
    p.add_argument("--gpus", default="0,1")
    p.add_argument("--dp", type=int, default=1, help="vllm serve --data-parallel-size")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--go", default="")
    args = p.parse_args()
    args.paging = dict(args.paging)
    args.engine_arg = dict(args.engine_arg)
    return args


def paging_override(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    return key, int(value)


def engine_arg(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    jobs = {
        "engine": run_engine,
        "multi": run_multi,
        "worker": run_worker,
        "serve": run_serve,
        "preprocess": run_preprocess,
    }
    record = jobs[args.job](args)
    record |= {"argv": sys.argv[1:], "output_tokens_per_page": args.output_tokens}
    save(record, args.out)
    print(json.dumps({k: v for k, v in record.items() if k not in ("engine", "ranks")}, default=str)[:3000])


if __name__ == "__main__":
    main()
