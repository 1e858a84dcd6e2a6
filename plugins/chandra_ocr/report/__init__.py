"""The run report of a knowledge base: one self-contained HTML page and one overview PNG."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from chandra_ocr.report.charts import chart_pngs, overview_png
from chandra_ocr.report.data import ReportData, collect, run_incomplete
from chandra_ocr.report.page import render_html
from chandra_ocr.store.atomic import write_bytes_atomic, write_text_atomic
from chandra_ocr.store.layout import KbLayout

log = logging.getLogger(__name__)

__all__ = ["ReportData", "ReportFiles", "collect", "run_incomplete", "write_report"]


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    png: Path


def write_report(kb_dir: str | Path, out_dir: str | Path | None = None) -> ReportFiles:
    """Write ``report.html`` and ``report.png`` for the knowledge base at ``kb_dir``.

    ``out_dir`` defaults to ``<kb_dir>/report``. Both files are replaced atomically. Raises
    StoreError when the folder holds no knowledge base.
    """
    layout = KbLayout(Path(kb_dir))
    data = collect(layout)
    out = Path(out_dir) if out_dir is not None else layout.root / "report"
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out / "report.html", out / "report.png")
    write_text_atomic(files.html, render_html(data, chart_pngs(data)))
    png = overview_png(data)
    write_bytes_atomic(files.png, png)
    for path in (files.html, files.png):
        path.chmod(0o644)  # for people and web servers, not only this user
    log.info("run report of %s: %s (%s)", layout.root, files.html, files.png)
    return files
