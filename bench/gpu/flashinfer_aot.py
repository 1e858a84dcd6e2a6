"""FlashInfer for the H200 runs of vLLM's FLASHINFER attention backend, its kernels built ahead of time.

vLLM 0.25 on Hopper with an FP8 KV cache decodes with FlashInfer's XQA kernel and prefills with
FlashInfer's FA3 template; both are compiled at first use (nvcc, minutes of device time). ``build``
compiles the modules the olmOCR-2 shape asks for (Qwen2.5-VL-7B: 28 query heads, 4 KV heads, head dim
128, KV pages of 16 tokens) on a machine without a GPU into ``flashinfer/data/aot`` of an unpacked
flashinfer-python, where FlashInfer loads them instead of compiling; ``check`` (on the GPU machine)
loads each one and moves the folder aside when any fails, so that FlashInfer compiles there instead.

    PYTHONPATH=SITE python -m bench.gpu.flashinfer_aot build  # SITE: flashinfer-python 0.6.13, tvm_ffi
    PYTHONPATH=SITE python -m bench.gpu.flashinfer_aot check

``build`` needs ``nvcc`` (CUDA 13.0, as on the H200), ``CUDA_HOME``, cuRAND's headers on ``CPATH`` and,
where no driver is installed, a ``libcuda.so`` (soname ``libcuda.so.1``) on ``LIBRARY_PATH`` for the link
that defines the driver functions the modules call (XQA: ``cuGetErrorName``, ``cuTensorMapEncodeTiled``):
the linker drops a stub that defines none of them, and the module then fails at its first call on the
GPU. ``build`` refuses such a library. It targets Hopper (``FLASHINFER_CUDA_ARCH_LIST=9.0a``) unless told
otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HEADS, KV_HEADS, HEAD_DIM, PAGE = 28, 4, 128, 16


def specs() -> dict[str, Any]:
    """The JIT specs of the modules vLLM asks for: XQA decode and FA3 prefill, FP8 and bf16 KV caches."""
    import torch
    from flashinfer.jit.attention.modules import gen_batch_prefill_module
    from flashinfer.jit.xqa import gen_xqa_module

    bf16, fp8 = torch.bfloat16, torch.float8_e4m3fn
    grp = HEADS // KV_HEADS
    # gen_batch_prefill_module: q, kv, out and index dtypes; qk and vo head dims; no rope, window, soft cap
    # or fp16 qk reduction
    return {
        "xqa_fp8": gen_xqa_module(bf16, fp8, PAGE, HEAD_DIM, grp, False, bf16, 1),
        "prefill_fp8": gen_batch_prefill_module(
            "fa3", fp8, fp8, bf16, torch.int32, HEAD_DIM, HEAD_DIM, 0, False, False, False
        ),
        "xqa_bf16": gen_xqa_module(bf16, bf16, PAGE, HEAD_DIM, grp, False, bf16, 1),
        "prefill_bf16": gen_batch_prefill_module(
            "fa3", bf16, bf16, bf16, torch.int32, HEAD_DIM, HEAD_DIM, 0, False, False, False
        ),
    }


def build(names: list[str]) -> None:
    """Compile the named modules (all when none named) and copy each library into the AOT folder."""
    for name, spec in specs().items():
        if names and name not in names:
            continue
        t0 = time.perf_counter()
        spec.build(verbose=False)
        refuse_unlinked_driver_calls(spec.jit_library_path)
        spec.aot_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(spec.jit_library_path, spec.aot_path)
        print(f"{name}: {spec.aot_path.name} {time.perf_counter() - t0:.0f} s", flush=True)


def refuse_unlinked_driver_calls(lib: Path) -> None:
    """Raise SystemExit when ``lib`` calls CUDA driver functions without needing ``libcuda.so.1``."""
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True)
    calls = [line.split()[-1] for line in undefined.stdout.splitlines() if line.split()[-1].startswith("cu")]
    calls = [c for c in calls if c[2:3].isupper()]  # cuTensorMapEncodeTiled, not cudaMalloc
    needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    if calls and "libcuda.so.1" not in needed:
        lib.unlink()
        raise SystemExit(
            f"{lib.name} calls {', '.join(calls)} but does not need libcuda.so.1: put a libcuda.so "
            "(soname libcuda.so.1) that defines them on LIBRARY_PATH and build again"
        )


def check() -> int:
    """Load every pre-built module; on any failure move the AOT folder aside (FlashInfer then compiles)."""
    import tvm_ffi
    from flashinfer.jit import env

    aot = Path(env.FLASHINFER_AOT_DIR)
    libs = sorted(aot.glob("*/*.so"))
    try:
        for lib in libs:
            tvm_ffi.load_module(str(lib))
    except Exception as exc:  # any load error: fall back to compiling on this machine
        print(f"pre-built FlashInfer module failed to load ({exc}); moving {aot} aside", flush=True)
        aot.rename(aot.with_name("aot.unloadable"))
        return 1
    print(f"{len(libs)} pre-built FlashInfer modules load", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument("modules", nargs="*", help="only these: xqa_fp8 prefill_fp8 xqa_bf16 prefill_bf16")
    args = parser.parse_args()
    if args.command == "build":
        os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
        build(args.modules)
        return 0
    return check()


if __name__ == "__main__":
    sys.exit(main())
