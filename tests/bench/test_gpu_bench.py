"""The GPU benchmark's own parts that run without a GPU: dummy-weight model folders and server flags.

The H200 runs themselves (`bench/gpu/h200.sh`) need CUDA and real vLLM; these tests check that the
folders they load are consistent, so a run there does not fail on a wrong token id.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from bench.gpu import flashinfer_aot as aot
from bench.gpu import h200 as gpu_h200
from bench.gpu import h200_report as report
from bench.gpu import scheduling as gpu_scheduling
from bench.models import build

REPO = Path(__file__).resolve().parents[2]
SHAPES = build.SHAPES


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    """Every shape's folder, its tokenizer trained on the repo's own Markdown (no corpus needed)."""
    text = tmp_path_factory.mktemp("text")
    for i, md in enumerate([*REPO.glob("*.md"), *REPO.glob("docs/*.md")]):
        shutil.copy(md, text / f"{i}-{md.name}")
    out = tmp_path_factory.mktemp("models")
    lines = build.training_text(text)
    return {name: build.write_model(shape, out, lines) for name, shape in SHAPES.items()}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_folder_round_trips_with_the_real_special_ids(model_dirs, name):
    from transformers import AutoTokenizer

    shape, folder = SHAPES[name], model_dirs[name]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    build.check_ids(shape, tokenizer)  # raises on any id that moved when saved and reloaded
    config = json.loads((folder / "config.json").read_text())
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tokenizer.convert_tokens_to_ids(shape.eos_token)
    assert config["architectures"] == shape.config["architectures"]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_chat_template_puts_the_image_token_the_config_names(model_dirs, name):
    from transformers import AutoTokenizer

    shape, folder = SHAPES[name], model_dirs[name]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Read it."}]}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    configs = (shape.config, shape.config.get("text_config", {}))
    image_id = next(c[k] for c in configs for k in ("image_token_id", "image_token_index") if k in c)
    assert ids.count(image_id) == 1


def test_prompt_costs_about_what_the_real_tokenizer_charges(model_dirs):
    """olmOCR-2's instruction (~110 tokens with Qwen's tokenizer) stays within 2x of that here."""
    from transformers import AutoTokenizer

    from chandra_ocr.ocr.presets import OLMOCR2, olmocr_prompt

    tokenizer = AutoTokenizer.from_pretrained(model_dirs["qwen2_5_vl_7b"])
    n = len(tokenizer(olmocr_prompt())["input_ids"])
    assert 50 <= n <= 200, n
    assert n <= OLMOCR2.prompt_text_tokens


def test_serve_flags_from_engine_args():
    from chandra_ocr.ocr.warm_server import serve_argv  # what gpu_h200.py's serve job and the warm model use

    argv = serve_argv(
        {"max_num_seqs": 512, "enable_prefix_caching": False, "limit_mm_per_prompt": {"image": 1}}
    )
    assert argv == [
        "--max-num-seqs",
        "512",
        "--no-enable-prefix-caching",
        "--limit-mm-per-prompt",
        '{"image": 1}',
    ]


LENGTHS = REPO / "bench" / "results" / "page_lengths.json"


def test_page_lengths_follow_the_recorded_corpus_distribution_capped_by_max_tokens():
    from chandra_ocr.document import PageRequest

    record = json.loads(LENGTHS.read_text())
    tokens = record["tokens_sorted"]
    assert tokens == sorted(tokens) and record["summary"]["pages"] == len(tokens) >= 100
    assert record["summary"]["p99"] > 4 * record["summary"]["p50"]  # a heavy tail
    requests = [PageRequest(f"doc{i // 7}#0", i % 7 + 1, "x.pdf", 612.0, 792.0) for i in range(2048)]
    dist = gpu_scheduling.LengthDistribution.load(LENGTHS, cap=4096)
    lengths = gpu_scheduling.page_lengths(requests, dist)
    assert lengths == gpu_scheduling.page_lengths(requests, dist)  # a fixed draw per page
    summary = gpu_scheduling.length_summary(lengths)
    assert summary["max"] == 4096 and summary["min"] >= tokens[0]
    # the draw reproduces the corpus's median within sampling error, and caps only the tail
    assert abs(summary["p50"] - record["summary"]["p50"]) < 0.25 * record["summary"]["p50"]
    assert 0 < sum(v == 4096 for v in lengths.values()) < 0.1 * len(lengths)
    fixed = gpu_scheduling.page_lengths(requests[:3], 1000)
    assert set(fixed.values()) == {1000}


def test_the_median_run_counts_and_every_run_is_kept():
    runs = [{"pages_per_s": r} for r in (7.9, 7.1, 7.5)]
    assert gpu_scheduling.median_run(runs) == {"pages_per_s": 7.5, "runs_pages_per_s": [7.9, 7.1, 7.5]}
    assert gpu_scheduling.median_run(runs[:2])["pages_per_s"] == 7.1  # of two, the slower


def test_step_times_bucket_steps_by_the_requests_still_unfinished():
    steps = gpu_h200.StepTimes()
    for unfinished, seconds in ((640, 0.040), (600, 0.030), (300, 0.020), (5, 0.004), (0, 0.002)):
        steps.add(unfinished, seconds)
    summary = steps.summary()
    assert summary["steps"] == 5
    assert summary["by_unfinished"] == {
        ">=1": {"steps": 2, "ms_per_step": 3.0},  # 5 and 0 (the last step empties the engine)
        ">=256": {"steps": 1, "ms_per_step": 20.0},
        ">=512": {"steps": 1, "ms_per_step": 30.0},
        ">=640": {"steps": 1, "ms_per_step": 40.0},
    }
    assert summary["timeline"][0][1:] == (640, 1)
    assert summary["loop"] == {"submit": {"n": 0, "s": 0.0}, "settle": {"n": 0, "s": 0.0}}
    for seconds in (0.050, 0.010):
        steps.loop_work("submit", seconds)
    steps.loop_work("settle", 0.002)
    loop = steps.summary()["loop"]
    assert loop["submit"] == {"n": 2, "s": 0.06, "ms_each": 30.0}
    assert loop["settle"] == {"n": 1, "s": 0.0, "ms_each": 2.0}


def test_kernel_summary_reads_the_profilers_table_in_its_units():
    row = "{:>55}  " + "  ".join(["{:>12}"] * 10)
    table = ["-" * 80, row.format("Name", *["col"] * 10), "-" * 80]
    cells = [("execute_context_0(0)_generation_512(512)", "1.898s", 90), ("cutlass_gemm", "435.354ms", 8400)]
    cells += [
        ("execute_context_0(1)_generation_480(480)", "150.2ms", 10),
        ("reshape_and_cache", "19.031us", 2800),
    ]
    for name, cuda, calls in cells:
        table.append(
            row.format(
                name, "0.00%", "0.000us", "0.00%", "0.000us", "0.000us", cuda, "1%", cuda, "1us", calls
            )
        )
    profile = {"kernel_table_head": table, "window": {"steps": 100}, "run": {}}
    summary = report.kernel_summary(profile)
    assert [k["self_cuda_ms"] for k in summary["top_kernels"]] == [1898.0, 435.4, 150.2, 0.0]
    assert [k["calls"] for k in summary["top_kernels"]] == [90, 8400, 10, 2800]
    assert summary["gpu_ms_per_step"] == 20.48  # both step ranges over the window's 100 steps


def measured(*rates: tuple[str, float]) -> dict:
    """Report presets with only a mode (b) rate each, as ``bf16_of`` reads them."""
    return {k: {"modes": {"b": {"pages_per_s": r}}} for k, r in rates}


def test_preset_keys_keep_an_eager_encoder_and_loop_rendering_apart_and_fp8_pairs_with_its_bf16():
    bf16 = {"shape": "qwen2_5_vl_7b", "kv_cache_dtype": "auto", "compile_encoder": "auto"}
    eager = bf16 | {"compile_encoder": "off"}
    fp8 = bf16 | {"quantization": "fp8", "kv_cache_dtype": "fp8"}
    old = {"shape": "qwen2_5_vl_7b", "paging_overrides": {"max_num_seqs": 1024}}  # before the field existed
    keys = [report.preset_key(j, "s9") for j in (bf16, eager, fp8, old)]
    assert keys == [
        "qwen2_5_vl_7b@s9",
        "qwen2_5_vl_7b_eagervit@s9",
        "qwen2_5_vl_7b_fp8_kvfp8@s9",
        "qwen2_5_vl_7b_max_num_seqs1024@s9",
    ]
    presets = measured((keys[0], 6.0), (keys[1], 5.0), (keys[2], 7.0), ("qwen2_5_vl_7b@s10", 9.0))
    assert report.bf16_of(keys[2], presets) == keys[0]  # same lease; the eager encoder is not a baseline
    loop_bf16, loop_fp8 = (report.preset_key(j | {"render_threads": 0}, "s10") for j in (bf16, fp8))
    assert (loop_bf16, loop_fp8) == ("qwen2_5_vl_7b_looprender@s10", "qwen2_5_vl_7b_fp8_kvfp8_looprender@s10")
    presets |= measured((loop_bf16, 5.5), (loop_fp8, 6.5))
    assert report.bf16_of(loop_fp8, presets) == loop_bf16
    assert report.preset_key(bf16 | {"render_threads": 4}, "s10") == "qwen2_5_vl_7b@s10"


def test_an_attention_backend_names_its_preset_and_fp8_meets_the_fastest_bf16_of_its_lease():
    triton = {"engine_args_given": {"attention_backend": "TRITON_ATTN"}}
    bf16 = {"shape": "qwen2_5_vl_7b", "kv_cache_dtype": "auto"}
    fp8 = bf16 | {"quantization": "fp8", "kv_cache_dtype": "fp8"}
    keys = [report.preset_key(j, "s11") for j in (bf16, bf16 | triton, fp8 | triton)]
    assert keys == [
        "qwen2_5_vl_7b@s11",
        "qwen2_5_vl_7b_triton_attn@s11",
        "qwen2_5_vl_7b_fp8_kvfp8_triton_attn@s11",
    ]
    for fastest, rates in ((keys[1], (6.0, 6.2)), (keys[0], (6.3, 6.2))):
        presets = measured(*zip(keys, (*rates, 8.0), strict=True))
        assert report.bf16_of(keys[2], presets) == fastest
    assert report.bf16_of(keys[2], measured((keys[2], 8.0))) is None
    graphs = fp8 | {"engine_args_given": {"compilation_config": {"cudagraph_mm_encoder": True}}}
    assert report.preset_key(graphs) == "qwen2_5_vl_7b_fp8_kvfp8_cudagraph_mm_encoder"


def test_a_flashinfer_job_is_its_own_preset_and_keeps_the_flashinfer_it_ran_with(tmp_path):
    run = {"pages": 4, "prompt_tokens": 400, "output_tokens": 800, "wall_s": 1.0}
    base = {"shape": "qwen2_5_vl_7b", "kv_cache_dtype": "auto", "engine_load_s": 100.0, "engine": {}}
    base |= {"output_lengths": {}, "files": 2}
    fi = {"version": "0.6.13", "VLLM_HAS_FLASHINFER_CUBIN": "1"}
    jobs = [
        base | {"b": run | {"pages_per_s": 6.0}},
        base
        | {"b": run | {"pages_per_s": 5.0}, "flashinfer": fi}
        | {"engine_args_given": {"attention_backend": "FLASHINFER"}},
        base
        | {"quantization": "fp8", "kv_cache_dtype": "fp8", "flashinfer": fi}
        | {"engine_args_given": {"attention_backend": "FLASHINFER"}, "b": run | {"pages_per_s": 7.8}},
    ]
    (tmp_path / "commands.json").write_text("[]")
    args = argparse.Namespace(
        tag="s12", note=[], not_run=[], commands=tmp_path / "commands.json", profile=None
    )
    section = report.varied_section(jobs, args, {})
    presets = section["presets"]
    assert list(presets) == [
        "qwen2_5_vl_7b@s12",
        "qwen2_5_vl_7b_flashinfer@s12",
        "qwen2_5_vl_7b_fp8_kvfp8_flashinfer@s12",
    ]
    assert "flashinfer" not in presets["qwen2_5_vl_7b@s12"]["engines"][0]
    assert presets["qwen2_5_vl_7b_fp8_kvfp8_flashinfer@s12"]["engines"][0]["flashinfer"] == fi
    ratio = section["targets"]["qwen2_5_vl_7b_fp8_kvfp8_flashinfer@s12.fp8_over_bf16"]
    assert ratio == {"value": 1.3, "target": 1.25, "met": True}  # against the faster bf16 (FA3's 6.0)


def test_a_backend_the_engine_chose_itself_names_the_preset_and_each_run_keeps_its_gpu(tmp_path):
    job = {"shape": "qwen2_5_vl_7b", "quantization": "fp8", "kv_cache_dtype": "fp8"}
    assert report.preset_key(job | {"engine": {}}) == "qwen2_5_vl_7b_fp8_kvfp8"
    chosen = {"engine": {"engine_args": {"attention_backend": "FLASHINFER", "max_num_seqs": 512}}}
    assert report.preset_key(job | chosen) == "qwen2_5_vl_7b_fp8_kvfp8_flashinfer"
    given = {"engine_args_given": {"attention_backend": "FLASH_ATTN"}}  # the same backend once
    assert report.preset_key(job | chosen | given) == "qwen2_5_vl_7b_fp8_kvfp8_flash_attn"

    h100, h200 = tmp_path / "h100", tmp_path / "h200"
    for run, name in ((h100, "NVIDIA H100 80GB HBM3"), (h200, "NVIDIA H200")):
        run.mkdir()
        (run / "gpus.csv").write_text(f"name, memory.total [MiB]\n{name}, 81559 MiB\n")
    (h100 / "olmocr2_bf16.json").write_text(json.dumps({"job": "engine"}))
    (h200 / "chandra2.json").write_text(json.dumps({"job": "engine"}))
    (tmp_path / "olmocr2_fp8.json").write_text(json.dumps({"job": "engine"}))  # a folder without gpus.csv
    jobs = report.load_jobs([h100, h200, tmp_path])
    assert jobs["olmocr2_bf16"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert jobs["chandra2"]["gpu"] == "NVIDIA H200"
    assert "gpu" not in jobs["olmocr2_fp8"]

    run = {"pages": 4, "prompt_tokens": 400, "output_tokens": 800, "wall_s": 1.0}
    base = {"shape": "qwen2_5_vl_7b", "engine_load_s": 100.0, "engine": {}, "output_lengths": {}}
    measured = [
        base | {"b": run | {"pages_per_s": 5.0}, "gpu": "NVIDIA H100 80GB HBM3"},
        base | job | {"b": run | {"pages_per_s": 7.0}, "gpu": "NVIDIA H100 80GB HBM3"},
    ]
    commands = tmp_path / "commands.json"
    commands.write_text("[]")
    args = argparse.Namespace(tag="s12", note=[], not_run=[], commands=commands, profile=None)
    section = report.varied_section(measured, args, {})
    assert section["presets"]["qwen2_5_vl_7b@s12"]["gpu"] == "NVIDIA H100 80GB HBM3"
    target = section["targets"]["qwen2_5_vl_7b_fp8_kvfp8@s12.fp8_over_bf16"]
    assert target == {"value": 1.4, "target": 1.25, "met": True, "gpu": "NVIDIA H100 80GB HBM3"}


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("gcc", "nm", "readelf")), reason="needs gcc, nm and readelf"
)
def test_a_prebuilt_module_calling_the_driver_without_needing_libcuda_is_refused(tmp_path):
    import subprocess

    (tmp_path / "stub.c").write_text("void cuTensorMapEncodeTiled(void) {}\n")
    (tmp_path / "mod.c").write_text(
        "void cuTensorMapEncodeTiled(void);\nvoid run(void) { cuTensorMapEncodeTiled(); }\n"
    )
    stub = tmp_path / "libcuda.so"
    cc = ["gcc", "-shared", "-fPIC", "-o"]
    subprocess.run([*cc, str(stub), "-Wl,-soname,libcuda.so.1", str(tmp_path / "stub.c")], check=True)
    linked, unlinked = tmp_path / "linked.so", tmp_path / "unlinked.so"
    mod = str(tmp_path / "mod.c")
    subprocess.run([*cc, str(linked), mod, f"-L{tmp_path}", "-Wl,--as-needed", "-lcuda"], check=True)
    subprocess.run([*cc, str(unlinked), mod], check=True)
    aot.refuse_unlinked_driver_calls(linked)  # needs libcuda.so.1: kept
    assert linked.exists()
    with pytest.raises(SystemExit, match="cuTensorMapEncodeTiled but does not need libcuda.so.1"):
        aot.refuse_unlinked_driver_calls(unlinked)
    assert not unlinked.exists()  # not copied into the AOT folder by a later run


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_shape_has_its_presets_dimensions(name):
    """The dummy folder is the model the preset's memory sizing assumes (ocr/tuning.py's ModelDims)."""
    from chandra_ocr.ocr.presets import get_preset

    shape, preset = SHAPES[name], get_preset(SHAPES[name].preset)
    dims = preset.dims
    text = shape.config.get("text_config", shape.config)
    vision = shape.config["vision_config"]
    assert (text["hidden_size"], text["num_hidden_layers"]) == (dims.hidden_size, dims.n_layers)
    assert (text["num_key_value_heads"], text["vocab_size"]) == (dims.n_kv_heads, dims.vocab_size)
    assert text["max_position_embeddings"] == dims.max_position
    assert text.get("head_dim", text["hidden_size"] // text["num_attention_heads"]) == dims.head_dim
    full = text.get("layer_types", ["full_attention"] * text["num_hidden_layers"]).count("full_attention")
    assert full == (dims.full_attention_layers or dims.n_layers)
    merge = vision.get("spatial_merge_size", shape.config.get("spatial_merge_size"))
    assert (vision["patch_size"] * merge) ** 2 == dims.pixels_per_image_token
    assert ("quantization_config" in shape.config) == (preset.quantization == "fp8")
