"""GPU numbers with dummy-weight model shapes: raw engine vs our engine, barrier batches, server, two GPUs.

    # one GPU, in-process: (a) LLM.chat, (b0) VllmEngine on images, (b) VllmEngine from PDFs, (c) barrier
    # batches, and a sweep of the pages in flight (the scheduler's running batch) against the sizer's choice
    python3 bench/gpu_h200.py engine --shape qwen2_5_vl_7b --model DIR --source PDFS --pages 256 --out X.json
    # the operator's multi-GPU mode: one VllmEngine per GPU (CUDA_VISIBLE_DEVICES), pages split between them
    python3 bench/gpu_h200.py multi --gpus 0,1 --shape qwen2_5_vl_7b --model DIR --source PDFS --out X.json
    # `vllm serve` on loopback (optionally --data-parallel-size N) read by the OpenAI engine's async client
    python3 bench/gpu_h200.py serve --dp 2 --shape qwen2_5_vl_7b --model DIR --source PDFS --out X.json

Model folders come from ``bench/models/build.py``; weights are ``load_format="dummy"``. Every page asks
for exactly ``--output-tokens`` tokens (``ignore_eos``, greedy, one attempt), so each mode does the same
work and the compute per page is the real model's. Results: JSON per job; ``gpu_h200_report.py`` merges.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
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

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import gpu_scheduling as gs  # noqa: E402  (page collection, rendering and the a/b/c modes)

log = logging.getLogger("gpu_h200")
PRESET_OF_SHAPE = {"qwen2_5_vl_7b": "olmocr2", "chandra_ocr_2": "chandra2", "lightonocr_2_1b": "lightonocr2"}
# Our own instruction, about as long as olmOCR's (≈ 100 tokens besides the image).
OLMOCR_LIKE_PROMPT = (
    "Below is the image of one page of a document. Return its full text in natural reading order, as "
    "plain text with Markdown for headings and lists. Write equations in LaTeX and tables in HTML. Do not "
    "describe pictures; keep their captions. If the page has no text, return nothing. Begin with a short "
    "front matter that gives the primary language, whether the page is rotated and whether it holds a "
    "table or a diagram, then the text."
)


def shape_preset(shape: str, model: Path, output_tokens: int):
    """The production preset for ``shape`` pointed at the dummy folder, reading exactly ``output_tokens``."""
    from chandra_ocr.document import RenderSpec
    from chandra_ocr.ocr.presets import Preset, Sampling, get_preset, parse_text_page, user_image_message
    from chandra_ocr.ocr.tuning import QWEN2_5_VL_7B

    if shape == "qwen2_5_vl_7b":  # olmOCR-2 renders the longest side to 1288 px
        preset = Preset(
            name="olmocr2",
            model_id=str(model),
            output_format="text",
            render=RenderSpec(dpi=200, max_pixels=1288 * 1288, longest_edge=1288, multiple_of=28),
            sampling=Sampling(max_tokens=output_tokens),
            build_messages=functools.partial(user_image_message, prompt=OLMOCR_LIKE_PROMPT),
            parse=parse_text_page,
            engine_args={"max_model_len": 8192, "limit_mm_per_prompt": {"image": 1}, "dtype": "bfloat16"},
            dims=QWEN2_5_VL_7B,
            prompt_text_tokens=110,
        )
    else:
        preset = get_preset(PRESET_OF_SHAPE[shape], model_id=str(model))
    sampling = dataclasses.replace(preset.sampling, max_tokens=output_tokens, temperatures=(0.0,), stop=())
    engine_args = dict(preset.engine_args) | {
        "load_format": "dummy",
        "enable_prefix_caching": False,  # the modes read the same pages: no reuse between them
        "mm_processor_cache_gb": 0,
    }
    if shape == "chandra_ocr_2" and importlib.util.find_spec("flashinfer") is None:
        # Chandra 2's linear-attention (GDN) layers prefill with FlashInfer on Hopper by default; a
        # vLLM wheel shipped without it must use the Triton kernels (vLLM's own installs have both).
        engine_args["gdn_prefill_backend"] = "triton"
    return dataclasses.replace(
        preset, sampling=sampling, engine_args=engine_args, expected_output_tokens=output_tokens
    )


def make_engine(args: argparse.Namespace, in_flight: int | None = None):
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    preset = shape_preset(args.shape, args.model, args.output_tokens)
    options = VllmOptions(
        max_attempts=1,
        repetition_detection=None,  # ignore_eos output may loop; every page must run to its length
        extra_sampling={"ignore_eos": True},
        in_flight_pages=in_flight,
        paging=args.paging,
    )
    return VllmEngine(preset, options)


def pages_and_images(args, pool, engine):
    requests = gs.collect_requests(args.source, args.pages)
    gs.render_all(pool, gs.fresh_requests(requests[: 2 * pool.workers]), engine.render_spec)  # warm
    t0 = time.perf_counter()
    images = gs.render_all(pool, gs.fresh_requests(requests), engine.render_spec)
    return requests, images, time.perf_counter() - t0


def run_engine(args: argparse.Namespace) -> dict[str, Any]:
    """One GPU, one engine: modes a, b0, b, c and the in-flight sweep; returns the job's record."""
    from chandra_ocr.pdf.workers import PdfWorkers

    engine = make_engine(args)
    t0 = time.perf_counter()
    engine.start()
    record: dict[str, Any] = {"job": "engine", "shape": args.shape, "engine_load_s": time.perf_counter() - t0}
    record["paging_overrides"] = args.paging
    record["engine"] = engine.metrics()
    sizer_in_flight = engine.in_flight_pages
    try:
        with PdfWorkers(args.render_workers, 3072) as pool:
            requests, images, render_s = pages_and_images(args, pool, engine)
            record["render_alone_s"] = round(render_s, 3)
            gs.raw_chat(engine, images[:4])  # warm-up
            modes = {
                "a": lambda: gs.raw_chat(engine, images),
                "b": lambda: gs.streamed(engine, pool, gs.fresh_requests(requests)),
                "c": lambda: gs.barrier_chat(engine, images[: args.barrier_pages], args.batch),
                "b0": lambda: gs.from_images(engine, images),
            }
            for name, fn in modes.items():
                if name not in args.modes:
                    continue
                record[name] = gs.measure(fn)
                log.info("%s mode %s: %s", args.shape, name, record[name])
                save(record, args.out)
            record["sweep"] = {}
            for cap in args.sweep:
                engine.in_flight_pages = cap
                record["sweep"][str(cap)] = gs.measure(lambda: gs.from_images(engine, images))
                log.info("%s in flight %d: %s", args.shape, cap, record["sweep"][str(cap)])
                save(record, args.out)
            engine.in_flight_pages = sizer_in_flight
    finally:
        engine.close()
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
        cmd = [sys.executable, __file__, "worker", *common_argv(args), "--out", str(out)]
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


