"""bench.dag_throughput's own arithmetic: the server's gauges, the rates after the load, the price."""

from __future__ import annotations

from bench.dag_throughput import _gauge, batch_fill, summarize, usd_per_million

METRICS = """# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
vllm:num_requests_waiting{engine="0",model_name="m"} 380.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 300.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 80.0
vllm:num_requests_running{engine="0",model_name="m"} 368.0
"""


def test_a_gauge_is_read_without_the_gauges_whose_names_extend_it():
    assert _gauge(METRICS, "num_requests_waiting") == 380.0
    assert _gauge(METRICS, "num_requests_running") == 368.0


def task(spawned: float, ready: float, end: float, pages: int, loaded: bool) -> dict:
    load = ready - spawned - 1 if loaded else 0.0
    return {"spawned": spawned, "engine_start": spawned + 1, "ready": ready, "end": end, "pages": pages,
            "first_in_flight": ready + 0.5, "loaded_here": loaded, "load_s": load,
            "output_tokens": pages * 10, "busy": [[ready, end]], "in_flight": 50}  # fmt: skip


def test_whole_run_and_after_the_load_rates_and_their_price():
    tasks = [task(0.0, 100.0, 300.0, 600, True), task(0.5, 101.0, 400.0, 600, False)]
    record = summarize("warm", tasks, usd_per_gpu_hour=3.6)
    assert record["wall_s"] == 400.0 and record["pages_per_s"] == 3.0
    assert record["after_load_s"] == 300.0 and record["after_load_pages_per_s"] == 4.0
    assert record["usd_per_million_pages"] == usd_per_million(3.0, 3.6) == 333.3  # $0.001 a second
    assert record["usd_per_million_pages_after_load"] == 250.0
    assert record["model_loads"] == 1 and record["per_task"][1]["to_first_page_s"] == 101.0


def test_the_batch_fill_counts_only_samples_with_pages_at_the_server():
    samples = [[0, 0, 0, 4.7], [2, 368, 100, 20.0], [4, 300, 50, 30.0], [6, 100, 0, 31.0]]
    fill = batch_fill(samples, 368)
    assert fill == {"samples": 3, "mean_running": 256.0, "max_num_seqs": 368, "full_share": 0.333,
                    "server_rss_gib_max": 31.0, "mean_waiting": 50.0}  # fmt: skip
    assert batch_fill([[0, 0, 0, None]], 368) is None
