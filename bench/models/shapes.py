"""Published architecture numbers of the benchmarked OCR models, as files vLLM loads with dummy weights.

Each shape is the real model's ``config.json`` values (layer counts, widths, heads, vocabulary,
special-token ids), its image processor settings and a chat template of the same form. With
``load_format="dummy"`` and ``ignore_eos`` the compute per page is the real model's; the text is noise.
The decoder numbers the product sizes memory by (its presets' ``ModelDims``) are read from there
(``decoder``): one place owns them; the rest (query heads, MLP widths, the vision tower, token ids)
is written here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from chandra_ocr.ocr.presets import get_preset

# Qwen2 / Qwen2.5 / Qwen3 / Qwen3.5 share this run of special tokens, starting at the first special id.
QWEN_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# One user turn: image then text, in the Qwen chat format; image parts become the vision placeholder.
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# LightOnOCR: the Pixtral processor expands one image token into the patch grid.
LIGHTON_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|image_pad|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def decoder(preset: str, *, head_dim_key: bool = True, **more: Any) -> dict[str, Any]:
    """The decoder's ``config.json`` values that ``preset``'s ``ModelDims`` holds, and ``more``.

    ``head_dim_key`` False: the config has no ``head_dim`` (hidden size / query heads gives it)."""
    dims = get_preset(preset).dims
    assert dims is not None, f"preset {preset} has no dims"
    values = {
        "hidden_size": dims.hidden_size,
        "num_hidden_layers": dims.n_layers,
        "num_key_value_heads": dims.n_kv_heads,
        "vocab_size": dims.vocab_size,
        "max_position_embeddings": dims.max_position,
    }
    if head_dim_key:
        values["head_dim"] = dims.head_dim
    return values | more


@dataclass(frozen=True)
class ModelShape:
    """Everything a dummy-weight model folder holds besides weights."""

    name: str  # folder name
    preset: str  # the production preset run on it (chandra_ocr.ocr.presets)
    real_model_id: str  # the model whose published numbers these are
    config: dict[str, Any]
    first_special_id: int  # id of QWEN_SPECIALS[0] in the real tokenizer
    eos_token: str
    preprocessor: dict[str, Any]
    chat_template: str
    processor: dict[str, Any] = field(default_factory=dict)  # processor_config.json, when the model has one
    video_preprocessor: dict[str, Any] | None = None

    def special_ids(self) -> dict[str, int]:
        """Special token → id, as in the real tokenizer."""
        return {tok: self.first_special_id + i for i, tok in enumerate(QWEN_SPECIALS)}


# Qwen/Qwen2.5-VL-7B-Instruct (olmOCR-2-7B's base): config.json of the model card.
QWEN2_5_VL_7B = ModelShape(
    name="qwen2_5_vl_7b",
    preset="olmocr2",
    real_model_id="Qwen/Qwen2.5-VL-7B-Instruct",
    first_special_id=151_643,
    eos_token="<|im_end|>",
    config={
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        **decoder("olmocr2", head_dim_key=False, intermediate_size=18944, num_attention_heads=28),
        "hidden_act": "silu",
        "max_window_layers": 28,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "sliding_window": 32768,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": 151_643,
        "eos_token_id": 151_645,
        "vision_start_token_id": 151_652,
        "vision_end_token_id": 151_653,
        "vision_token_id": 151_654,
        "image_token_id": 151_655,
        "video_token_id": 151_656,
        "vision_config": {
            "depth": 32,
            "hidden_act": "silu",
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "in_chans": 3,
            "out_hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "window_size": 112,
            "fullatt_block_indexes": [7, 15, 23, 31],
            "tokens_per_second": 2,
            "temporal_patch_size": 2,
        },
    },
    preprocessor={
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
        "min_pixels": 3136,
        "max_pixels": 12_845_056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
    },
    chat_template=QWEN_CHAT_TEMPLATE,
)

# allenai/olmOCR-2-7B-1025-FP8 (the olmocr2-fp8 preset): the same shape as llm-compressor's FP8_DYNAMIC
# scheme writes it — FP8 decoder weights with a scale per output channel, activations quantized per
# token at run time, the vision tower and lm_head left in bf16 — so vLLM runs the kernels the published
# checkpoint gets (vLLM's online FP8 instead quantizes every linear layer, the vision tower included).
FP8_DYNAMIC = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 8,
                "type": "float",
                "strategy": "channel",
                "symmetric": True,
                "dynamic": False,
            },
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "strategy": "token",
                "symmetric": True,
                "dynamic": True,
            },
            "output_activations": None,
        }
    },
    "ignore": ["re:.*lm_head", "re:.*visual.*"],
}
OLMOCR2_7B_FP8 = dataclasses.replace(
    QWEN2_5_VL_7B,
    name="olmocr2_7b_fp8",
    preset="olmocr2-fp8",
    real_model_id="allenai/olmOCR-2-7B-1025-FP8",
    config=QWEN2_5_VL_7B.config | {"quantization_config": FP8_DYNAMIC},
)

# datalab-to/chandra-ocr-2: a Qwen3.5 fine-tune of the 4B shape (chandra_ocr.ocr.tuning.CHANDRA_OCR_2):
# 32 decoder layers, every 4th full attention (16 query / 4 KV heads of 256, partial rotary 0.25),
# the rest Gated DeltaNet (16 key / 32 value heads of 128, conv 4); vision 24 × 1024, 16 px patches.
_QWEN3_5_LAYERS = ["linear_attention"] * 3 + ["full_attention"]
CHANDRA_OCR_2 = ModelShape(
    name="chandra_ocr_2",
    preset="chandra2",
    real_model_id="datalab-to/chandra-ocr-2",
    first_special_id=248_044,
    eos_token="<|im_end|>",
    config={
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": 248_056,
        "video_token_id": 248_057,
        "vision_start_token_id": 248_053,
        "vision_end_token_id": 248_054,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "qwen3_5_text",
            **decoder("chandra2", intermediate_size=9216, num_attention_heads=16),
            "hidden_act": "silu",
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
            "attention_bias": False,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "layer_types": _QWEN3_5_LAYERS * 8,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10_000_000.0,
                "partial_rotary_factor": 0.25,
                "mrope_section": [11, 11, 10],
                "mrope_interleaved": True,
            },
            "eos_token_id": 248_046,
            "bos_token_id": 248_044,
            "dtype": "bfloat16",
        },
        "vision_config": {
            "model_type": "qwen3_5_vision",
            "depth": 24,
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_heads": 16,
            "hidden_act": "gelu_pytorch_tanh",
            "in_channels": 3,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 2560,
            "num_position_embeddings": 2304,
        },
    },
    preprocessor={
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": 65_536, "longest_edge": 16_777_216},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    },
    video_preprocessor={
        "video_processor_type": "Qwen3VLVideoProcessor",
        "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": 4096, "longest_edge": 25_165_824},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    },
    chat_template=QWEN_CHAT_TEMPLATE,
)

# lightonai/LightOnOCR-2-1B (chandra_ocr.ocr.tuning.LIGHTONOCR_2_1B): Pixtral vision encoder (24 × 1024,
# 14 px patches, 2×2 merge) + Qwen3-0.6B-shaped decoder (28 layers, 1024 wide, 16 / 8 heads of 128).
LIGHTONOCR_2_1B = ModelShape(
    name="lightonocr_2_1b",
    preset="lightonocr2",
    real_model_id="lightonai/LightOnOCR-2-1B",
    first_special_id=151_643,
    eos_token="<|im_end|>",
    config={
        "architectures": ["LightOnOCRForConditionalGeneration"],
        "model_type": "mistral3",
        "image_token_index": 151_655,
        "spatial_merge_size": 2,
        "multimodal_projector_bias": False,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -1,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            **decoder("lightonocr2", intermediate_size=3072, num_attention_heads=16),
            "hidden_act": "silu",
            "rms_norm_eps": 1e-6,
            "rope_theta": 1_000_000.0,
            "tie_word_embeddings": True,
            "attention_bias": False,
            "eos_token_id": 151_645,
            "bos_token_id": 151_643,
        },
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "head_dim": 64,
            "image_size": 1540,
            "patch_size": 14,
            "num_channels": 3,
            "rope_theta": 10_000.0,
            "hidden_act": "silu",
        },
    },
    preprocessor={
        "image_processor_type": "PixtralImageProcessor",
        "processor_class": "PixtralProcessor",
        "patch_size": 14,
        "size": {"longest_edge": 1540},
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
    },
    processor={
        "processor_class": "PixtralProcessor",
        "patch_size": 14,
        "spatial_merge_size": 2,
        "image_token": "<|image_pad|>",
        "image_break_token": "<|vision_pad|>",
        "image_end_token": "<|vision_end|>",
    },
    chat_template=LIGHTON_CHAT_TEMPLATE,
)

SHAPES: dict[str, ModelShape] = {
    s.name: s for s in (QWEN2_5_VL_7B, OLMOCR2_7B_FP8, CHANDRA_OCR_2, LIGHTONOCR_2_1B)
}
