"""Model presets: everything model-specific (prompt, render budget, sampling, parser, engine args).

Engines only read a ``Preset``; adding a model means adding one entry to ``PRESETS`` (or
building a ``Preset`` and handing it to an engine): a model id, a ``RenderSpec``, a
``Sampling``, ``functools.partial(user_image_message, prompt=…)`` and one of the parsers.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from chandra.prompts import OCR_LAYOUT_PROMPT

from chandra_ocr.document import ParsedPage, RenderSpec
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.tuning import (
    CHANDRA_OCR_2,
    LIGHTONOCR_2_1B,
    QWEN2_5_VL_7B,
    ModelDims,
    PagingPlan,
    plan_paging,
)

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class Sampling:
    """Sampling per attempt: attempt i uses ``temperatures[i]``; len(temperatures) = max attempts."""

    max_tokens: int
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.6)
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or not self.temperatures or not 0.0 < self.top_p <= 1.0:
            raise ConfigError("sampling needs max_tokens ≥ 1, at least one temperature and 0 < top_p ≤ 1")


@dataclass(frozen=True)
class Preset:
    """One OCR model: how to prompt it, how big its images are, how to read its output."""

    name: str
    model_id: str
    output_format: Literal["html", "markdown", "text"]
    render: RenderSpec
    sampling: Sampling
    # image → OpenAI-style chat messages (content parts: {"type": "image_pil", ...} / text);
    # engines convert image parts to their own form (PIL for vllm.LLM.chat, base64 for servers).
    build_messages: Callable[[Image.Image], list[dict[str, Any]]]
    # (model output, page width pt, page height pt) → ParsedPage; raises ParseError on unusable output
    parse: Callable[[str, float, float], ParsedPage]
    engine_args: Mapping[str, Any] = field(default_factory=dict)  # passed to vllm.LLM / `vllm serve`
    licence: str = ""
    dims: ModelDims | None = None  # published architecture numbers, for sizing the KV cache
    expected_output_tokens: int = 1024  # typical output of a dense page, for sizing
    prompt_text_tokens: int = 16  # chat template + text prompt tokens besides the image
    # how the checkpoint stores its decoder weights, for sizing: None (dims' dtype) or "fp8" for a
    # pre-quantized checkpoint (vLLM reads the method from its config; engines pass nothing)
    quantization: str | None = None
    # vLLM can torch.compile this model's vision encoder (CompilationConfig.compile_mm_encoder: fused
    # norms, rotary and activations instead of eager kernels); the vllm engine turns it on for GPUs
    encoder_compiles: bool = False


def user_image_message(image: Image.Image, *, prompt: str | None = None) -> list[dict[str, Any]]:
    """One user message: the page image, then ``prompt`` as a text part when given."""
    content: list[dict[str, Any]] = [{"type": "image_pil", "image_pil": image}]
    if prompt:
        content.append({"type": "text", "text": prompt})
    return [{"role": "user", "content": content}]


# Parsers are imported when first used (the parse modules import MuPDF-free but sizeable code).
def parse_chandra_layout(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Chandra layout HTML → ParsedPage (see ``chandra_ocr.parse.chandra_html``)."""
    from chandra_ocr.parse.chandra_html import parse_chandra_html

    return parse_chandra_html(raw, width_pt, height_pt)


