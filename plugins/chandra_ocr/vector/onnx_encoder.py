"""The embedding model on ONNX Runtime: sentence-transformers' vectors without importing torch, int8 on CPU.

Importing torch and transformers costs most of a cold query (tens of seconds on a busy 2-core
machine); onnxruntime and tokenizers load in about a second. The model's transformer is prepared
once per machine into a cache folder keyed by the model folder's path and weights
(``$CHANDRA_OCR_MODEL_CACHE``, default ``~/.cache/chandra_ocr/onnx``), every later process only
reads the files:

- ``<model>-<key>.fp32.onnx``: exported with torch (the ``embed`` extra) with plain attention, then
  fused by ONNX Runtime's transformer optimizer (one ``Attention`` node a layer, ``SkipLayerNorm``,
  ``BiasGelu``): the unquantised model, sentence-transformers' vectors within 1e-4;
- ``<model>-<key>.int8.onnx``: that graph with its matrix products and attention weights quantised
  to int8 per output channel (``onnxruntime.quantization.quantize_dynamic``; activations are
  quantised on the fly), about twice as fast on CPU, vectors within cosine ~0.98 of fp32's
  (``bench/feed_throughput.py`` measures speed, vector agreement and retrieval).

A session runs with one intra-op thread per core this process may use (affinity and cgroup
quota), without spin-waiting (on a shared machine spinning threads burn the cores the others
wait for). Pooling (mean or CLS, from the model's ``1_Pooling`` config) and L2 normalisation
happen here in numpy, as sentence-transformers does them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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
PRECISIONS = ("int8", "fp32")
GRAPH = "eager-fused-1"  # how the cached graphs are made: part of their key, so a change re-exports


def cached_model(model_dir: Path, precision: str) -> Path:
    """Where the ONNX graph of the model at ``model_dir`` in ``precision`` lives (it may not exist yet)."""
    weights = next(
        (p for p in (model_dir / "model.safetensors", model_dir / "pytorch_model.bin") if p.exists()), None
    )
    if weights is None:
        raise ConfigError(f"no model weights (model.safetensors) in {model_dir}")
    stat = weights.stat()
    ident = f"{model_dir.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{GRAPH}"
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "chandra_ocr" / "onnx")
    return root / f"{model_dir.resolve().name}-{key}.{precision}.onnx"


def prepared_model(model_dir: Path, precision: str) -> Path:
    """The cached graph of ``model_dir`` in ``precision``, made now when missing (see the module doc)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"embedding precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    path = cached_model(model_dir, precision)
    if path.exists():
        return path
    fp32 = cached_model(model_dir, "fp32")
    log.info("preparing the embedding model for ONNX Runtime once on this machine (about a minute): %s", path)
    with _quietly():
        if not fp32.exists():
            export(model_dir, fp32)
        if precision == "int8":
            quantize(fp32, path)
    return path


def export(model_dir: Path, out: Path) -> Path:
    """Export the transformer of the sentence-transformers model at ``model_dir`` to a fused ONNX graph."""
    try:
        import torch
        from onnxruntime.transformers import optimizer
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

    # Plain ("eager") attention exports as MatMul/Softmax, a pattern the optimizer fuses into one node.
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    sample = torch.ones(1, 8, dtype=torch.long)
    inputs = (sample, torch.ones_like(sample), torch.zeros_like(sample))
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    config = json.loads((model_dir / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(
                LastHidden(model.eval()), inputs, str(raw),
                input_names=list(INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                opset_version=17, dynamo=False,
            )  # fmt: skip
        fused = optimizer.optimize_model(
            str(raw), model_type="bert", num_heads=int(config.get("num_attention_heads") or 0),
            hidden_size=int(config.get("hidden_size") or 0),
        )  # fmt: skip
        write_atomic(out, lambda path: fused.save_model_to_file(str(path)))
    return out


def quantize(fp32: Path, out: Path) -> Path:
    """Quantise the fused graph at ``fp32`` to int8 weights per output channel, at ``out``."""
    try:
        from onnx import TensorProto
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise ConfigError("quantising the model needs the 'embed' extra (onnx)") from e

    def write(path: Path) -> None:
        quantize_dynamic(
            str(fp32), str(path), per_channel=True, weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Attention"],  # the embeddings stay fp32
            extra_options={"DefaultTensorType": TensorProto.FLOAT},  # the fused nodes' outputs
        )  # fmt: skip

    return write_atomic(out, write)


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return max(1, cores)
    if quota != "max" and int(period) > 0:
        cores = min(cores, math.ceil(int(quota) / int(period)))
    return max(1, cores)


class OnnxEncoder:
    """Encodes token windows with an ONNX session: ``encode(ids, mask)`` → pooled, normalised vectors.

    ``threads`` 0 means one per available core; ``device`` ``cuda`` runs the fp32 graph with ONNX
    Runtime's CUDA provider (the ``onnxruntime-gpu`` package).
    """

    def __init__(
        self, model_dir: Path, *, precision: str = "int8", threads: int = 0, device: str = "cpu"
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ConfigError(missing_extra("embed", "the ONNX runtime (onnxruntime)")) from e
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise ConfigError(
                    "device 'cuda' with the onnx runtime needs onnxruntime-gpu: or use runtime 'torch'"
                )
            providers.insert(0, "CUDAExecutionProvider")
            precision = "fp32"  # the int8 graph's dynamic quantisation is a CPU kernel
        self.precision = precision
        path = prepared_model(model_dir, precision)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or available_cores()
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), opts, providers=providers)
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


@contextmanager
def _quietly() -> Iterator[None]:
    """Export and quantisation without the tools' chatter: torch's tracer warnings, transformers'
    loading bar, the optimizer's and quantizer's INFO lines (the quantizer logs hundreds) and its
    advice to pre-process the graph (symbolic shape inference: ~30 s more on 2 cores, where
    ``DefaultTensorType`` types the fused nodes' outputs instead)."""
    import warnings

    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing")

    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # quantising a graph exported earlier needs no transformers
        hf_logging = None
    bar = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    root, disabled = logging.getLogger(), logging.root.manager.disable
    root.addFilter(keep)
    logging.disable(max(disabled, logging.INFO))
    if bar:
        hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if bar:
            hf_logging.enable_progress_bar()
        logging.disable(disabled)
        root.removeFilter(keep)


def _pooling(model_dir: Path) -> str:
    config = model_dir / "1_Pooling" / "config.json"
    if config.exists() and json.loads(config.read_text()).get("pooling_mode_cls_token"):
        return "cls"
    return "mean"
