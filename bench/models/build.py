"""Write dummy-weight model folders (config, tokenizer, processor, chat template) for ``load_format="dummy"``.

    .venv/bin/python -m bench.models.build OUT_DIR [--shape qwen2_5_vl_7b ...] [--text-dir DIR]

The tokenizer is a byte-level BPE trained here on real English text (so a prompt costs about as many
tokens as with the real tokenizer), padded with filler entries up to the real first special id, then
the real specials in order: every special-token id in the config matches the tokenizer's.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from bench.models.shapes import QWEN_SPECIALS, SHAPES, ModelShape

# The split rule of the Qwen tokenizers (words, single digits, punctuation runs, newlines, spaces).
SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
BPE_VOCAB = 16_000  # trained entries (bytes + merges); the rest up to the first special id is filler
DEFAULT_TEXT_DIR = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "docling" / "tests" / "data"


def training_text(text_dir: Path) -> list[str]:
    """Lines of the Markdown ground truth under ``text_dir`` (real prose, tables and code)."""
    files = sorted(text_dir.rglob("*.md"))
    if not files:
        raise SystemExit(f"no Markdown files under {text_dir} to train the tokenizer on")
    return [line for f in files for line in f.read_text(errors="replace").splitlines() if line.strip()]


def build_tokenizer(shape: ModelShape, lines: Iterable[str]):
    """A fast tokenizer whose specials sit at the real ids (``shape.first_special_id`` onwards)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = split
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    trained.train_from_iterator(lines, trainer=trainer)
    state = json.loads(trained.to_str())["model"]
    vocab: dict[str, int] = dict(state["vocab"])
    filler = (f"zqfill{i}" for i in range(shape.first_special_id))
    while len(vocab) < shape.first_special_id:
        vocab.setdefault(next(filler), len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = split
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(QWEN_SPECIALS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=shape.eos_token,
        pad_token="<|endoftext|>",
        extra_special_tokens=QWEN_SPECIALS[1:],
    )
    fast.chat_template = shape.chat_template
    check_ids(shape, fast)
    return fast


def check_ids(shape: ModelShape, tokenizer) -> None:
    """Raise unless every special token has the real model's id and the vocabulary fits the embedding."""
    wrong = {t: (tokenizer.convert_tokens_to_ids(t), i) for t, i in shape.special_ids().items()}
    wrong = {t: got for t, got in wrong.items() if got[0] != got[1]}
    if wrong:
        raise ValueError(f"{shape.name}: special ids (got, want) {wrong}")
    vocab = shape.config.get("vocab_size") or shape.config["text_config"]["vocab_size"]
    if len(tokenizer) > vocab:
        raise ValueError(f"{shape.name}: tokenizer has {len(tokenizer)} entries > embedding {vocab}")
    for key in ("image_token_id", "image_token_index", "vision_start_token_id", "vision_end_token_id"):
        if key in shape.config:
            token = tokenizer.convert_ids_to_tokens(shape.config[key])
            if token not in QWEN_SPECIALS:
                raise ValueError(f"{shape.name}: {key}={shape.config[key]} is {token!r}, not a special token")


def write_model(shape: ModelShape, out_dir: Path, lines: list[str]) -> Path:
    """Write ``shape``'s folder under ``out_dir``; returns the folder."""
    target = out_dir / shape.name
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(shape, lines)
    tokenizer.save_pretrained(target)
    (target / "chat_template.jinja").write_text(shape.chat_template)
    dump(target / "config.json", shape.config | {"_dummy_weights_of": shape.real_model_id})
    eos = shape.special_ids()[shape.eos_token]
    dump(target / "generation_config.json", {"eos_token_id": eos, "pad_token_id": shape.first_special_id})
    dump(target / "preprocessor_config.json", shape.preprocessor)
    if shape.processor:
        dump(target / "processor_config.json", shape.processor)
    if shape.video_preprocessor:
        dump(target / "video_preprocessor_config.json", shape.video_preprocessor)
    return target


def dump(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--shape", action="append", choices=sorted(SHAPES), help="default: all")
    p.add_argument("--text-dir", type=Path, default=DEFAULT_TEXT_DIR, help="Markdown to train the BPE on")
    args = p.parse_args()
    lines = training_text(args.text_dir)
    for name in args.shape or sorted(SHAPES):
        print(write_model(SHAPES[name], args.out_dir, lines))


if __name__ == "__main__":
    main()
