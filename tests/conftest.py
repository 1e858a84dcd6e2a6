"""Shared fixtures: the external corpus and the bundled samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"


def corpus_root() -> Path | None:
    """The external test corpus: $CHANDRA_OCR_CORPUS, else ../shared/corpus beside the repo."""
    env = os.environ.get("CHANDRA_OCR_CORPUS")
    root = Path(env) if env else REPO.parent / "shared" / "corpus"
    return root if (root / "MANIFEST.tsv").is_file() else None


@pytest.fixture(scope="session")
def corpus() -> Path:
    """Root of the external corpus; tests using it skip (with the reason) when it is absent."""
    root = corpus_root()
    if root is None:
        pytest.skip("external corpus not found: set CHANDRA_OCR_CORPUS or put it at ../shared/corpus")
    return root


@pytest.fixture(scope="session")
def samples() -> Path:
    """The small permissively licensed sample PDFs bundled with the repo."""
    return SAMPLES


@pytest.fixture(scope="session")
def s3():
    """One S3 emulator (moto's standalone server on 127.0.0.1, tests/s3_server.py) per pytest session."""
    from s3_server import s3_server

    with s3_server() as server:
        yield server
