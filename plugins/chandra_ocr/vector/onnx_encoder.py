"""The embedding model on ONNX Runtime: the same vectors as sentence-transformers without importing torch.

Importing torch and transformers costs most of a cold query (tens of seconds on a busy 2-core
machine); onnxruntime and tokenizers load in about a second. The model's transformer is exported
to ONNX once, with torch (``export``, the ``embed`` extra), into a cache folder keyed by the model
folder's path and weights (``$CHANDRA_OCR_MODEL_CACHE``, default ``~/.cache/chandra_ocr/onnx``);
every later process only reads the file. Pooling (mean or CLS, from the model's ``1_Pooling``
config) and L2 normalisation happen here in numpy, as sentence-transformers does them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from chandra_ocr.errors import ConfigError
from chandra_ocr.extras import missing_extra
from chandra_ocr.store.atomic import write_atomic

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

CACHE_ENV = "CHANDRA_OCR_MODEL_CACHE"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cached_model(model_dir: Path) -> Path:
    """Where the ONNX export of the model at ``model_dir`` lives (it may not exist yet)."""
    weights = next(
        (p for p in (model_dir / "model.safetensors", model_dir / "pytorch_model.bin") if p.exists()), None
    )
    if weights is None:
        raise ConfigError(f"no model weights (model.safetensors) in {model_dir}")
    stat = weights.stat()
    key = hashlib.sha256(f"{model_dir.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[
        :16
    ]
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "chandra_ocr" / "onnx")
    return root / f"{model_dir.name}-{key}.onnx"


def export(model_dir: Path, out: Path) -> Path:
    """Export the transformer of the sentence-transformers model at ``model_dir`` to ONNX at ``out``."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as e:
        raise ConfigError(missing_extra("embed", "the embedding model's first ONNX export (torch)")) from e

    class LastHidden(torch.nn.Module):
        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            kwargs = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": token_type_ids,
            }
            return self.model(**kwargs).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    sample = torch.ones(1, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}

    def write(tmp: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                LastHidden(model), (sample, torch.ones_like(sample), torch.zeros_like(sample)), str(tmp),
                input_names=list(INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                opset_version=17, dynamo=False,
            )  # fmt: skip

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, write)
    log.info("exported %s to ONNX at %s", model_dir, out)
    return out


class OnnxEncoder:
    """Encodes token windows with an ONNX session: ``encode(ids, mask)`` → pooled, normalised vectors."""

    def __init__(self, model_dir: Path, *, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ConfigError(missing_extra("embed", "the ONNX runtime (onnxruntime)")) from e
        path = cached_model(model_dir)
        if not path.exists():
            export(model_dir, path)
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self._names = {i.name for i in self._session.get_inputs()}
        self._cls = _pooling(model_dir) == "cls"

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(batch, dim) float32 L2-normalised vectors of padded token ids with their attention mask."""
        import numpy as np

        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._names})[0]
        if self._cls:
            pooled = hidden[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _pooling(model_dir: Path) -> str:
    config = model_dir / "1_Pooling" / "config.json"
    if config.exists() and json.loads(config.read_text()).get("pooling_mode_cls_token"):
        return "cls"
    return "mean"
