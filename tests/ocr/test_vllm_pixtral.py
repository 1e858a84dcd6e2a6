"""The Pixtral per-image attention plugin: same numbers as the dense block-diagonal mask it replaces."""

from __future__ import annotations

import importlib.metadata

import pytest

torch = pytest.importorskip("torch")

from chandra_ocr.ocr import vllm_pixtral  # noqa: E402


def dense_block_diagonal(q, k, v, counts):
    """What vLLM ≤ 0.25 computes without xformers: one masked attention over all images."""
    n = sum(counts)
    mask = torch.full((n, n), torch.finfo(q.dtype).min, dtype=q.dtype)
    start = 0
    for c in counts:
        mask[start : start + c, start : start + c] = 0
        start += c
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])


def test_per_image_attention_equals_the_dense_mask():
    gen = torch.Generator().manual_seed(0)
    counts = [37, 5, 64]
    q, k, v = (torch.randn(1, 4, sum(counts), 16, generator=gen) for _ in range(3))
    ours = vllm_pixtral.per_image_attention(q, k, v, counts)
    assert torch.allclose(ours, dense_block_diagonal(q, k, v, counts), atol=1e-5)
    # and it is not plain attention over all patches (the mask matters)
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(ours, plain, atol=1e-3)


def test_counts_that_do_not_cover_the_patches_fail():
    q = torch.zeros(1, 2, 10, 8)
    with pytest.raises(RuntimeError):
        vllm_pixtral.per_image_attention(q, q, q, [4, 4])


def test_register_never_raises_and_the_entry_point_names_it():
    vllm_pixtral.register()  # here vLLM's Pixtral module may not even import: it must stay silent
    dist = importlib.metadata.distribution("chandra-ocr-airflow")
    plugins = [ep for ep in dist.entry_points if ep.group == "vllm.general_plugins"]
    if not plugins:
        pytest.skip("the installed metadata predates the entry point (reinstall the project)")
    assert plugins[0].value == "chandra_ocr.ocr.vllm_pixtral:register"
