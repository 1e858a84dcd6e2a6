"""Session-wide vector fixtures: one loaded embedding model, one real Chroma server on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pace import scaled

from chandra_ocr.testing.processes import stop_process_group
from chandra_ocr.vector.embedder import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    model = Embedder().start()
    yield model
    model.close()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory) -> tuple[str, int]:
    """(host, port) of a Chroma server (its own ``chroma run``) with data in a temporary folder."""
    pytest.importorskip("chromadb", reason="the Chroma tests need the 'chroma' extra")
    exe = Path(sys.executable).with_name("chroma")
    if not exe.exists() and shutil.which("chroma") is None:
        pytest.skip("the chroma command (chromadb) is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("chroma") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe if exe.exists() else "chroma"), "run", "--host", "127.0.0.1", "--port", str(port),
             "--path", str(log.parent / "data")],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_until_listening(port, proc, deadline_s=scaled(60.0), log=log)
        yield "127.0.0.1", port
    finally:
        stop_process_group(proc, grace_s=10.0)


def _wait_until_listening(port: int, proc: subprocess.Popen, *, deadline_s: float, log: Path) -> None:
    import chromadb

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma run exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return
        except Exception:  # not up yet: connection refused or the server still starting
            time.sleep(0.2)
    raise RuntimeError(f"chroma server not answering after {deadline_s} s: {log.read_text()[-2000:]}")
