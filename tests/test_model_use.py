"""A run's warm-model accounting (chandra_ocr.model_use) from its extract tasks' ``model_use`` records."""

from __future__ import annotations

from chandra_ocr.model_use import model_use_summary, union_seconds
from chandra_ocr.report.page import _model_use


def use(server: str, loaded_at: float, pages: int, busy: list[list[float]], span: list[float]) -> dict:
    return {"server_id": server, "loaded_at": loaded_at, "load_s": 30.0, "loaded_here": False,
            "pages": pages, "busy": busy, "span": span}  # fmt: skip


def test_union_counts_overlapping_intervals_once():
    assert union_seconds([[0, 10], [5, 12], [20, 21], [11, 11.5]]) == 13.0
    assert union_seconds([]) == 0.0


def test_loads_paid_by_the_run_pages_per_model_and_busy_share():
    # Two overlapping tasks on a server started during the run, then a gap with nothing in flight.
    run = [
        use("a", 1000.0, 50, [[1040, 1100]], [1035, 1100]),
        use("a", 1000.0, 50, [[1090, 1130]], [1085, 1140]),
    ]
    summary = model_use_summary(run, run_started=1001.0)  # started a second before: it still counts
    assert summary == {"model_loads": 1, "model_load_s": [30.0], "models_used": 1, "pages_per_model": 100.0,
                       "gpu_busy_share": round(90 / 105, 3)}  # fmt: skip
    later = model_use_summary(run, run_started=2000.0)  # a later run on the warm server loads nothing
    assert (later["model_loads"], later["model_load_s"]) == (0, [])
    assert _model_use(summary) == "1 load (30 s); 100 pages/model; GPU busy 86%"
    assert _model_use(later).startswith("warm (no load); 100 pages/model")
