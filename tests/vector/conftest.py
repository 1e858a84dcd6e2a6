"""One loaded embedding model for the vector tests (loading takes a few seconds)."""

from __future__ import annotations

import pytest

from chandra_ocr.vector.embedder import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    model = Embedder().start()
    yield model
    model.close()
