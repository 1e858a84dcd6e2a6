"""The report as one self-contained HTML page: inline CSS, charts embedded as base64 PNG, escaped tables."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from typing import Any

from chandra_ocr.report.charts import CHARTS, MB
from chandra_ocr.report.data import STAGES, ReportData

ENGINE_VALUES_TITLE = "Engine settings of each run"
ENGINE_VALUES_EXPLANATION = (
    "What the OCR engine worked with in each of the latest runs, as it recorded it; useful when "
    "comparing their speeds. For vLLM these are its paging values: how many pages it reads at once "
    "(max_num_seqs, in_flight_pages), how many tokens it processes per step (max_num_batched_tokens) "
    "and the size of its KV cache, the GPU memory that holds the pages being read (kv_cache_tokens). "
    "For Tesseract (engine cpu): its parallel workers, pages read and seconds busy."
)

_CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #212121; max-width: 1200px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.meta { color: #616161; font-size: 13px; }
.totals span { display: inline-block; margin: 10px 18px 0 0; font-size: 15px; }
.totals b { font-size: 20px; }
section { display: grid; grid-template-columns: minmax(0, 700px) minmax(0, 1fr); gap: 16px;
          align-items: start; }
section.wide { grid-template-columns: minmax(0, 1fr); }
p.none { color: #616161; font-size: 13px; margin: 0; }
img { width: 100%; max-width: 700px; border: 1px solid #e0e0e0; }
p.explain { color: #424242; font-size: 13px; line-height: 1.45; max-width: 700px; margin: 6px 0 0 0; }
table { border-collapse: collapse; font-size: 12px; margin-top: 6px; max-width: 100%; }
th, td { border: 1px solid #e0e0e0; padding: 3px 7px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #f5f5f5; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
"""