def serve_argv(engine_args: dict[str, Any]) -> list[str]:
    """``vllm serve`` flags for ``vllm.LLM`` keyword arguments."""
    argv = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def run_serve(args: argparse.Namespace) -> dict[str, Any]:
    """``vllm serve`` with the sizer's settings, read by OpenAIEngine on pre-rendered pages."""
    from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("job", choices=("engine", "multi", "worker", "serve"))
    p.add_argument("--shape", required=True, choices=sorted(PRESET_OF_SHAPE))
    p.add_argument("--model", type=Path, required=True, help="folder written by bench/models/build.py")
    p.add_argument("--source", type=Path, required=True, help="folder of PDFs (cycled until --pages)")
    p.add_argument("--pages", type=int, default=256)
    p.add_argument("--output-tokens", type=int, default=1000, help="exact output tokens per page")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--render-workers", type=int, default=6)
    p.add_argument("--batch", type=int, default=28, help="barrier batch size of mode (c)")
    p.add_argument("--barrier-pages", type=int, default=112, help="pages read in mode (c)")
    p.add_argument("--sweep", type=lambda s: [int(v) for v in s.split(",") if v], default=[64, 128])
    p.add_argument("--modes", type=lambda s: s.split(","), default=["a", "b", "c", "b0"])
    p.add_argument(
        "--paging",
        type=paging_override,
        action="append",
        default=[],
        help="KEY=INT sizer override (max_num_seqs, max_num_batched_tokens), repeatable",
    )
    p.add_argument("--gpus", default="0,1")
    p.add_argument("--dp", type=int, default=1, help="vllm serve --data-parallel-size")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--go", default="")
    args = p.parse_args()
    args.paging = dict(args.paging)
    return args


def paging_override(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    return key, int(value)


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    jobs = {"engine": run_engine, "multi": run_multi, "worker": run_worker, "serve": run_serve}
    record = jobs[args.job](args)
    record |= {"argv": sys.argv[1:], "output_tokens_per_page": args.output_tokens}
    save(record, args.out)
    print(json.dumps({k: v for k, v in record.items() if k not in ("engine", "ranks")}, default=str)[:3000])


if __name__ == "__main__":
    main()
