"""A run's use of warm models, from the ``model_use`` its extract tasks recorded (ocr/warm_engine.py)."""

from __future__ import annotations

from typing import Any


def model_use_summary(uses: list[dict[str, Any]], run_started: float) -> dict[str, Any]:
    """A run's model use from its batches' ``model_use``: the loads it paid (servers started after the
    run began) and their seconds, pages per loaded model, and the GPU busy share — time with pages in
    flight over the extract phase's wall time, per server."""
    servers: dict[str, list[dict[str, Any]]] = {}
    for use in uses:
        servers.setdefault(use["server_id"], []).append(use)
    loads = {sid: u[0]["load_s"] for sid, u in servers.items() if u[0]["loaded_at"] >= run_started - 1.0}
    busy = wall = 0.0
    for batch_uses in servers.values():
        spans = [u["span"] for u in batch_uses if len(u.get("span", [])) == 2]
        if spans:
            wall += max(s[1] for s in spans) - min(s[0] for s in spans)
        busy += union_seconds([iv for u in batch_uses for iv in u.get("busy", [])])
    pages = {sid: sum(u["pages"] for u in us) for sid, us in servers.items()}
    return {
        "model_loads": len(loads),
        "model_load_s": [round(s, 1) for s in loads.values()],
        "models_used": len(servers),
        "pages_per_model": round(sum(pages.values()) / max(len(servers), 1), 1),
        "gpu_busy_share": round(busy / wall, 3) if wall > 0 else None,
    }


def union_seconds(intervals: list[list[float]]) -> float:
    """Seconds covered by the union of ``[start, end]`` intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
