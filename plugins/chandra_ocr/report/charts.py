"""The report's charts, drawn with matplotlib (Agg, no display): one function per chart onto an Axes.

``chart_pngs`` gives each chart as its own PNG (for the HTML page); ``overview_png`` draws them
all on one figure (the report's PNG). matplotlib is imported only when a chart is drawn.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from chandra_ocr.report.data import STAGES, ReportData

STATUS_COLOURS = {"ingested": "#2e7d32", "ok": "#2e7d32", "partial": "#f9a825", "fallback": "#f9a825",
                  "quarantined": "#c62828", "failed": "#c62828"}  # fmt: skip
STAGE_COLOURS = {"compress": "#6d4c41", "extract": "#1565c0", "assemble": "#7b1fa2", "load": "#00838f"}
MB = 1024 * 1024


def _documents(ax: Any, data: ReportData) -> None:
    rows = data.documents_by_status
    if not _has(ax, rows):
        return
    names = [r[0] for r in rows]
    bars = ax.bar(names, [r[1] for r in rows], color=[STATUS_COLOURS.get(n, "#607d8b") for n in names])
    ax.bar_label(bars, labels=[f"{_n(r[1], 'doc')}\n{_n(r[2], 'page')}" for r in rows], fontsize=8)
    ax.set_ylabel("documents")
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.margins(y=0.25)


def _pages(ax: Any, data: ReportData) -> None:
    rows = data.pages_by_route
    if not _has(ax, rows):
        return
    groups = sorted({f"{route} / {engine}" for route, engine, _, _ in rows})
    left = [0] * len(groups)
    for status in sorted({r[2] for r in rows}):
        counts = [sum(n for ro, en, st, n in rows if f"{ro} / {en}" == g and st == status) for g in groups]
        ax.barh(groups, counts, left=left, label=status, color=STATUS_COLOURS.get(status, "#607d8b"))
        left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.set_xlabel("pages (route / engine, coloured by page status)")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.legend(fontsize=8)


def _throughput(ax: Any, data: ReportData) -> None:
    if not _has(ax, data.ingested):
        return
    times, total = [], 0
    for moment, pages in data.ingested:
        total += pages
        times.append((moment, total))
    when, pages = [t for t, _ in times], [n for _, n in times]
    ax.plot(when, pages, drawstyle="steps-post", marker="o", markersize=3, color="#1565c0")
    ax.set_ylabel("pages in the knowledge base")
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    if data.runs:
        rate = ax.twinx()
        when, rates = [r.finished_at for r in data.runs], [r.pages_per_s for r in data.runs]
        rate.plot(when, rates, "o", color="#e65100")
        rate.set_ylabel("pages/s of each run", color="#e65100")
        rate.set_ylim(bottom=0)


def _stages(ax: Any, data: ReportData) -> None:
    runs = [r for r in data.runs if r.stage_seconds][-10:]
    if not _has(ax, runs):
        return
    labels = [f"{r.run_id[:28]}" for r in runs]
    left = [0.0] * len(runs)
    for stage in STAGES:
        seconds = [r.stage_seconds.get(stage, 0.0) for r in runs]
        ax.barh(labels, seconds, left=left, label=stage, color=STAGE_COLOURS[stage])
        left = [a + b for a, b in zip(left, seconds, strict=True)]
    ax.set_xlabel("seconds (summed over the run's batches)")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=8)


def _reasons(ax: Any, data: ReportData) -> None:
    rows = [(f"retried ({reason})", extra, "#1565c0") for reason, _, extra in data.retries]
    rows += [(f"{st}: {reason}", n, STATUS_COLOURS.get(st, "#607d8b")) for st, reason, n in data.fallbacks]
    if not _has(ax, rows):
        return
    bars = ax.barh([r[0] for r in rows], [r[1] for r in rows], color=[r[2] for r in rows])
    ax.bar_label(bars, fontsize=8)
    ax.set_xlabel("extra attempts (retries) / pages (fallbacks, failures)")
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()


def _compression(ax: Any, data: ReportData) -> None:
    rows = data.compression
    if not _has(ax, rows):
        return
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r[2] / MB for r in rows], width=0.4, label="original", color="#90a4ae")
    after = ax.bar([i + 0.2 for i in x], [r[3] / MB for r in rows], width=0.4, label="used", color="#00838f")
    ax.bar_label(after, labels=[f"-{1 - r[3] / r[2]:.0%}" if r[2] else "" for r in rows], fontsize=8)
    ax.set_xticks(list(x), [f"{r[0]} ({_n(r[1], 'doc')})" for r in rows], fontsize=8)
    ax.set_ylabel("MB")
    ax.legend(fontsize=8)


CHARTS: dict[str, tuple[str, Callable[[Any, ReportData], None]]] = {
    "documents": ("Documents by status", _documents),
    "pages": ("Pages by route, engine and status", _pages),
    "throughput": ("Throughput over time", _throughput),
    "stages": ("Time per stage (latest runs)", _stages),
    "reasons": ("Retries and fallbacks by reason", _reasons),
    "compression": ("Compression savings", _compression),
}


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _has(ax: Any, rows: list) -> bool:
    if not rows:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes, color="#757575")
        ax.set_xticks([])
        ax.set_yticks([])
    return bool(rows)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    _pyplot().close(fig)
    return buffer.getvalue()


def chart_pngs(data: ReportData) -> dict[str, bytes]:
    """Each chart of ``CHARTS`` as PNG bytes, by name."""
    plt = _pyplot()
    out = {}
    for name, (title, draw) in CHARTS.items():
        fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
        draw(ax, data)
        ax.set_title(title, fontsize=11)
        out[name] = _png(fig)
    return out


def overview_png(data: ReportData) -> bytes:
    """All charts on one figure (3 × 2), titled with the knowledge base and the report's time."""
    plt = _pyplot()
    fig, axes = plt.subplots(3, 2, figsize=(15, 13), layout="constrained")
    for ax, (title, draw) in zip(axes.flat, CHARTS.values(), strict=True):
        draw(ax, data)
        ax.set_title(title, fontsize=11)
    fig.suptitle(f"chandra_ocr run report — {data.kb} — {data.generated_at:%Y-%m-%d %H:%M} UTC", fontsize=13)
    return _png(fig)
