"""Merge the job records of ``bench/gpu/h200.sh`` into ``bench/results/gpu_h200.json`` (ratios and targets).

.venv/bin/python -m bench.gpu.h200_report RUN_DIR [RUN_DIR ...] --commands commands.json
# issue 22's runs (varied lengths): added beside the fixed-length rows, which stay as they are
.venv/bin/python -m bench.gpu.h200_report RUN_DIR [RUN_DIR ...] --varied --commands commands.json \\
    --not-run "what did not run, and why" [--note "a finding"] [--profile RUN_DIR/lighton_profile.json]
# (presets measured by RUN_DIRS replace the section's; the others, the earlier notes and commands stay;
#  --tag S files this run's presets as KEY@S beside the earlier ones, so one machine session's modes pair)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TARGETS = {
    "b_over_a": 0.95,
    "b_over_c": 1.3,
    "sizer_over_sweep_best": 0.95,
    "qwen2_5_vl_7b_pages_per_s": 7.5,
    "two_gpu_scaling": 1.9,
}


def per_page(mode: dict[str, Any]) -> dict[str, Any]:
    pages = mode["pages"] or 1
    return mode | {
        "prompt_tokens_per_page": round(mode["prompt_tokens"] / pages, 1),
        "output_tokens_per_page": round(mode["output_tokens"] / pages, 1),
    }


def engine_summary(job: dict[str, Any]) -> dict[str, Any]:
    """One shape's modes with the ratios the issue asks for; modes missing from a cut run are left out."""
    modes = {k: per_page(job[k]) for k in ("a", "b0", "b", "c", "d") if k in job}
    out: dict[str, Any] = {"engine_load_s": round(job["engine_load_s"], 1), "modes": modes}
    rate = {k: m["pages_per_s"] for k, m in modes.items()}
    if "a" in rate and "b" in rate:
        out["b_over_a"] = round(rate["b"] / rate["a"], 3)
    if "b" in rate and "c" in rate:
        out["b_over_c"] = round(rate["b"] / rate["c"], 3)
    if "b" in rate and "d" in rate:
        out["b_over_d"] = round(rate["b"] / rate["d"], 3)
    if "a" in rate and "b0" in rate:
        out["b0_over_a"] = round(rate["b0"] / rate["a"], 3)
    sweep = {int(k): v["pages_per_s"] for k, v in job.get("sweep", {}).items()}
    engine = job.get("engine", {})
    if sweep and "b0" in rate:
        sizer = engine.get("in_flight_pages")
        tried = sweep | {sizer: rate["b0"]}
        best = max(tried, key=lambda k: tried[k])
        out["sweep"] = {
            "what": "pages in flight (the scheduler's running batch, ≤ max_num_seqs) on pre-rendered pages",
            "pages_per_s_by_in_flight": {str(k): v for k, v in sorted(tried.items())},
            "sizer_in_flight": sizer,
            "pages": job["b0"]["pages"],  # the running batch is min(in flight, pages, max_num_seqs)
            "best_in_flight": best,
            "sizer_over_sweep_best": round(rate["b0"] / tried[best], 3),
        }
    out["engine"] = engine
    out["render_alone_s"] = job.get("render_alone_s")
    out["argv"] = job.get("argv")
    return out


def add_paging_sweep(shape: dict[str, Any], job: dict[str, Any]) -> None:
    """Fold an engine restarted with other paging values (mode b0 only) into the shape's sizer check."""
    sizer = shape["engine"]["paging_plan"]
    sweep = shape.setdefault(
        "paging_sweep",
        {
            "what": "engine restarted with other paging values, mode b0 (our engine on pre-rendered pages)",
            "runs": [
                {
                    "paging": "sizer",
                    **{k: sizer[k] for k in ("max_num_seqs", "max_num_batched_tokens")},
                    "pages_per_s": shape["modes"]["b0"]["pages_per_s"],
                }
            ],
        },
    )
    plan = job["engine"]["paging_plan"]
    sweep["runs"].append(
        {
            "paging": job["paging_overrides"],
            **{k: plan[k] for k in ("max_num_seqs", "max_num_batched_tokens")},
            "pages_per_s": job["b0"]["pages_per_s"],
        }
    )
    best = max(r["pages_per_s"] for r in sweep["runs"])
    sweep["sizer_over_sweep_best"] = round(sweep["runs"][0]["pages_per_s"] / best, 3)


