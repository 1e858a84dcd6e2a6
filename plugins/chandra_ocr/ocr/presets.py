"""Model presets: everything model-specific (prompt, render budget, sampling, parser, engine args).

Engines only read a ``Preset``; adding a model means adding one entry to ``PRESETS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from chandra_ocr.document import Block, Table
from chandra_ocr.pdf.render_spec import RenderSpec

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class ParsedPage:
    """Blocks and tables parsed from one page of model output, bboxes in PDF points."""

    blocks: list[Block]
    tables: list[Table]


@dataclass(frozen=True)
class Sampling:
    """Sampling per attempt: attempt i uses ``temperatures[i]``; len(temperatures) = max attempts."""

    max_tokens: int
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.6)
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0


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
