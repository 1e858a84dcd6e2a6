"""``chandra-ingest serve`` for the browser tests: started in a child process, stopped after."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def serving(kb: Path, environ: Mapping[str, str] = os.environ) -> Iterator[str]:
    """``chandra-ingest serve --kb KB --port 0`` in ``environ``: the line with the URL it prints; stopped
    when the block ends."""
    env = {**environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "chandra_ocr.cli", "serve", "--kb", str(kb), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)  # it prints its URL once it listens
        line = process.stdout.readline() if ready else ""
        assert "http://127.0.0.1:" in line, line + process.stdout.read()
        yield line
    finally:
        process.terminate()
        process.wait(timeout=30)


def url_of(served: str) -> str:
    """The base URL in the line ``serve`` prints."""
    return "http://" + served.split("http://", 1)[1].split("/", 1)[0]