def server_summary(job: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "shape",
        "data_parallel_size",
        "server_load_s",
        "in_flight",
        "wall_s",
        "pages",
        "pages_per_s",
        "output_tok_per_s",
        "prompt_tokens",
        "output_tokens",
        "engine_args",
    )
    return {k: job[k] for k in keep if k in job}


def two_gpu_summary(jobs: dict[str, Any], one_gpu_b: float | None) -> dict[str, Any]:
    """Both two-GPU set-ups, each over its one-GPU counterpart: engines over (b), dp-2 server over dp-1."""
    out: dict[str, Any] = {}
    if "multi" in jobs:
        multi = {k: v for k, v in jobs["multi"].items() if k not in ("ranks", "argv")}
        if one_gpu_b:
            multi["scaling_over_one_gpu"] = round(multi["pages_per_s"] / one_gpu_b, 3)
        out["engine_per_gpu"] = multi
    if "serve2" in jobs:
        serve = server_summary(jobs["serve2"])
        if "serve1" in jobs:
            serve["scaling_over_one_gpu"] = round(serve["pages_per_s"] / jobs["serve1"]["pages_per_s"], 3)
        out["server_data_parallel_2"] = serve
    return out


def target_row(value: float | None, target: float) -> dict[str, Any]:
    """One target's record: its measured value, the bar, and whether it was met (None: not measured)."""
    return {"value": value, "target": target, "met": None if value is None else value >= target}


def targets(report: dict[str, Any]) -> dict[str, Any]:
    """Each target with its measured value and whether it was met (None: not measured)."""
    found: dict[str, Any] = {}
    for shape, s in report["shapes"].items():
        for key in ("b_over_a", "b_over_c"):
            found[f"{shape}.{key}"] = (s.get(key), TARGETS[key])
        for sweep in ("sweep", "paging_sweep"):
            if sweep in s:
                found[f"{shape}.{sweep}.sizer_over_sweep_best"] = (
                    s[sweep]["sizer_over_sweep_best"],
                    TARGETS["sizer_over_sweep_best"],
                )
    qwen = report["shapes"].get("qwen2_5_vl_7b", {}).get("modes", {})
    for k in ("a", "b"):  # the raw engine and ours, each against the same bar
        rate = qwen.get(k, {}).get("pages_per_s")
        found[f"qwen2_5_vl_7b_pages_per_s.{k}"] = (rate, TARGETS["qwen2_5_vl_7b_pages_per_s"])
    for setup in ("engine_per_gpu", "server_data_parallel_2"):
        found[f"two_gpu_scaling.{setup}"] = (
            report["two_gpus"].get(setup, {}).get("scaling_over_one_gpu"),
            TARGETS["two_gpu_scaling"],
        )
    return {k: target_row(v, t) for k, (v, t) in found.items()}


VARIED_TARGETS = {
    "b_over_a": 0.97,
    "b_over_c": 1.3,
    "fp8_over_bf16": 1.25,
    "lightonocr_2_1b_pages_per_s": 5.71,
}


