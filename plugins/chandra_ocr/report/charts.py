"""The report's charts, drawn with matplotlib (Agg, no display): one function per chart onto an Axes.

``chart_pngs`` gives each chart as its own PNG (for the HTML page); ``overview_png`` draws them
all on one figure (the report's PNG). matplotlib is imported only when a chart is drawn. Bars
keep room for at least ``MIN_SLOTS`` categories, so one run or one status does not fill a chart.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from chandra_ocr.report.data import DOCUMENT_STATUSES, STAGES, ReportData

STATUS_COLOURS = {"ingested": "#2e7d32", "ok": "#2e7d32", "partial": "#f9a825", "fallback": "#f9a825",
                  "quarantined": "#c62828", "failed": "#c62828"}  # fmt: skip
STAGE_COLOURS = {"compress": "#6d4c41", "extract": "#1565c0", "assemble": "#7b1fa2", "load": "#00838f"}
MB = 1024 * 1024
MIN_SLOTS = 4  # a chart's bar axis has room for at least this many bars
MIN_SPAN = timedelta(minutes=30)  # the shortest time axis (one run lasts seconds)


def _documents(ax: Any, data: ReportData) -> None:
    if not _has(ax, data.documents_by_status):
        return
    counts = {status: (docs, pages) for status, docs, pages in data.documents_by_status}
    names = [*DOCUMENT_STATUSES, *sorted(set(counts) - set(DOCUMENT_STATUSES))]  # zeros shown too
    rows = [(name, *counts.get(name, (0, 0))) for name in names]
    bars = ax.bar(
        names, [r[1] for r in rows], width=0.6, color=[STATUS_COLOURS.get(n, "#607d8b") for n in names]
    )
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
        ax.barh(
            groups, counts, left=left, height=0.6, label=status, color=STATUS_COLOURS.get(status, "#607d8b")
        )
        left = [a + b for a, b in zip(left, counts, strict=True)]
    _totals(ax, left, [_n(n, "page") for n in left])
    _room(ax, len(groups), "y")
    ax.set_xlabel("pages (route / engine, coloured by page status)")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.legend(fontsize=8, loc="lower right")


def _throughput(ax: Any, data: ReportData) -> None:
    if not _has(ax, data.ingested):
        return
    start = min([data.ingested[0][0], *(r.started_at for r in data.runs)])
    times, total = [(start, 0)], 0  # the line starts at zero, before the first document
    for moment, n in data.ingested:
        total += n
        times.append((moment, total))
    when, pages = [t for t, _ in times], [n for _, n in times]
    ax.plot(when, pages, drawstyle="steps-post", marker="o", markersize=3, color="#1565c0")
    ax.set_ylabel("pages in the knowledge base")
    ax.set_ylim(bottom=0, top=max(pages) * 1.15 or 1)
    ax.yaxis.set_major_locator(_integer_ticks())
    _time_axis(ax, when + [r.finished_at for r in data.runs])
    if data.runs:
        rate = ax.twinx()
        when, rates = [r.finished_at for r in data.runs], [r.pages_per_s for r in data.runs]
        rate.plot(when, rates, "o", color="#e65100")
        rate.set_ylabel("pages/s of each run", color="#e65100")
        rate.set_ylim(bottom=0, top=max(rates) * 1.3 or 1)


def _stages(ax: Any, data: ReportData) -> None:
    runs = [r for r in data.runs if r.stage_seconds][-10:]
    if not _has(ax, runs):
        return
    labels = [run_label(r.run_id) for r in runs]
    left = [0.0] * len(runs)
    for stage in STAGES:
        seconds = [r.stage_seconds.get(stage, 0.0) for r in runs]
        ax.barh(labels, seconds, left=left, height=0.6, label=stage, color=STAGE_COLOURS[stage])
        left = [a + b for a, b in zip(left, seconds, strict=True)]
    _totals(ax, left, [f"{s:.1f} s" for s in left])
    _room(ax, len(runs), "y")
    ax.set_xlabel("seconds (summed over the run's batches)")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=8, ncols=len(STAGES), loc="lower right")


def _reasons(ax: Any, data: ReportData) -> None:
    rows = [(f"retried ({reason})", extra, "#1565c0") for reason, _, extra in data.retries]
    rows += [(f"{st}: {reason}", n, STATUS_COLOURS.get(st, "#607d8b")) for st, reason, n in data.fallbacks]
    if not _has(ax, rows):
        return
    bars = ax.barh([r[0] for r in rows], [r[1] for r in rows], height=0.6, color=[r[2] for r in rows])
    ax.bar_label(bars, fontsize=8)
    _room(ax, len(rows), "y")
    ax.margins(x=0.15)
    ax.set_xlabel("extra attempts (retries) / pages (fallbacks, failures)")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()


def _compression(ax: Any, data: ReportData) -> None:
    rows = data.compression
    if not _has(ax, rows):
        return
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r[2] / MB for r in rows], width=0.4, label="original", color="#90a4ae")
    after = ax.bar([i + 0.2 for i in x], [r[3] / MB for r in rows], width=0.4, label="used", color="#00838f")
    saved = [1 - r[3] / r[2] if r[2] else 0.0 for r in rows]
    ax.bar_label(after, labels=[f"-{s:.0%}" if s >= 0.005 else "same size" for s in saved], fontsize=8)
    ax.set_xticks(list(x), [f"{r[0]} ({_n(r[1], 'doc')})" for r in rows], fontsize=8)
    _room(ax, len(rows), "x")
    ax.set_ylabel("MB")
    ax.margins(y=0.2)
    ax.legend(fontsize=8)


@dataclass(frozen=True)
class Chart:
    """One chart of the report: its title, a plain-language explanation, how it is drawn, and what the
    page says in one line instead when ``empty`` (the chart would only say "none")."""

    title: str
    explanation: str
    draw: Callable[[Any, ReportData], None]
    empty: Callable[[ReportData], bool]
    when_empty: str = "None yet."


CHARTS: dict[str, Chart] = {
    "documents": Chart(
        "Documents by status",
        "Every PDF ends in one of three states. Ingested: all of it is in the knowledge base. Partial: "
        "more of its pages than the failed-page budget (10 % by default) could not be read; the rest is "
        "in. Quarantined: nothing was loaded (a corrupt, empty or encrypted file, for instance). Each "
        "quarantined or partial file and its reason is listed under 'Quarantined and partial documents' "
        "below (and in documents.error).",
        _documents,
        lambda d: not d.documents_by_status,
    ),
    "pages": Chart(
        "Pages by route, engine and status",
        "Each page takes one route: text (its own text layer is read directly) or ocr (the page is "
        "rendered as an image and read by the engine named after the slash). The colour says how it "
        "ended: ok; fallback (the engine's answer was unusable, so the text layer or Tesseract was "
        "used); failed (nothing could be read).",
        _pages,
        lambda d: not d.pages_by_route,
    ),
    "throughput": Chart(
        "Throughput over time",
        "The blue line counts the pages in the knowledge base over time (UTC), one step per document "
        "loaded; the orange dots are each run's speed in pages per second (right-hand axis).",
        _throughput,
        lambda d: not d.ingested,
    ),
    "stages": Chart(
        "Time per stage (latest runs)",
        "Where each run spent its time: compress (shrinking PDFs before rendering), extract (finding "
        "each page's route, rendering and OCR), assemble (Markdown, chunks, Parquet files) and load "
        "(into DuckDB). Seconds are summed over the run's batches.",
        _stages,
        lambda d: not any(r.stage_seconds for r in d.runs),
    ),
    "reasons": Chart(
        "Retries and fallbacks by reason",
        "Retried: pages the engine read again because an answer was cut off, looping or unparsable "
        "(labelled with the last answer's finish reason; the number is the extra attempts). Fallback "
        "and failed: pages read another way, or not at all, by reason. 'none' means every page was "
        "read at the first attempt.",
        _reasons,
        lambda d: not (d.retries or d.fallbacks),
        "None: every page was read at the first attempt, by its own route.",
    ),
    "compression": Chart(
        "Compression savings",
        "Before rendering, PDFs are rewritten smaller when that works (originals are never changed). "
        "Grey is the size of the originals, teal the size of the copies used, with the saving in percent; "
        "'none' counts documents used as they were.",
        _compression,
        lambda d: not d.compression,
    ),
}


def run_label(run_id: str, width: int = 30) -> str:
    """A run id as people read it: Airflow's ``manual__2026-12-06T19:46:49.687664+00:00`` becomes
    ``manual 2026-12-06 19:46:49``; any other id longer than ``width`` keeps its start and its end."""
    kind, sep, stamp = run_id.partition("__")
    if sep and len(stamp) >= 19 and stamp[10] == "T":
        return f"{kind} {stamp[:10]} {stamp[11:19]}"
    return run_id if len(run_id) <= width else f"{run_id[: width - 9]}…{run_id[-8:]}"


def _room(ax: Any, n: int, axis: str) -> None:
    """Keep room for ``MIN_SLOTS`` bars on ``axis`` (bars at 0..n-1, the real ones centred)."""
    pad = max(MIN_SLOTS - n, 0) / 2
    (ax.set_xlim if axis == "x" else ax.set_ylim)(-0.5 - pad, n - 0.5 + pad)


def _totals(ax: Any, ends: Sequence[float], labels: list[str]) -> None:
    """Label stacked horizontal bars with their totals, just past their ends."""
    for y, (end, label) in enumerate(zip(ends, labels, strict=True)):
        ax.annotate(label, (end, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max(ends, default=0) * 1.2 or 1)


def _time_axis(ax: Any, moments: list) -> None:
    """Readable UTC times (hours and minutes, dates when they change), at least ``MIN_SPAN`` wide."""
    import matplotlib.dates as mdates

    first, last = min(moments), max(moments)
    pad = max(MIN_SPAN - (last - first), timedelta(0)) / 2 + (last - first) * 0.05
    ax.set_xlim(first - pad, last + pad)
    locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=first.tzinfo))
    ax.tick_params(axis="x", labelsize=8)


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
    for name, chart in CHARTS.items():
        fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
        chart.draw(ax, data)
        ax.set_title(chart.title, fontsize=11)
        out[name] = _png(fig)
    return out


def overview_png(data: ReportData) -> bytes:
    """All charts on one figure (3 × 2), titled with the knowledge base and the report's time."""
    plt = _pyplot()
    fig, axes = plt.subplots(3, 2, figsize=(15, 13), layout="constrained")
    for ax, chart in zip(axes.flat, CHARTS.values(), strict=True):
        chart.draw(ax, data)
        ax.set_title(chart.title, fontsize=11)
    fig.suptitle(f"chandra_ocr run report — {data.kb} — {data.generated_at:%Y-%m-%d %H:%M} UTC", fontsize=13)
    return _png(fig)
