"""A vLLM plugin: LightOnOCR's Pixtral image encoder attends per image instead of over a dense mask.

vLLM up to 0.25 runs the Pixtral (HF layout) vision encoder with xformers' block-diagonal
attention; without xformers (vLLM does not install it) it builds a dense ``N × N`` additive mask
over all images of a step and calls ``scaled_dot_product_attention`` with it. A mask rules out
the FlashAttention kernel, and every image attends over every patch of the step: with two
1540 px pages (≈ 9,350 patches each) a step computes 4× the attention of one page, in the
slower masked kernel — the image encoder, not decoding, then bounds LightOnOCR-2 (see
bench/results/gpu_h200.json). Newer vLLM releases pass sequence lengths to a varlen kernel
and need nothing here.

With this plugin (entry point ``vllm.general_plugins``, loaded by vLLM in each of its processes)
the mask builder returns the images' patch counts instead, and the attention runs one unmasked
(FlashAttention) call per image. It changes nothing when vLLM has xformers or no longer has that
code path, or when ``CHANDRA_OCR_PIXTRAL_PER_IMAGE=0``. Caveat: it replaces
``transformers``' ``generate_block_attention_mask`` in the process, which only the Pixtral
modelling code calls; do not run transformers' own Pixtral model in a vLLM process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)
ENV = "CHANDRA_OCR_PIXTRAL_PER_IMAGE"


class ImagePatchCounts:
    """Stands in for the dense block-diagonal mask: the patch count of each image, in order."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.counts = [int(c) for c in counts]


def _patch_counts(patch_embeds_list: Sequence[int], tensor: Any) -> ImagePatchCounts:
    return ImagePatchCounts(patch_embeds_list)


def per_image_attention(q: Any, k: Any, v: Any, counts: Sequence[int]) -> Any:
    """Attention of (batch, heads, patches, dim) tensors within each image's run of patches."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    parts = zip(q.split(counts, dim=2), k.split(counts, dim=2), v.split(counts, dim=2), strict=True)
    return torch.cat([scaled_dot_product_attention(qi, ki, vi) for qi, ki, vi in parts], dim=2)


def register() -> None:
    """Install the per-image attention where vLLM would build a dense mask; else do nothing."""
    if os.environ.get(ENV, "1") == "0":
        return
    try:
        import transformers.models.pixtral.modeling_pixtral as hf_pixtral
        import vllm.model_executor.models.pixtral as pixtral
    except Exception:  # no vLLM, or a vLLM/transformers pair that cannot load Pixtral at all
        return
    attention = getattr(pixtral, "PixtralHFAttention", None)
    if getattr(pixtral, "USE_XFORMERS_OPS", True) or attention is None:
        return
    if not hasattr(hf_pixtral, "generate_block_attention_mask") or getattr(attention, "_per_image", False):
        return
    dense_forward = attention.forward
    rotary = pixtral.apply_rotary_pos_emb

    def forward(self: Any, hidden_states: Any, attention_mask: Any, position_embeddings: Any) -> Any:
        if not isinstance(attention_mask, ImagePatchCounts):
            return dense_forward(self, hidden_states, attention_mask, position_embeddings)
        batch, patches, _ = hidden_states.size()
        q, k, v = self.qkv_proj(hidden_states)[0].chunk(3, dim=-1)
        q, k, v = (t.view(batch, patches, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        cos, sin = position_embeddings
        q, k = rotary(q, k, cos, sin, unsqueeze_dim=0)
        out = per_image_attention(q, k, v, attention_mask.counts)
        out = out.transpose(1, 2).reshape(batch, patches, self.n_heads * self.head_dim)
        return self.o_proj(out)[0], None

    hf_pixtral.generate_block_attention_mask = _patch_counts
    attention.forward = forward
    attention._per_image = True
    log.info("Pixtral vision attention: one FlashAttention call per image (no dense mask)")