def preset_key(job: dict[str, Any], tag: str | None = None) -> str:
    """A varied-lengths preset: the shape, its weight quantization, a non-default KV cache dtype, an image
    encoder kept eager where it would compile (``_eagervit``; records before session9 have no such field),
    pages rendered on the engine loop (``_looprender``: ``render_threads`` 0; before session10 every record
    did, without the field), any sizer overrides (``_max_num_seqs1024``) and any more engine arguments
    (an attention backend as its name, ``_triton_attn``, also where the engine chose it itself; a dict's
    own keys, ``_cudagraph_mm_encoder``; others ``_KEYVALUE``); ``tag`` (a machine session)
    is appended as ``@tag``."""
    key = job["shape"] + (f"_{job['quantization']}" if job.get("quantization") else "")
    kv = job.get("kv_cache_dtype", "auto")
    key += f"_kv{kv}" if kv != "auto" else ""
    key += "_eagervit" if job.get("compile_encoder") == "off" else ""
    key += "_looprender" if job.get("render_threads") == 0 else ""
    key += "".join(f"_{k}{v}" for k, v in sorted((job.get("paging_overrides") or {}).items()))
    chosen = (job.get("engine") or {}).get("engine_args") or {}  # the engine's own choice counts too
    given = {k: v for k, v in chosen.items() if k == "attention_backend"}
    given |= job.get("engine_args_given") or {}
    for name, value in sorted(given.items()):
        if name == "attention_backend":
            key += f"_{str(value).lower()}"
        elif isinstance(value, dict):  # compilation_config={...}: its own keys
            key += "".join(f"_{k}" if v is True else f"_{k}{v}" for k, v in sorted(value.items()))
        else:
            key += f"_{name}{value}"
    return key + (f"@{tag}" if tag else "")


def bf16_of(key: str, presets: dict[str, Any]) -> str | None:
    """The bf16 preset an FP8 preset is compared with: of the bf16 Qwen2.5-VL-7B-shape presets with the
    same way of rendering pages and the same session tag (any attention backend), the fastest in (b)."""
    name, at, tag = key.partition("@")
    loop = "_looprender" in name
    same = [
        k
        for k, entry in presets.items()
        if k.partition("@")[2] == tag
        and k.startswith("qwen2_5_vl_7b")
        and "fp8" not in k
        and ("_looprender" in k) == loop
        and "_eagervit" not in k
        and "_max_num" not in k
        and entry.get("modes", {}).get("b")
    ]
    return max(same, key=lambda k: presets[k]["modes"]["b"]["pages_per_s"], default=None)


