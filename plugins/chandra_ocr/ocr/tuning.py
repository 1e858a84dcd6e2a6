"""Paging sizer: vLLM's concurrency and KV-cache settings derived from GPU memory and model dimensions.

Memory model (per GPU): ``gpu_memory_utilization × total`` = weights + headroom + KV pool.
Headroom = a fixed allowance for the CUDA context, CUDA graphs and allocator slack, plus the
activations of one batch of ``max_num_batched_tokens`` and the sampler's logits. The KV pool
holds ``2 × full-attention layers × kv_heads × head_dim × dtype bytes`` per token, plus — for
hybrid models with linear-attention layers — a fixed recurrent state per running sequence.
``max_num_seqs`` is how many pages of the expected length the pool holds at once.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chandra_ocr.errors import ConfigError

log = logging.getLogger(__name__)

GIB = 1024**3
FIXED_HEADROOM_BYTES = int(1.5 * GIB)  # CUDA context, CUDA graphs, allocator fragmentation
OTHER_PROCESSES_MARGIN_BYTES = GIB // 2  # left free when sizing from free/total memory
MAX_UTILIZATION = 0.92
MAX_NUM_SEQS_CAP = 512
ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN = 32  # ≈ 16 live bf16 values of hidden size per batched token
KV_DTYPE_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
# Weight quantizations the sizer can size: bytes per decoder weight. The vision encoder is counted at
# 16 bits, as the published FP8 checkpoints keep it; vLLM 0.25's online FP8 quantizes it too, so for
# that path the estimate errs on the safe side (~0.6 GiB on Qwen2.5-VL-7B).
WEIGHT_QUANT_BYTES = {"fp8": 1}


@dataclass(frozen=True)
class ModelDims:
    """Published architecture numbers of a model, as far as memory sizing needs them."""

    name: str
    n_layers: int  # decoder layers
    n_kv_heads: int
    head_dim: int
    n_params: float  # all weights, vision encoder included
    hidden_size: int
    vocab_size: int
    max_position: int  # the decoder's maximum context
    pixels_per_image_token: int  # image pixels per decoder token: (patch size × spatial merge)²
    full_attention_layers: int | None = None  # layers with a per-token KV cache; None = all
    state_bytes_per_seq: int = 0  # fixed recurrent state of linear-attention layers, per sequence
    dtype_bytes: int = 2  # weights (bf16)
    vision_params: float = 0.0  # of n_params: the vision encoder's (not quantized)
    quantization: str | None = None  # decoder weights quantized (WEIGHT_QUANT_BYTES); None: dtype_bytes

    def __post_init__(self) -> None:
        if self.quantization is not None and self.quantization not in WEIGHT_QUANT_BYTES:
            raise ConfigError(
                f"quantization must be one of {sorted(WEIGHT_QUANT_BYTES)} or none, got {self.quantization!r}"
            )

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weights: the decoder at its quantized size (if any), the vision encoder 16-bit."""
        decoder = self.n_params - self.vision_params
        per_param = WEIGHT_QUANT_BYTES[self.quantization] if self.quantization else self.dtype_bytes
        return int(decoder * per_param + self.vision_params * self.dtype_bytes)

    @property
    def kv_layers(self) -> int:
        """Layers that keep a per-token KV cache."""
        return self.n_layers if self.full_attention_layers is None else self.full_attention_layers

    def kv_bytes_per_token(self, kv_dtype_bytes: int | None = None) -> int:
        """2 (K and V) × KV layers × KV heads × head_dim × bytes (default: the weight dtype)."""
        return 2 * self.kv_layers * self.n_kv_heads * self.head_dim * (kv_dtype_bytes or self.dtype_bytes)

    def image_tokens(self, width_px: int, height_px: int) -> int:
        """Decoder tokens of one image of this size."""
        return math.ceil(width_px * height_px / self.pixels_per_image_token)


