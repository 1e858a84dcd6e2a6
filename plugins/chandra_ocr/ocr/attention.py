"""Which decoder attention backend the vLLM engine asks for (``vllm.LLM(attention_backend=...)``).

On Hopper vLLM 0.25 reads an FP8 KV cache with FlashAttention 3 unless told otherwise; its
FLASHINFER backend decodes such a cache with FlashInfer's XQA kernel instead. Measured on one H100
(``bench/results/gpu_h200.json``: the olmOCR-2 shape, 1,024 pages at the corpus lengths, one
machine): FP8 weights + FP8 KV 7.54 pages/s on FlashInfer against 7.18 on FlashAttention 3
(+5 %, the gain in the long-context decode steps); bf16 5.14 against 5.33, so a 16-bit cache keeps
vLLM's choice.
"""

from __future__ import annotations

import os
import shutil
from importlib.util import find_spec

FLASHINFER = "FLASHINFER"
FIRST_MEASURED_VLLM = (0, 25)  # XQA decode of an FP8 cache on Hopper, as measured


def default_attention_backend(kv_cache_dtype: str) -> str | None:
    """FLASHINFER for an FP8 KV cache on a Hopper GPU where FlashInfer's XQA kernel can be had;
    None (vLLM's own choice) otherwise.

    FlashInfer compiles XQA at first use, which needs ``nvcc`` or its pre-built kernel package
    (flashinfer-jit-cache); vLLM decodes with XQA only where flashinfer-cubin is installed (vLLM's
    CUDA wheels depend on it) or ``VLLM_HAS_FLASHINFER_CUBIN`` is set.
    """
    if not kv_cache_dtype.startswith("fp8"):
        return None
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        return None
    import vllm
    from packaging.version import Version  # a dependency of vLLM's

    if Version(vllm.__version__).release[:2] < FIRST_MEASURED_VLLM:
        return None
    if find_spec("flashinfer") is None:
        return None
    kernels = shutil.which("nvcc") is not None or find_spec("flashinfer_jit_cache") is not None
    cubin_env = os.environ.get("VLLM_HAS_FLASHINFER_CUBIN", "").lower() in ("1", "true")
    xqa = find_spec("flashinfer_cubin") is not None or cubin_env
    return FLASHINFER if kernels and xqa else None
