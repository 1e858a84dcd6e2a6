"""bench.gpu.queue_fit: a device queue's item cut to the time left, from the items already run."""

from __future__ import annotations

import json

from bench.gpu import queue_fit as qf


def record(load_s: float, cache_warm: bool, pages: int, after_load_s: float) -> dict:
    return {"model_load_s": [load_s], "compile_cache_warm_at_start": cache_warm, "pages": pages,
            "after_load_s": after_load_s}  # fmt: skip


def test_a_shape_not_loaded_yet_pays_the_cold_cache_and_the_default_rate():
    assert qf.estimate("olmocr2_7b_fp8", []) == (qf.COLD_LOAD_S, qf.TASK_S)
    other = {"runs": {"NVIDIA H100 80GB HBM3 | qwen2_5_vl_7b": {"warm": record(70, True, 2000, 380)}}}
    assert qf.estimate("olmocr2_7b_fp8", [other]) == (qf.COLD_LOAD_S, qf.TASK_S)


def test_a_shape_run_before_loads_warm_at_its_slowest_rate():
    warmup = {"runs": {"H | qwen2_5_vl_7b": {"one_process": record(130, False, 20, 30)}}}
    assert qf.estimate("qwen2_5_vl_7b", [warmup]) == (qf.WARM_LOAD_S, qf.TASK_S)  # 20 pages: no rate
    runs = {"runs": {"H | qwen2_5_vl_7b": {"warm": record(80, True, 2000, 380),
                                           "one_process": record(68, True, 2000, 400)}}}  # fmt: skip
    assert qf.estimate("qwen2_5_vl_7b", [warmup, runs]) == (80, 20.0)


def test_the_tasks_are_cut_to_the_time_left_or_the_item_skipped():
    allowance = qf.ALLOWANCE_S
    assert qf.fit("warm", 20, 100 + allowance + 20 * 19, 100, 19) == 20
    assert qf.fit("warm", 20, 100 + allowance + 12 * 19 + 5, 100, 19) == 12
    assert qf.fit("warm", 20, 100 + allowance + 4 * 19, 100, 19) == 0  # fewer than MIN_TASKS
    assert qf.fit("one_process", 3, 100 + allowance + 3 * 19, 100, 19) == 3  # a small K is kept whole
    assert qf.fit("per_task", 5, allowance + 2 * 119, 100, 19) == 2  # a load in every task
    assert qf.fit("warmup", 1, qf.COLD_LOAD_S + qf.WARMUP_S + allowance, qf.COLD_LOAD_S, 19) == 1
    assert qf.fit("warmup", 1, qf.COLD_LOAD_S, qf.COLD_LOAD_S, 19) == 0


def test_the_command_prints_the_tasks_to_run(tmp_path, capsys):
    results = tmp_path / "gpu.json"
    warm = record(60, True, 1000, 200)  # 20 s per 100 pages
    results.write_text(json.dumps({"runs": {"H | s": {"warm": warm}}}))
    assert qf.main(["s", "warm", "40", "50", "400", str(results), str(tmp_path / "absent.json")]) == 0
    tasks_of_50_pages = int((400 - 60 - qf.ALLOWANCE_S) // 10)
    assert capsys.readouterr().out.strip() == str(tasks_of_50_pages)