def parse_markdown_page(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Markdown → ParsedPage (see ``chandra_ocr.parse.markdown``)."""
    from chandra_ocr.parse.markdown import parse_markdown

    return parse_markdown(raw, width_pt, height_pt)


def parse_olmocr_page(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """olmOCR front matter + Markdown → ParsedPage (see ``chandra_ocr.parse.olmocr``)."""
    from chandra_ocr.parse.olmocr import parse_olmocr

    return parse_olmocr(raw, width_pt, height_pt)


# Chandra OCR 2 — values from the chandra-ocr 0.2.0 package: settings.IMAGE_DPI (192),
# MIN_PDF_IMAGE_DIM (1024), MAX_OUTPUT_TOKENS (12384); model.util.scale_to_fit (3072×2048 px
# cap on a 28 px grid); scripts/vllm.py (max-model-len 18000, prefix caching, mm processor
# pixel bounds); model/vllm.py (temperature 0, then retries +0.2 per attempt at top_p 0.95 —
# its first-attempt top_p 0.1 is moot under greedy decoding). Four attempts (0.0 → 0.6) cover
# the vendor's useful range; past that the text layer or the CPU engine is a cheaper fallback
# than another 12k-token generation.
CHANDRA2 = Preset(
    name="chandra2",
    model_id="datalab-to/chandra-ocr-2",
    output_format="html",
    render=RenderSpec(dpi=192, max_pixels=6_291_456, min_short_side=1024, multiple_of=28),
    sampling=Sampling(
        max_tokens=12_384,
        temperatures=(0.0, 0.2, 0.4, 0.6),
        top_p=0.95,
        stop=("<|im_end|>",),
    ),
    build_messages=functools.partial(user_image_message, prompt=OCR_LAYOUT_PROMPT),
    parse=parse_chandra_layout,
    engine_args={
        "max_model_len": 18_000,
        "enable_prefix_caching": True,  # the same long layout prompt precedes every page
        "mm_processor_kwargs": {"min_pixels": 3136, "max_pixels": 6_291_456},
        "limit_mm_per_prompt": {"image": 1},
        "dtype": "bfloat16",
    },
    licence="OpenRAIL-M (commercial limits)",
    dims=CHANDRA_OCR_2,
    expected_output_tokens=2_500,
    prompt_text_tokens=600,  # the layout prompt is 2,161 characters (~540 tokens) + chat template
)

# LightOnOCR-2-1B — model card: render to 1540 px on the longest side, image-only message
# (no prompt: the model tends to repeat one), temperature 0.2, top_p 0.9, max_tokens 4096;
# `vllm serve` with --limit-mm-per-prompt '{"image": 1}', --mm-processor-cache-gb 0 and
# --no-enable-prefix-caching. 1540 = 55 × 28 (Pixtral 14 px patches merged 2×2). Retries
# rise by 0.2. max_model_len: ≤ 3025 image tokens + 4096 output, rounded up to 8192.
LIGHTONOCR2 = Preset(
    name="lightonocr2",
    model_id="lightonai/LightOnOCR-2-1B",
    output_format="markdown",
    render=RenderSpec(dpi=200, max_pixels=1540 * 1540, longest_edge=1540, multiple_of=28),
    sampling=Sampling(max_tokens=4096, temperatures=(0.2, 0.4, 0.6), top_p=0.9),
    build_messages=user_image_message,
    parse=parse_markdown_page,
    engine_args={
        "max_model_len": 8192,
        "limit_mm_per_prompt": {"image": 1},
        "enable_prefix_caching": False,
        "mm_processor_cache_gb": 0,
    },
    licence="Apache-2.0",
    dims=LIGHTONOCR_2_1B,
    expected_output_tokens=1_200,
    prompt_text_tokens=16,
)

# Our instruction for olmOCR-2, asking for the answer format its fine-tune was trained on (a front
# matter of primary_language, is_rotation_valid, rotation_correction, is_table and is_diagram, then
# Markdown with HTML tables, LaTeX equations and labelled figures). With the ``olmocr`` package
# installed, its own prompt is used instead (``olmocr.prompts`` imports without olmOCR's pipeline,
# but installing the package pulls that pipeline's ~17 dependencies, so it is not required).
OLMOCR_PROMPT = (
    "This is one page of a document. Read it as a person would and return its plain text in natural "
    "reading order. Write equations as LaTeX and tables as HTML. Mark each figure or chart as a Markdown "
    "image whose alt text describes it: ![description](page_startx_starty_width_height.png)\n"
    "Answer in Markdown that begins with a front matter block giving primary_language, "
    "is_rotation_valid, rotation_correction, is_table and is_diagram."
)


@functools.cache
def olmocr_prompt() -> str:
    """The ``olmocr`` package's own page prompt when it is installed, else ``OLMOCR_PROMPT``."""
    try:
        from olmocr.prompts import build_no_anchoring_v4_yaml_prompt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return OLMOCR_PROMPT
    return str(build_no_anchoring_v4_yaml_prompt())


def olmocr_message(image: Image.Image) -> list[dict[str, Any]]:
    """One user message: the page image, then olmOCR's prompt."""
    return user_image_message(image, prompt=olmocr_prompt())


# olmOCR-2 (allenai/olmOCR-2-7B-1025, a Qwen2.5-VL-7B fine-tune; Apache-2.0) — values from the
# olmocr package's pipeline: pages rendered to 1288 px on the longest side (1288 = 46 × 28), one
# image + prompt per request, max_tokens 8000, temperature 0.1 first and rising per retry
# (0.1, 0.1, 0.2, 0.3, 0.5, …; four distinct attempts here), an answer that does not end on its
# own (finish_reason ≠ stop) is invalid. max_model_len: longest prompt + max_tokens (the sizer).
OLMOCR2 = Preset(
    name="olmocr2",
    model_id="allenai/olmOCR-2-7B-1025",
    output_format="markdown",
    render=RenderSpec(dpi=200, max_pixels=1288 * 1288, longest_edge=1288, multiple_of=28),
    sampling=Sampling(max_tokens=8000, temperatures=(0.1, 0.2, 0.3, 0.5)),
    build_messages=olmocr_message,
    parse=parse_olmocr_page,
    engine_args={
        "limit_mm_per_prompt": {"image": 1},
        "dtype": "bfloat16",
        "enable_prefix_caching": False,  # the image comes first: pages share no prefix worth caching
    },
    licence="Apache-2.0",
    dims=QWEN2_5_VL_7B,
    encoder_compiles=True,  # vLLM compiles the Qwen2.5-VL vision tower (qwen2_5_vl.py)
    expected_output_tokens=1_000,
    prompt_text_tokens=130,  # the prompt (~110 tokens) + chat template
)

# The published FP8 checkpoint of the same model (llm-compressor, FP8 decoder weights, vision
# encoder in bf16): the one olmOCR's own pipeline loads by default.
OLMOCR2_FP8 = dataclasses.replace(
    OLMOCR2, name="olmocr2-fp8", model_id="allenai/olmOCR-2-7B-1025-FP8", quantization="fp8"
)

PRESETS: dict[str, Preset] = {p.name: p for p in (CHANDRA2, LIGHTONOCR2, OLMOCR2, OLMOCR2_FP8)}


# Comma-separated modules whose ``PRESETS`` dict (name → Preset) adds presets: how a deployment (and
# the tests' tiny model) names its own models in a run's ``preset`` setting, e.g. under Airflow.
PRESET_MODULES_ENV = "CHANDRA_OCR_PRESET_MODULES"


def known_presets() -> dict[str, Preset]:
    """The built-in presets and those of the modules in ``$CHANDRA_OCR_PRESET_MODULES``."""
    found = dict(PRESETS)
    for module in filter(None, (m.strip() for m in os.environ.get(PRESET_MODULES_ENV, "").split(","))):
        try:
            extra = importlib.import_module(module).PRESETS
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"${PRESET_MODULES_ENV}: {module!r} has no PRESETS dict ({e})") from None
        found |= dict(extra)
    return found