def profiler_ms(cell: str) -> float:
    """A torch profiler time cell ("1.898s", "435.354ms", "6.797us") in milliseconds."""
    text = cell.strip()
    for unit, scale in (("ms", 1.0), ("us", 1e-3), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(f"not a profiler time: {cell!r}")


def kernel_summary(profile: dict[str, Any], top: int = 10) -> dict[str, Any]:
    """A ``--kernel-profile`` record cut to its window and its top kernels by self CUDA time (ms in
    the window, calls); vLLM's whole-step ranges (``execute_context_…``, one row per batch shape)
    sum to the window's GPU time, hence GPU time a step."""
    rows = []
    for line in profile["kernel_table_head"][3:]:
        cells = [c for c in line.split("  ") if c.strip()]
        if len(cells) < 10 or line.startswith("-"):
            continue
        ms = profiler_ms(cells[6])
        rows.append({"name": cells[0].strip(), "self_cuda_ms": round(ms, 1), "calls": int(cells[-1])})
    steps = profile["window"]["steps"]
    out = {"window": profile["window"], "pass": profile["run"], "top_kernels": rows[:top]}
    step_ms = [r["self_cuda_ms"] for r in rows if r["name"].startswith("execute_context")]
    if step_ms:
        out["gpu_ms_per_step"] = round(sum(step_ms) / steps, 2)
    return out


def varied_section(
    jobs: list[dict[str, Any]], args: argparse.Namespace, old: dict[str, Any]
) -> dict[str, Any]:
    """Issue 22's records: each preset's modes, ratios and targets. Presets this run's jobs measure replace
    those of ``old`` (an earlier section, whose run folders may be gone); the rest are kept. Jobs of one
    preset merge in file order: a later engine's mode wins (so a ratio pairs modes of one engine where the
    last job ran both) and earlier engines' rates of that mode are kept beside it."""
    presets: dict[str, Any] = dict(old.get("presets", {}))
    fresh: set[str] = set()
    for job in jobs:
        key = preset_key(job, args.tag)
        if key not in fresh:
            presets[key], fresh = {"modes": {}, "engines": []}, fresh | {key}
        entry = presets[key]
        entry["output_lengths"] = job["output_lengths"]
        if job.get("gpu"):
            entry["gpu"] = job["gpu"]
        entry["files"] = job.get("files")
        entry["engines"].append(
            {
                "engine_load_s": round(job["engine_load_s"], 1),
                "modes": [m for m in ("a", "b", "c", "b0") if m in job],
            }
            | {
                k: job["engine"].get(k)
                for k in ("paging_plan", "kv_cache_tokens", "max_num_seqs", "in_flight_pages")
            }
            | ({"flashinfer": job["flashinfer"]} if job.get("flashinfer") else {})
        )
        if "profile" in job:
            entry["profile"] = job["profile"]
        if "kernel_profile" in job:
            entry["kernel_profile"] = kernel_summary(job["kernel_profile"])
        for m in ("a", "b", "c", "b0"):
            if m in job:
                earlier = entry["modes"].get(m)
                others = (
                    earlier.get("other_engines_pages_per_s", []) + [earlier["pages_per_s"]] if earlier else []
                )
                entry["modes"][m] = per_page(job[m]) | (
                    {"other_engines_pages_per_s": others} if others else {}
                )
    found: dict[str, Any] = {}
    for key, entry in presets.items():
        rate = {m: v["pages_per_s"] for m, v in entry["modes"].items()}
        if "a" in rate and "b" in rate:
            entry["b_over_a"] = round(rate["b"] / rate["a"], 3)
        if "b" in rate and "c" in rate:
            entry["b_over_c"] = round(rate["b"] / rate["c"], 3)
        for ratio in ("b_over_a", "b_over_c"):
            found[f"{key}.{ratio}"] = (entry.get(ratio), VARIED_TARGETS[ratio])
    for key in [k for k in presets if k.startswith(("qwen2_5_vl_7b_fp8", "olmocr2_7b_fp8"))]:
        base = bf16_of(key, presets)
        b16 = presets[base]["modes"]["b"] if base else None
        b8 = presets[key]["modes"].get("b")
        found[f"{key}.fp8_over_bf16"] = (
            round(b8["pages_per_s"] / b16["pages_per_s"], 3) if b8 and b16 else None,
            VARIED_TARGETS["fp8_over_bf16"],
        )
    for key in [k for k in presets if k.startswith("lightonocr_2_1b")]:
        lighton = presets[key]["modes"].get("b")
        found[f"{key}.b_pages_per_s"] = (
            lighton["pages_per_s"] if lighton else None,
            VARIED_TARGETS["lightonocr_2_1b_pages_per_s"],
        )
    section: dict[str, Any] = {
        "what": "pages with per-page output lengths from the corpus's text-layer token counts "
        "(bench/results/page_lengths.json), capped by the preset's max_tokens, >= 2 x max_num_seqs pages; "
        "mode (c) is Chandra 0.2.0's client design (per-file batches of 28, barrier, rendering in the main "
        "process) over whole files within its time budget",
        "presets": presets,
        "targets": {
            k: target_row(v, t) | ({"gpu": gpu} if (gpu := presets[k.rpartition(".")[0]].get("gpu")) else {})
            for k, (v, t) in found.items()
        },
        "notes": old.get("notes", []) + args.note,
        "not_run": args.not_run,
        "commands": old.get("commands", []) + json.loads(args.commands.read_text()),
    }
    profile = args.profile or None
    if profile:
        section["lightonocr_2_1b_profile"] = json.loads(profile.read_text())
    elif "lightonocr_2_1b_profile" in old:
        section["lightonocr_2_1b_profile"] = old["lightonocr_2_1b_profile"]
    return section


def gpu_rows(run: Path) -> list[str] | None:
    """The data rows of a run folder's ``gpus.csv`` (nvidia-smi: name, memory, driver); None without it."""
    gpus = run / "gpus.csv"
    return gpus.read_text().strip().splitlines()[1:] if gpus.is_file() else None


def load_jobs(runs: list[Path]) -> dict[str, dict[str, Any]]:
    """Every job record of the run folders, each with the GPU its folder's ``gpus.csv`` names (``gpu``)."""
    jobs: dict[str, dict[str, Any]] = {}
    for run in runs:
        rows = gpu_rows(run)
        gpu = rows[0].split(",")[0].strip() if rows else None
        for f in sorted(run.glob("*.json")):
            jobs[f.stem] = json.loads(f.read_text()) | ({"gpu": gpu} if gpu else {})
    return jobs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--commands", type=Path, required=True, help="JSON list of the exact commands that ran")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gpu_h200.json")
    p.add_argument("--not-run", action="append", default=[], help="a part that did not run, and why")
    p.add_argument("--note", action="append", default=[], help="a finding to record with the runs (--varied)")
    p.add_argument("--varied", action="store_true", help="issue 22's runs: add them beside the fixed rows")
    p.add_argument("--profile", type=Path, default=None, help="lighton_profile.json to include (--varied)")
    p.add_argument("--tag", default=None, help="--varied: file this run's presets as KEY@TAG (one session)")
    args = p.parse_args()
    jobs = load_jobs(args.runs)
    if args.varied:
        merged = json.loads(args.out.read_text())
        merged["fixed_length_rows"] = (
            "'shapes', 'server', 'two_gpus' and 'targets' are the fixed-length runs (256-512 pages, exactly "
            "1,000 output tokens a page, 2026-11-30/12-01); 'varied_lengths' holds issue 22's runs"
        )
        engine_jobs = [j for j in jobs.values() if j.get("job") == "engine"]
        merged["varied_lengths"] = varied_section(engine_jobs, args, merged.get("varied_lengths", {}))
        args.out.write_text(json.dumps(merged, indent=1, default=str) + "\n")
        print(json.dumps(merged["varied_lengths"]["targets"], indent=1))
        return
    report: dict[str, Any] = {
        "hardware": next((rows for d in args.runs if (rows := gpu_rows(d)) is not None), None),
        "caveat": "dummy weights (load_format=dummy), exact output length per page (ignore_eos): the compute "
        "per page is the real model's, the text is noise; real pages end at their own length",
        "shapes": {},
    }
    engines = [j for j in jobs.values() if j.get("job") == "engine"]
    for job in engines:
        if not job.get("paging_overrides"):
            report["shapes"][job["shape"]] = engine_summary(job)
            report.setdefault("vllm_version", job.get("engine", {}).get("vllm_version"))
    for job in engines:
        if job.get("paging_overrides") and job["shape"] in report["shapes"]:
            add_paging_sweep(report["shapes"][job["shape"]], job)
    qwen = report["shapes"].get("qwen2_5_vl_7b", {}).get("modes", {})
    if "serve1" in jobs:
        report["server"] = server_summary(jobs["serve1"])
        if "a" in qwen:
            report["server"]["over_raw_engine_a"] = round(
                jobs["serve1"]["pages_per_s"] / qwen["a"]["pages_per_s"], 3
            )
    report["two_gpus"] = two_gpu_summary(jobs, qwen.get("b", {}).get("pages_per_s"))
    report["targets"] = targets(report)
    report["not_run"] = args.not_run
    report["commands"] = json.loads(args.commands.read_text())
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps(report["targets"], indent=1))


if __name__ == "__main__":
    main()