def render_html(data: ReportData, charts: dict[str, bytes]) -> str:
    """The whole page; ``charts`` are the PNGs of ``charts.chart_pngs`` by name."""
    totals = "".join(f"<span><b>{n}</b> {html.escape(k)}</span>" for k, n in data.totals.items())
    body = [
        f"<h1>chandra_ocr run report</h1><div class='meta'>knowledge base {_e(data.kb)} · generated "
        f"{data.generated_at:%Y-%m-%d %H:%M:%S} UTC</div><div class='totals'>{totals}</div>",
        _section(
            "documents", data, charts, _table(["status", "documents", "pages"], data.documents_by_status)
        ),
        _incomplete_table(data),
        _section("pages", data, charts, _table(["route", "engine", "status", "pages"], data.pages_by_route)),
        _section("throughput", data, charts, _runs_table(data), wide=True),
        _section("stages", data, charts, _stages_table(data)),
        _section("reasons", data, charts, _reasons_tables(data)),
        _section("compression", data, charts, _compression_table(data)),
        "<h2>Biggest documents</h2>"
        + _table(
            ["file", "pages", "MB", "MB used", "status"],
            [(f, p, _mb(b), _mb(c) if c is not None else "-", s) for f, p, b, c, s in data.biggest],
        ),
        "<h2>Slowest documents (summed page latency)</h2>"
        + _table(
            ["file", "pages", "OCR pages", "seconds", "s/page"],
            [(f, p, o, f"{s:.1f}", f"{s / max(p, 1):.2f}") for f, p, o, s in data.slowest],
        ),
        f"<h2>{ENGINE_VALUES_TITLE}</h2><p class='explain'>{_e(ENGINE_VALUES_EXPLANATION)}</p>"
        + _paging_table(data),
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>chandra_ocr run report</title>"
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _section(name: str, data: ReportData, charts: dict[str, bytes], table: str, *, wide: bool = False) -> str:
    """A chart with its explanation and its table beside it (``wide``: below it), or one line when the
    chart would show nothing."""
    chart = CHARTS[name]
    if chart.empty(data):
        return f"<h2 id='{name}'>{_e(chart.title)}</h2><p class='none'>{_e(chart.when_empty)}</p>"
    image = base64.b64encode(charts[name]).decode("ascii")
    layout = " class='wide'" if wide else ""
    return (
        f"<h2 id='{name}'>{_e(chart.title)}</h2><section{layout}><div>"
        f"<img alt='{_e(chart.title)}' "
        f"src='data:image/png;base64,{image}'><p class='explain'>{_e(chart.explanation)}</p></div>"
        f"<div>{table}</div></section>"
    )


def _incomplete_table(data: ReportData) -> str:
    n = data.totals.get("documents", 0) - sum(d for s, d, _ in data.documents_by_status if s == "ingested")
    shown = f" (the latest {len(data.incomplete)} of {n})" if n > len(data.incomplete) else ""
    return f"<h2 id='incomplete'>Quarantined and partial documents{shown}</h2>" + _table(
        ["file", "status", "reason", "run"], data.incomplete
    )


def _runs_table(data: ReportData) -> str:
    rows = [
        (r.run_id, f"{r.started_at:%Y-%m-%d %H:%M:%S}", f"{r.seconds:.1f}", r.n_documents, r.n_pages,
         f"{r.pages_per_s:.2f}", r.metrics.get("engine") or ", ".join(r.metrics.get("engines") or []),
         r.metrics.get("backfill", ""), _model_use(r.metrics.get("model_use")))
        for r in reversed(data.runs[-15:])
    ]  # fmt: skip
    head = ["run", "started (UTC)", "seconds", "docs", "pages", "pages/s", "engine", "batches", "model"]
    return _table(head, rows)


def _model_use(use: dict | None) -> str:
    """A run's warm-model use: loads it paid (and their seconds), pages per model, GPU busy share."""
    if not use:
        return ""
    loads = use["model_loads"]
    text = f"{loads} load{'' if loads == 1 else 's'} ({', '.join(f'{s:g} s' for s in use['model_load_s'])})"
    text = text if loads else "warm (no load)"
    text += f"; {use['pages_per_model']:g} pages/model"
    busy = use.get("gpu_busy_share")
    return text + (f"; GPU busy {busy:.0%}" if busy is not None else "")


def _stages_table(data: ReportData) -> str:
    totals = {s: sum(r.stage_seconds.get(s, 0.0) for r in data.runs) for s in STAGES}
    whole = sum(totals.values())
    rows = [(s, f"{totals[s]:.1f}", f"{totals[s] / whole:.0%}" if whole else "-") for s in STAGES]
    return "All runs:" + _table(["stage", "seconds", "share"], rows)


def _reasons_tables(data: ReportData) -> str:
    retries = _table(["final finish reason", "pages retried", "extra attempts"], data.retries)
    fallbacks = _table(["page status", "reason", "pages"], data.fallbacks)
    return f"Retries:{retries}<br>Fallbacks and failures:{fallbacks}"


def _compression_table(data: ReportData) -> str:
    rows = [
        (m, n, _mb(b), _mb(a), f"{1 - a / b:.1%}" if b else "-", _mb(b - a))
        for m, n, b, a in data.compression
    ]
    return _table(["method", "documents", "MB before", "MB used", "saved", "MB saved"], rows)


def _paging_table(data: ReportData) -> str:
    runs = [r for r in data.runs if r.paging][-4:]
    if not runs:
        return "<p>No engine values recorded.</p>"
    keys = sorted({k for r in runs for k in r.paging})
    rows = [(k, *[_value(r.paging.get(k, "")) for r in runs]) for k in keys]
    return _table(["value", *[r.run_id for r in runs]], rows)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = list(rows)
    if not rows:
        return "<p>None.</p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)  # every value escaped
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    numeric = isinstance(value, int | float) or (isinstance(value, str) and value.replace(".", "").isdigit())
    return f"<td class='n'>{_e(value)}</td>" if numeric else f"<td>{_e(value)}</td>"


def _value(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _mb(n: int | float) -> str:
    return f"{n / MB:.2f}"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
