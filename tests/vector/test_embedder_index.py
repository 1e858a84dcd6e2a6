"""The embedder (bundled model, offline, windowing, int8 against fp32) and the index's model guard."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from chandra_ocr.errors import ConfigError
from chandra_ocr.vector.consumer import ApplyCounts
from chandra_ocr.vector.embedder import (
    BUNDLED,
    DEVICE_ENV,
    MODEL_ENV,
    PRECISION_ENV,
    Embedder,
    EmbedOptions,
    _model_path,
    _runtime,
)
from chandra_ocr.vector.index import EXACT_SEARCH_LIMIT, open_index
from chandra_ocr.vector.onnx_encoder import cached_model

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


@pytest.fixture(scope="module")
def fp32_embedder() -> Embedder:
    """The unquantised model on ONNX Runtime (its graph is the one the int8 graph was made from)."""
    model = Embedder(EmbedOptions(precision="fp32")).start()
    yield model
    model.close()


@pytest.mark.slow
def test_the_unquantised_onnx_model_gives_the_vectors_of_sentence_transformers(fp32_embedder):
    """The fp32 ONNX graph (exported once, attention fused) against the model run by torch."""
    assert (fp32_embedder.runtime, fp32_embedder.precision) == ("onnx", "fp32")
    texts = ["hello world", f"{FILLER} {SENTENCE}", "", "Die Hafenmeisterin zählte drei Schiffe."]
    torch_model = Embedder(EmbedOptions(runtime="torch")).start()
    assert torch_model.runtime == "torch" and torch_model.dim == fp32_embedder.dim
    assert np.abs(fp32_embedder.embed(texts) - torch_model.embed(texts)).max() < 1e-4


TABLE_ROW = (
    "| Net income | 11,588 | 10,073 | 3,033 |\n| Diluted earnings per share | $ 23.01 | $ 20.14 | $ 6.15 |"
)
PASSAGES = [
    SENTENCE,
    "Inventories at year end were valued at the lower of cost and net realisable value.",
    "The board approved a quarterly dividend of 38 cents per share payable in March.",
    "Cash used in investing activities rose because of capital expenditures on new stores.",
    "Die Hafenmeisterin zählte drei Schiffe mit beschädigten Segeln.",
    TABLE_ROW,
    f"{FILLER} {SENTENCE}",
    "",
]
QUESTIONS = {
    "how many ships were damaged in the storm?": 0,
    "what dividend did the board declare?": 2,
    "net income and diluted earnings per share": 5,
}


def test_int8_vectors_are_close_to_the_fp32_ones_and_rank_alike(embedder, fp32_embedder):
    """The default (int8) model against the unquantised one on prose, a table row, a long text, an
    empty one: each vector within cosine 0.96 (the empty text is the farthest), and each question
    finds the same passage first."""
    assert (embedder.runtime, embedder.precision) == ("onnx", "int8")
    int8, fp32 = embedder.embed(PASSAGES), fp32_embedder.embed(PASSAGES)
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    cosines = (int8 * fp32).sum(axis=1)
    assert cosines.min() > 0.96 and np.median(cosines) > 0.98, cosines
    assert np.abs(int8 - fp32).max() > 1e-4  # the int8 graph is in use, not a copy of the fp32 one
    for question, expected in QUESTIONS.items():
        assert int(np.argmax(int8 @ embedder.embed([question])[0])) == expected
        assert int(np.argmax(fp32 @ fp32_embedder.embed([question])[0])) == expected


def test_the_model_is_prepared_once_per_machine(embedder, fp32_embedder):
    """Both graphs sit in the model cache; starting another embedder reads them and writes nothing."""
    files = [cached_model(Path(_model_path(BUNDLED)), p) for p in ("fp32", "int8")]
    assert all(f.exists() for f in files)
    before = [f.stat().st_mtime_ns for f in files]
    Embedder().start().close()
    assert [f.stat().st_mtime_ns for f in files] == before


def test_precision_is_one_setting(monkeypatch):
    assert EmbedOptions.from_env({}).precision == "int8"
    assert EmbedOptions.from_env({PRECISION_ENV: "fp32"}).precision == "fp32"
    assert EmbedOptions.from_env({PRECISION_ENV: "fp32"}, precision="int8").precision == "int8"
    with pytest.raises(ConfigError, match="precision must be one of int8, fp32"):
        EmbedOptions.from_env({PRECISION_ENV: "fp16"})
    with pytest.raises(ConfigError, match="device must be one of"):
        EmbedOptions(device="tpu")


def test_a_gpu_worker_runs_the_model_where_its_runtime_has_cuda():
    """``device`` cuda: ONNX Runtime where it has the CUDA provider (onnxruntime-gpu), else torch;
    asking the onnx runtime for cuda without that provider says what to install."""
    import onnxruntime

    has_cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    assert _runtime(EmbedOptions(device="cuda")) == ("onnx" if has_cuda else "torch")
    assert _runtime(EmbedOptions()) == "onnx"
    assert EmbedOptions.from_env({DEVICE_ENV: "cuda"}).device == "cuda"
    if not has_cuda:
        with pytest.raises(ConfigError, match="onnxruntime-gpu"):
            Embedder(EmbedOptions(device="cuda", runtime="onnx")).start()


def test_a_text_given_twice_is_one_vector(embedder):
    vectors = embedder.embed([SENTENCE, "hello world", SENTENCE])
    assert np.array_equal(vectors[0], vectors[2]) and not np.array_equal(vectors[0], vectors[1])


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