# datalab-to/chandra-ocr-2: a Qwen3.5 (4B-class) fine-tune — hidden 2560, 32 decoder layers of
# which every 4th is full attention (8 layers, GQA 16 query / 4 KV heads, head_dim 256), the
# other 24 Gated-DeltaNet linear attention (16 key / 32 value heads of dim 128, conv kernel 4)
# whose state is per sequence, not per token: recurrent 32×128×128 in fp32 (the config's
# mamba_ssm_dtype) + conv (2·16·128 + 32·128)×3 in bf16 per layer. ≈ 4.6 B text parameters
# (9.25 GB as 16-bit GGUF) + ≈ 0.4 B vision encoder; vision patches 16 px, merged 2×2.
CHANDRA_OCR_2 = ModelDims(
    name="datalab-to/chandra-ocr-2",
    n_layers=32,
    full_attention_layers=8,
    n_kv_heads=4,
    head_dim=256,
    n_params=5.0e9,
    hidden_size=2560,
    vocab_size=248_320,
    max_position=262_144,
    pixels_per_image_token=32 * 32,
    vision_params=0.4e9,
    state_bytes_per_seq=24 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2),
)

# lightonai/LightOnOCR-2-1B: Pixtral-style vision encoder (24 layers, 1024 wide, 14 px patches,
# 2×2 spatial merge) + Qwen3 decoder (28 layers, hidden 1024, 8 KV heads of dim 128, the
# Qwen3-0.6B shape); ≈ 1 B parameters (≈ 2 GB of bf16 safetensors).
LIGHTONOCR_2_1B = ModelDims(
    name="lightonai/LightOnOCR-2-1B",
    n_layers=28,
    n_kv_heads=8,
    head_dim=128,
    n_params=1.0e9,
    hidden_size=1024,
    vocab_size=151_936,
    max_position=40_960,
    pixels_per_image_token=28 * 28,
    vision_params=0.4e9,
)

# Qwen/Qwen2.5-VL-7B-Instruct (olmOCR-2's base): 28 layers, GQA 28 / 4 KV heads, head_dim 128,
# hidden 3584, ≈ 8.3 B parameters in bf16 (≈ 0.67 B of them the 32-layer, 1280-wide vision encoder);
# vision patches 14 px merged 2×2.
QWEN2_5_VL_7B = ModelDims(
    name="Qwen/Qwen2.5-VL-7B-Instruct",
    n_layers=28,
    n_kv_heads=4,
    head_dim=128,
    n_params=8.3e9,
    hidden_size=3584,
    vocab_size=152_064,
    max_position=128_000,
    pixels_per_image_token=28 * 28,
    vision_params=0.67e9,
)


@dataclass(frozen=True)
class PagingPlan:
    """vLLM engine settings for one GPU, with the estimates behind them."""

    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    enable_prefix_caching: bool
    kv_cache_dtype: str
    kv_bytes_per_token: int
    kv_capacity_tokens: int  # estimated; vLLM reports the real number after profiling
    expected_tokens_per_page: int
    reason: str

    def as_engine_args(self) -> dict[str, Any]:
        """The vLLM engine arguments (``vllm.LLM(**…)`` / ``vllm serve --…``)."""
        return {
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "enable_prefix_caching": self.enable_prefix_caching,
            "kv_cache_dtype": self.kv_cache_dtype,
        }


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _round_seqs(n: int) -> int:
    """A multiple of 8 from 8 on, else a power of two; within [1, MAX_NUM_SEQS_CAP]."""
    n = min(n, MAX_NUM_SEQS_CAP)
    if n >= 8:
        return n // 8 * 8
    return 1 << (max(n, 1).bit_length() - 1)


def _utilization(total: int, free: int | None, budget: int | None) -> tuple[float, str]:
    if budget is not None:
        usable, why = min(budget, free if free is not None else budget), "memory budget"
    else:
        usable = (free if free is not None else total) - OTHER_PROCESSES_MARGIN_BYTES
        why = "free memory" if free is not None else "total memory"
        usable = min(usable, int(total * MAX_UTILIZATION))
    util = math.floor(usable / total * 100) / 100
    if util <= 0:
        raise ConfigError(f"no GPU memory to use: {usable / GIB:.1f} GiB usable of {total / GIB:.1f} GiB")
    return util, f"{why} → gpu_memory_utilization {util:.2f}"


