"""Build a tiny, randomly initialised Idefics3 model folder that vLLM (CPU) can serve.

The weights are random (seeded), so the text it writes is noise; what is real is vLLM:
chat templating, image preprocessing and image-token expansion, the vision encoder,
continuous batching, paged KV cache, sampling and finish reasons. Dimensions follow
``/work/shared/notes/vllm-cpu.md`` (head_dim 32: vLLM's CPU attention rejects 16).

The end-of-utterance (EOS) row of the output head is zeroed while the other rows are
scaled up, so the model practically never ends by itself: a page finishes on a stop
string, on ``max_tokens`` or on repetition detection — each path on purpose, not by luck.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

VOCAB_SIZE = 512
TILE = 128  # vision image_size: one tile
PAGE_EDGE = 512  # longest edge the image processor resizes a page to (→ ≤ 4×4 tiles + 1 global)
IMAGE_SEQ_LEN = 16  # (128 / 16)² patches / scale_factor² = 64 / 4

SPECIALS = [
    "<|endoftext|>",  # pad
    "<|begin_of_text|>",  # bos
    "<end_of_utterance>",  # eos
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *[f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)],
]

# Our own lines of text, only there to give the byte-level BPE some merges.
TRAINING_TEXT = [
    "The quarterly report lists revenue, costs and the number of pages scanned per day.",
    "Table 3: results of the ingestion benchmark on two cores, in pages per second.",
    "Section 2.1 describes how the archive is split into documents, pages and blocks.",
    "Invoice no. 4471, dated 12 March, total amount due: 1,250.00 EUR including tax.",
    "Figure 7 shows the layout of a typical form with headers, footers and captions.",
    "All measurements were repeated three times; the median value is reported here.",
]

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] | capitalize }}:"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


def builder_digest() -> str:
    """A short hash of this module's source: edits to the builder invalidate cached models."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _tokenizer():
    """A byte-level BPE tokenizer trained on TRAINING_TEXT, specials appended after the merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TRAINING_TEXT * 4, trainer=trainer)
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|endoftext|>",
        bos_token="<|begin_of_text|>",
        eos_token="<end_of_utterance>",
        extra_special_tokens=SPECIALS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(tokenizer):
    from transformers import Idefics3Config

    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIALS[:5]}
    text = {
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "max_position_embeddings": 4096,
        "pad_token_id": ids["<|endoftext|>"],
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": ids["<end_of_utterance>"],
        "tie_word_embeddings": False,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "image_size": TILE,
        "patch_size": 16,
    }
    return Idefics3Config(
        text_config=text,
        vision_config=vision,
        scale_factor=2,
        image_token_id=ids["<image>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )


def build_tiny_idefics3(out_dir: Path, seed: int = 0) -> Path:
    """Write the tiny model (config, weights, tokenizer, processor, chat template) to ``out_dir``.

    Deterministic for a given ``seed``; takes ~20 s on 2 cores. Returns ``out_dir``.
    """
    import torch
    from transformers import GenerationConfig, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tokenizer = _tokenizer()
    cfg = _config(tokenizer)
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        head = model.lm_head.weight  # logits std ≈ 8 × weight std after the final RMSNorm
        head.normal_(0.0, 0.5)
        head[cfg.text_config.eos_token_id].zero_()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir)  # what vLLM runs on CPU anyway; ~400 KB
    eos = cfg.text_config.eos_token_id
    GenerationConfig(
        bos_token_id=cfg.text_config.bos_token_id, eos_token_id=eos, pad_token_id=cfg.pad_token_id
    ).save_pretrained(out_dir)
    images = Idefics3ImageProcessorPil(
        size={"longest_edge": PAGE_EDGE},
        max_image_size={"longest_edge": TILE},
        do_image_splitting=True,
    )
    processor = Idefics3Processor(images, tokenizer, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(out_dir)
    return out_dir


def cached_tiny_idefics3(cache_root: Path, seed: int = 0) -> Path:
    """The tiny model under ``cache_root``, built once per builder version and seed."""
    target = cache_root / f"tiny-idefics3-{builder_digest()}-s{seed}"
    marker = target / "BUILD.json"
    if marker.is_file():
        return target
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    build_tiny_idefics3(tmp, seed)
    (tmp / "BUILD.json").write_text(json.dumps({"digest": builder_digest(), "seed": seed}))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
