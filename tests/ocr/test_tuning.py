"""Paging sizer on the published model dimensions and real GPU memory sizes."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.tuning import (
    CHANDRA_OCR_2,
    KV_DTYPE_BYTES,
    LIGHTONOCR_2_1B,
    MAX_NUM_SEQS_CAP,
    QWEN2_5_VL_7B,
    ModelDims,
    PagingPlan,
    detect_gpu_memory,
    plan_paging,
)

MIB, GIB = 2**20, 2**30
# Total memory per nvidia-smi (MiB). CUDA reports a little less: an H200 gave 143,156 MiB
# (torch.cuda.mem_get_info on the device machine, 2026-11-30).
GPUS = {"L4": 23_034 * MIB, "RTX 4090": 24_564 * MIB, "H100 80GB": 81_559 * MIB, "H200": 143_771 * MIB}
# (prompt tokens of a typical page, output tokens, longest prompt, longest output) per model
PAGES = {
    CHANDRA_OCR_2.name: (3_931, 2_500, 6_744, 12_384),
    LIGHTONOCR_2_1B.name: (2_326, 1_200, 3_041, 4_096),
    QWEN2_5_VL_7B.name: (2_200, 1_500, 2_200, 8_000),
}


def _plan(dims: ModelDims, total: int, **kw) -> PagingPlan:
    prompt, output, max_prompt, max_output = PAGES[dims.name]
    kw.setdefault("prefix_caching", True)
    return plan_paging(
        dims,
        gpu_total_bytes=total,
        prompt_tokens_per_page=prompt,
        output_tokens_per_page=output,
        max_prompt_tokens=max_prompt,
        max_output_tokens=max_output,
        **kw,
    )


def test_kv_bytes_per_token_from_the_published_dimensions():
    # 2 (K, V) × KV layers × KV heads × head_dim × 2 bytes (bf16)
    assert CHANDRA_OCR_2.kv_bytes_per_token() == 2 * 8 * 4 * 256 * 2  # 8 full-attention layers of 32
    assert LIGHTONOCR_2_1B.kv_bytes_per_token() == 2 * 28 * 8 * 128 * 2
    assert QWEN2_5_VL_7B.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2
    assert QWEN2_5_VL_7B.kv_bytes_per_token(1) * 2 == QWEN2_5_VL_7B.kv_bytes_per_token()
    # Gated-DeltaNet state of the 24 linear layers: fp32 recurrent + bf16 conv, per sequence
    assert CHANDRA_OCR_2.state_bytes_per_seq == 24 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)
    assert CHANDRA_OCR_2.kv_layers == 8 and QWEN2_5_VL_7B.kv_layers == 28


def test_image_tokens():
    assert LIGHTONOCR_2_1B.image_tokens(1540, 1176) == 55 * 42  # 28 px per token each way
    assert CHANDRA_OCR_2.image_tokens(3072, 2048) == 96 * 64  # 32 px per token each way


@pytest.mark.parametrize("dims", [CHANDRA_OCR_2, LIGHTONOCR_2_1B], ids=lambda d: d.name)
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_plans_on_real_gpus_are_sane(dims, gpu):
    total = GPUS[gpu]
    plan = _plan(dims, total)
    assert 0.5 < plan.gpu_memory_utilization <= 0.92
    budget = plan.gpu_memory_utilization * total
    assert dims.weight_bytes < budget  # weights fit
    assert plan.kv_capacity_tokens > plan.max_model_len  # one longest request fits
    pool_bytes = (
        plan.kv_capacity_tokens * plan.kv_bytes_per_token + plan.max_num_seqs * dims.state_bytes_per_seq
    )
    assert dims.weight_bytes + pool_bytes < budget
    assert 8 <= plan.max_num_seqs <= MAX_NUM_SEQS_CAP and plan.max_num_seqs % 8 == 0
    # the running pages fit the pool at the expected length
    assert plan.max_num_seqs * plan.expected_tokens_per_page <= plan.kv_capacity_tokens
    prompt, output, max_prompt, max_output = PAGES[dims.name]
    assert plan.max_model_len == max_prompt + max_output <= dims.max_position
    assert plan.max_num_batched_tokens >= max(max_prompt, plan.max_num_seqs)
    assert plan.max_num_batched_tokens % plan.block_size == 0
    assert plan.expected_tokens_per_page == prompt + output
    assert str(plan.max_num_seqs) in plan.reason and dims.name in plan.reason


@pytest.mark.parametrize("dims", [CHANDRA_OCR_2, LIGHTONOCR_2_1B, QWEN2_5_VL_7B], ids=lambda d: d.name)
def test_more_memory_never_means_fewer_sequences(dims):
    plans = [_plan(dims, total) for total in sorted(GPUS.values())]
    seqs = [p.max_num_seqs for p in plans]
    capacity = [p.kv_capacity_tokens for p in plans]
    assert seqs == sorted(seqs) and capacity == sorted(capacity) and capacity[0] < capacity[-1]


@pytest.mark.parametrize("dims", [LIGHTONOCR_2_1B, QWEN2_5_VL_7B], ids=lambda d: d.name)
def test_fp8_kv_cache_doubles_capacity(dims):
    auto = _plan(dims, GPUS["H100 80GB"])
    fp8 = _plan(dims, GPUS["H100 80GB"], kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == auto.kv_bytes_per_token
    assert fp8.kv_capacity_tokens == pytest.approx(2 * auto.kv_capacity_tokens, abs=2)
    assert fp8.max_num_seqs >= auto.max_num_seqs and fp8.kv_cache_dtype == "fp8"


def test_fp8_on_the_hybrid_model_halves_kv_but_not_the_recurrent_state():
    auto = _plan(CHANDRA_OCR_2, GPUS["L4"])
    fp8 = _plan(CHANDRA_OCR_2, GPUS["L4"], kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == auto.kv_bytes_per_token
    assert auto.max_num_seqs < fp8.max_num_seqs < 2 * auto.max_num_seqs + 8


def test_a_model_that_does_not_fit_raises_a_clear_config_error():
    with pytest.raises(ConfigError, match=r"does not fit.*weights 15\.5 GiB"):
        _plan(QWEN2_5_VL_7B, GPUS["L4"], memory_budget_bytes=12 * GIB)
    with pytest.raises(ConfigError, match="does not fit"):
        _plan(CHANDRA_OCR_2, 8 * GIB)


def test_free_memory_and_budget_lower_the_utilisation():
    total = GPUS["H100 80GB"]
    full = _plan(LIGHTONOCR_2_1B, total)
    shared = _plan(LIGHTONOCR_2_1B, total, gpu_free_bytes=40 * GIB)
    budget = _plan(LIGHTONOCR_2_1B, total, memory_budget_bytes=20 * GIB)
    assert shared.gpu_memory_utilization * total <= 40 * GIB - GIB // 2
    assert budget.gpu_memory_utilization == pytest.approx(20 * GIB / total, abs=0.01)
    assert budget.gpu_memory_utilization * total <= 20 * GIB
    assert budget.max_num_seqs < shared.max_num_seqs < full.max_num_seqs


def test_overrides_win_and_the_rest_follows():
    plan = _plan(
        LIGHTONOCR_2_1B,
        GPUS["L4"],
        overrides={
            "max_num_seqs": 7,
            "gpu_memory_utilization": 0.6,
            "block_size": 32,
            "kv_cache_dtype": "fp8",
        },
    )
    assert (plan.max_num_seqs, plan.gpu_memory_utilization, plan.block_size) == (7, 0.6, 32)
    assert plan.kv_cache_dtype == "fp8" and plan.kv_bytes_per_token == LIGHTONOCR_2_1B.kv_bytes_per_token(1)
    assert "(override)" in plan.reason
    fixed = _plan(
        LIGHTONOCR_2_1B, GPUS["L4"], overrides={"max_num_batched_tokens": 5000, "max_model_len": 9000}
    )
    assert (fixed.max_num_batched_tokens, fixed.max_model_len) == (5000, 9000)
    assert (
        _plan(LIGHTONOCR_2_1B, GPUS["L4"], overrides={"enable_prefix_caching": False}).enable_prefix_caching
        is False
    )
    assert _plan(LIGHTONOCR_2_1B, GPUS["L4"], overrides={"reason": "pinned"}).reason == "pinned"
    with pytest.raises(ConfigError, match="max_num_seq\\b|max_num_seq,|max_num_seq;"):
        _plan(LIGHTONOCR_2_1B, GPUS["L4"], overrides={"max_num_seq": 8})
    with pytest.raises(ConfigError, match="kv_cache_dtype"):
        _plan(LIGHTONOCR_2_1B, GPUS["L4"], kv_cache_dtype="int3")


def test_max_model_len_is_capped_by_the_model():
    tiny_context = dataclasses.replace(LIGHTONOCR_2_1B, max_position=4096)
    plan = plan_paging(
        tiny_context,
        gpu_total_bytes=GPUS["L4"],
        prompt_tokens_per_page=2000,
        output_tokens_per_page=1000,
        max_output_tokens=8000,
        prefix_caching=False,
    )
    assert plan.max_model_len == 4096


@pytest.mark.slow
def test_engine_args_and_kv_dtypes_are_real_vllm_options():
    """The plan's keys, the presets' engine args and our KV dtypes exist in the installed vLLM."""
    from vllm.config.cache import CacheDType
    from vllm.engine.arg_utils import EngineArgs

    from chandra_ocr.ocr.presets import PRESETS

    names = {f.name for f in dataclasses.fields(EngineArgs)}
    assert set(_plan(LIGHTONOCR_2_1B, GPUS["L4"]).as_engine_args()) <= names
    for preset in PRESETS.values():
        assert set(preset.engine_args) <= names, preset.name
    assert set(KV_DTYPE_BYTES) <= set(typing.get_args(CacheDType))


def test_detect_gpu_memory_matches_torch():
    import torch

    found = detect_gpu_memory()
    if not torch.cuda.is_available():
        assert found is None
    else:
        free, total = found
        assert 0 < free <= total