def _headroom(dims: ModelDims, batched_tokens: int) -> int:
    activations = batched_tokens * dims.hidden_size * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN
    logits = MAX_NUM_SEQS_CAP * dims.vocab_size * 4  # fp32 sampler logits, worst case
    return FIXED_HEADROOM_BYTES + activations + logits


def _check_overrides(overrides: Mapping[str, Any]) -> None:
    names = {f.name for f in dataclasses.fields(PagingPlan)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"unknown paging override(s): {', '.join(unknown)}; known: {sorted(names)}")


def _kv_dtype_bytes(dims: ModelDims, kv_cache_dtype: str) -> int:
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise ConfigError(f"kv_cache_dtype must be one of {sorted(KV_DTYPE_BYTES)}, got {kv_cache_dtype!r}")
    return KV_DTYPE_BYTES[kv_cache_dtype] or dims.dtype_bytes


def plan_paging(
    dims: ModelDims,
    *,
    gpu_total_bytes: int,
    gpu_free_bytes: int | None = None,
    memory_budget_bytes: int | None = None,
    prompt_tokens_per_page: int,
    output_tokens_per_page: int,
    max_prompt_tokens: int | None = None,
    max_output_tokens: int | None = None,
    kv_cache_dtype: str = "auto",
    prefix_caching: bool,
    overrides: Mapping[str, Any] | None = None,
) -> PagingPlan:
    """Size vLLM's paging for ``dims`` on one GPU.

    Takes the GPU's total (and, when known, free) bytes or an explicit ``memory_budget_bytes``,
    the expected prompt (image + text) and output tokens of a page, and the longest prompt and
    output a request may have (default: the expected ones), which set ``max_model_len``. Any
    ``PagingPlan`` field in ``overrides`` replaces the derived value (the others are derived
    from it). Raises ConfigError for unknown overrides or a model that does not fit.
    """
    ov = dict(overrides or {})
    _check_overrides(ov)
    kv_dtype = str(ov.get("kv_cache_dtype", kv_cache_dtype))
    kv_bpt = dims.kv_bytes_per_token(_kv_dtype_bytes(dims, kv_dtype))
    block_size = int(ov.get("block_size", 16))
    max_prompt = max(max_prompt_tokens or 0, prompt_tokens_per_page)
    longest = max_prompt + (max_output_tokens or output_tokens_per_page)
    max_model_len = int(ov.get("max_model_len", min(dims.max_position, longest)))
    batched = int(ov.get("max_num_batched_tokens", _batched_tokens(prompt_tokens_per_page, max_prompt)))
    mem = _memory(dims, ov, batched, gpu_total_bytes, gpu_free_bytes, memory_budget_bytes)
    mem.check_fits(dims, max_model_len * kv_bpt + dims.state_bytes_per_seq, max_model_len)
    expected = prompt_tokens_per_page + output_tokens_per_page
    per_page = expected * kv_bpt + dims.state_bytes_per_seq
    seqs = int(ov.get("max_num_seqs", _round_seqs(mem.pool // per_page)))
    if "max_num_batched_tokens" not in ov:
        batched = _round_up(max(batched, seqs), block_size)
    derived = PagingPlan(
        gpu_memory_utilization=mem.utilization,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        max_model_len=max_model_len,
        block_size=block_size,
        enable_prefix_caching=bool(ov.get("enable_prefix_caching", prefix_caching)),
        kv_cache_dtype=kv_dtype,
        kv_bytes_per_token=kv_bpt,
        kv_capacity_tokens=int((mem.pool - seqs * dims.state_bytes_per_seq) // kv_bpt),
        expected_tokens_per_page=expected,
        reason="",
    )
    reason = _reason(dims, derived, mem, mem.pool // per_page, prompt_tokens_per_page, ov)
    return dataclasses.replace(
        derived, **{"reason": reason} | {k: v for k, v in ov.items() if k in _ESTIMATES}
    )


_ESTIMATES = ("kv_bytes_per_token", "kv_capacity_tokens", "expected_tokens_per_page", "reason")


@dataclass(frozen=True)
class _Memory:
    """How one GPU's memory divides: budget = weights + headroom + KV pool."""

    total: int
    utilization: float
    why: str
    budget: int
    headroom: int
    pool: int

    def check_fits(self, dims: ModelDims, need: int, max_model_len: int) -> None:
        """Raise ConfigError unless the pool holds one ``max_model_len`` request (``need`` bytes)."""
        if self.pool >= need:
            return
        raise ConfigError(
            f"{dims.name} does not fit: {self.budget / GIB:.1f} GiB budget ({self.why}) − weights "
            f"{dims.weight_bytes / GIB:.1f} GiB − headroom {self.headroom / GIB:.1f} GiB leaves "
            f"{max(self.pool, 0) / GIB:.2f} GiB for the KV cache, but one {max_model_len}-token request "
            f"needs {need / GIB:.2f} GiB; use a larger GPU, fp8 KV cache, a smaller max_model_len or "
            "tensor parallelism"
        )


def _memory(
    dims: ModelDims, ov: Mapping[str, Any], batched: int, total: int, free: int | None, budget: int | None
) -> _Memory:
    if "gpu_memory_utilization" in ov:
        util, why = float(ov["gpu_memory_utilization"]), "override"
    else:
        util, why = _utilization(total, free, budget)
    usable = int(util * total)
    headroom = _headroom(dims, batched)
    return _Memory(total, util, why, usable, headroom, usable - dims.weight_bytes - headroom)


def _reason(
    dims: ModelDims, plan: PagingPlan, mem: _Memory, pages: int, prompt: int, ov: Mapping[str, Any]
) -> str:
    """The numbers behind a plan, for the task log; overridden values are marked."""

    def mark(name: str) -> str:
        return " (override)" if name in ov else ""

    state = f" + {dims.state_bytes_per_seq / 2**20:.0f} MiB state" if dims.state_bytes_per_seq else ""
    quant = f" ({dims.quantization} decoder)" if dims.quantization else ""
    return (
        f"{dims.name}: {mem.budget / GIB:.1f} GiB of {mem.total / GIB:.1f} GiB ({mem.why}); weights "
        f"{dims.weight_bytes / GIB:.1f} GiB{quant}; headroom {mem.headroom / GIB:.1f} GiB (CUDA "
        f"context/graphs + activations + sampler logits); KV pool {mem.pool / GIB:.1f} GiB at "
        f"{plan.kv_bytes_per_token} "
        f"B/token ({plan.kv_cache_dtype}, {dims.kv_layers} KV layers) ≈ {plan.kv_capacity_tokens} tokens; "
        f"a page ≈ {prompt} prompt + {plan.expected_tokens_per_page - prompt} output tokens{state}, "
        f"{pages} pages fit → gpu_memory_utilization {plan.gpu_memory_utilization:.2f}"
        f"{mark('gpu_memory_utilization')}, max_num_seqs {plan.max_num_seqs}{mark('max_num_seqs')}, "
        f"max_num_batched_tokens {plan.max_num_batched_tokens}{mark('max_num_batched_tokens')}, "
        f"max_model_len {plan.max_model_len}{mark('max_model_len')} (longest prompt + longest output), "
        f"block_size {plan.block_size}, prefix caching {plan.enable_prefix_caching}"
    )


def _batched_tokens(prompt_tokens: int, max_prompt: int) -> int:
    """Room for about two page prefills per step (≥ the longest prompt, ≥ 2048, ≤ 32768)."""
    return min(max(2 * prompt_tokens, max_prompt, 2048), 32_768)


def detect_gpu_memory(device: int | None = None) -> tuple[int, int] | None:
    """(free, total) bytes of the current (or given) CUDA device, or None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        free, total = torch.cuda.mem_get_info(device)
    except RuntimeError as e:
        log.warning("cannot read GPU memory: %s", e)
        return None
    return int(free), int(total)
