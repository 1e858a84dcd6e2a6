"""The tiny model's preset (chandra_ocr.testing.tiny_model builds the model folder it points at)."""

from __future__ import annotations

import functools
from pathlib import Path

from chandra_ocr.document import Block, ParsedPage, RenderSpec
from chandra_ocr.errors import ParseError
from chandra_ocr.ocr.presets import Preset, Sampling, user_image_message
from chandra_ocr.ocr.tuning import ModelDims
from chandra_ocr.testing.tiny_model import PAGE_EDGE

# For the paging sizer on CUDA (the CPU build sizes nothing): ≈ 0.2 M parameters; an image token per
# (16 px patch × scale factor 2)² pixels — tiling adds ~30 % more, max_model_len leaves room for it.
TINY_DIMS = ModelDims(
    name="tiny-idefics3",
    n_layers=2,
    n_kv_heads=1,
    head_dim=32,
    n_params=2.0e5,
    hidden_size=64,
    vocab_size=512,
    max_position=4096,
    pixels_per_image_token=32 * 32,
)


def _lenient_parse(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Any non-empty output is one text block covering the page (the tiny model writes noise)."""
    text = raw.strip()
    if not text:
        raise ParseError("empty output")
    return ParsedPage([Block(0, "text", (0.0, 0.0, width_pt, height_pt), text)], [])


def tiny_preset(
    model_dir: Path,
    *,
    max_tokens: int = 48,
    temperatures: tuple[float, ...] = (0.0, 0.5, 1.0),
    stop: tuple[str, ...] = ("e",),
) -> Preset:
    """A `Preset` for the tiny model: small renders, a short prompt, the lenient parser.

    The stop string ``e`` (a letter many of the trained merges contain) makes some attempts
    end with ``stop`` and others run to ``max_tokens`` or into a loop, so every path of the
    validity/retry logic is taken by real generations.
    """
    return Preset(
        name="tiny-idefics3",
        model_id=str(model_dir),
        output_format="text",
        render=RenderSpec(dpi=72, max_pixels=PAGE_EDGE * PAGE_EDGE, longest_edge=PAGE_EDGE),
        sampling=Sampling(max_tokens=max_tokens, temperatures=temperatures, stop=stop),
        build_messages=functools.partial(user_image_message, prompt="Read this page."),
        parse=_lenient_parse,
        engine_args={
            "max_model_len": 1024,
            "limit_mm_per_prompt": {"image": 1},
            "seed": 0,
            "distributed_executor_backend": "uni",  # the worker inside the engine process: ~30 s less start
        },
        licence="test model, random weights",
        dims=TINY_DIMS,
        expected_output_tokens=max_tokens,
    )