def get_preset(name: str, **overrides: Any) -> Preset:
    """The preset called ``name`` (`known_presets`), with fields replaced by ``overrides``.

    Raises ConfigError for an unknown name (listing the known ones) or an unknown field.
    """
    presets = known_presets()
    preset = presets.get(name)
    if preset is None:
        raise ConfigError(
            f"preset {name!r} is unknown; known presets: {', '.join(sorted(presets))} (a deployment adds "
            f"its own with ${PRESET_MODULES_ENV})"
        )
    fields = {f.name for f in dataclasses.fields(Preset)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"unknown Preset field(s): {', '.join(unknown)}; known: {sorted(fields)}")
    return dataclasses.replace(preset, **overrides) if overrides else preset


def plan_for_preset(
    preset: Preset,
    *,
    gpu_total_bytes: int,
    gpu_free_bytes: int | None = None,
    memory_budget_bytes: int | None = None,
    kv_cache_dtype: str = "auto",
    quantization: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    page_size_pt: tuple[float, float] = (612.0, 792.0),
) -> PagingPlan:
    """``plan_paging`` with a preset's numbers: a typical page (US Letter by default) for the
    expected prompt, the render cap for the longest prompt, the sampling's ``max_tokens``, and
    the weights at ``quantization`` (default: the preset's own).

    Raises ConfigError when the preset has no ``dims`` or the quantization is unknown.
    """
    from chandra_ocr.pdf.render import target_size  # the renderer's own size rule (imports pymupdf)

    if preset.dims is None:
        raise ConfigError(f"preset {preset.name!r} has no model dimensions (dims) to size the KV cache")
    dims = dataclasses.replace(preset.dims, quantization=quantization or preset.quantization)
    spec = preset.render
    typical = dims.image_tokens(*target_size(*page_size_pt, spec)) + preset.prompt_text_tokens
    cap_pixels = min(spec.max_pixels, spec.longest_edge**2) if spec.longest_edge else spec.max_pixels
    longest = math.ceil(cap_pixels / dims.pixels_per_image_token) + preset.prompt_text_tokens
    return plan_paging(
        dims,
        gpu_total_bytes=gpu_total_bytes,
        gpu_free_bytes=gpu_free_bytes,
        memory_budget_bytes=memory_budget_bytes,
        prompt_tokens_per_page=typical,
        output_tokens_per_page=preset.expected_output_tokens,
        max_prompt_tokens=longest,
        max_output_tokens=preset.sampling.max_tokens,
        kv_cache_dtype=kv_cache_dtype,
        prefix_caching=bool(preset.engine_args.get("enable_prefix_caching", True)),
        overrides=overrides,
    )
