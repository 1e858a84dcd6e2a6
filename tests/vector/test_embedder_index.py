"""The embedder (bundled model, offline, windowing) and the index's model guard."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from chandra_ocr.errors import ConfigError
from chandra_ocr.vector.consumer import ApplyCounts
from chandra_ocr.vector.embedder import BUNDLED, MODEL_ENV, Embedder, EmbedOptions, _model_path
from chandra_ocr.vector.index import EXACT_SEARCH_LIMIT, open_index

SENTENCE = "The harbour master recorded three ships with damaged sails after the autumn storm."
FILLER = " ".join(
    f"Paragraph {i} describes the annual budget of the municipal library service." for i in range(40)
)


def test_vectors_are_normalised_and_texts_differ(embedder):
    vectors = embedder.embed(["hello world", SENTENCE, ""])
    assert vectors.shape == (3, embedder.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.9


def test_a_sentence_at_the_end_of_a_long_chunk_still_counts(embedder):
    """The model reads 256 word pieces; windows make a sentence after them part of the vector."""
    long_text = f"{FILLER} {SENTENCE}"
    query, windowed, truncated = embedder.embed([SENTENCE, long_text, FILLER])
    assert len(embedder._windows([long_text])[0]) > 1
    assert float(query @ windowed) > float(query @ truncated) + 0.05


def test_an_index_refuses_another_models_vectors(tmp_path):
    open_index(tmp_path, "model-a", 8).close()
    with pytest.raises(ConfigError, match="model-a"):
        open_index(tmp_path, "model-b", 8)
    with pytest.raises(ConfigError):
        open_index(tmp_path, "model-a", 16)


@pytest.mark.slow
def test_the_bundled_model_loads_with_the_network_cut_off():
    script = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from chandra_ocr.vector.embedder import Embedder
        print(Embedder().start().embed(["offline"]).shape)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("(1, 384)")


@pytest.mark.slow
def test_onnx_runtime_gives_the_vectors_of_sentence_transformers(embedder):
    """The default runtime (ONNX, exported once from the model) against the model run by torch."""
    assert embedder.runtime == "onnx"
    texts = ["hello world", f"{FILLER} {SENTENCE}", "", "Die Hafenmeisterin zählte drei Schiffe."]
    torch_model = Embedder(EmbedOptions(runtime="torch")).start()
    assert torch_model.runtime == "torch" and torch_model.dim == embedder.dim
    assert np.abs(embedder.embed(texts) - torch_model.embed(texts)).max() < 1e-4


def test_the_model_is_one_setting(embedder, tmp_path, monkeypatch):
    """CHANDRA_OCR_EMBED_MODEL names a local model folder (here a link to the bundled one); the index
    records it and refuses vectors of the default model afterwards."""
    folder = tmp_path / "my-model"
    folder.symlink_to(_model_path(BUNDLED), target_is_directory=True)
    monkeypatch.setenv(MODEL_ENV, str(folder))
    chosen = Embedder().start()
    assert chosen.name == str(folder) and np.allclose(chosen.embed([SENTENCE]), embedder.embed([SENTENCE]))
    open_index(tmp_path / "index", chosen.name, chosen.dim).close()
    with pytest.raises(ConfigError, match="my-model"):
        open_index(tmp_path / "index", embedder.name, embedder.dim)
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="does not exist"):
        Embedder().start()


def test_the_index_summary_says_where_exact_search_stops():
    small = ApplyCounts(1, 5, 0, 5, 5).summary()
    assert (
        small
        == "vector index: 1 outbox file(s) applied: 5 chunks embedded (0 reused), 0 deleted; 5 vectors in all"
    )
    big = ApplyCounts(0, 0, 0, 0, EXACT_SEARCH_LIMIT + 1).summary().splitlines()
    assert big[0] == f"vector index: up to date, {EXACT_SEARCH_LIMIT + 1} vectors" and "LanceDB" in big[1]
