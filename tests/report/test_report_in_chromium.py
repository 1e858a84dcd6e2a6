"""The report as a person sees it: headless Chromium (Debian ``chromium``) renders the HTML to a PNG."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from chandra_ocr.report import write_report
from chandra_ocr.report.charts import CHARTS, STATUS_COLOURS

pytestmark = pytest.mark.slow

# Chromium as root needs --no-sandbox; the rest keeps it off the (closed) network and from
# background work (updates, sync, first-run pages).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=5000"]  # fmt: skip


def _colour_pixels(image: Image.Image, hex_colour: str, tolerance: int = 12) -> int:
    target = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(
        n
        for n, rgb in image.convert("RGB").getcolors(maxcolors=1 << 22) or []
        if all(abs(a - b) <= tolerance for a, b in zip(rgb, target, strict=True))
    )


def screenshot(html: Path, folder: Path, height: int = 2400) -> Path:
    """``html`` as headless Chromium paints it in a window 1280 pixels wide and ``height`` high."""
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed: run `make test` (scripts/system-deps.sh)"
    shot = folder / "screenshot.png"
    subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={folder / 'profile'}", f"--window-size=1280,{height}",
         f"--screenshot={shot}", html.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return shot


def test_chromium_renders_the_report_with_its_charts(ingested_kb, tmp_path):
    files = write_report(ingested_kb.kb, tmp_path / "report")
    shot = screenshot(files.html, tmp_path)
    with Image.open(shot) as image:
        assert image.size == (1280, 2400)
        # The charts were decoded and painted: the bars of ingested documents / ok pages are there
        # in their colour, over an area no text or border would fill.
        assert _colour_pixels(image, STATUS_COLOURS["ingested"]) > 5_000
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 22)) > 200


def test_the_report_of_one_document_reads_as_a_person_sees_it(one_document_kb, tmp_path):
    """One document, one run: the bars leave room, and the explanations under the charts are legible
    (read back from the screenshot by Tesseract, as a reader would read them)."""
    files = write_report(one_document_kb.kb, tmp_path / "report")
    shot = screenshot(files.html, tmp_path, height=4200)
    with Image.open(shot) as image:
        green = _colour_pixels(image, STATUS_COLOURS["ingested"])
    # One ingested document (one bar among three places) and one page group (one bar among four):
    # bars that filled their charts (as before this test) painted about 300,000 pixels of that green.
    assert 3_000 < green < 90_000
    done = subprocess.run(["tesseract", str(shot), "-"], capture_output=True, text=True, timeout=300)
    text = " ".join(done.stdout.split())
    for chart in CHARTS.values():
        assert chart.title in text
    for phrase in ("failed-page budget", "named after the slash", "pages per second", "paging values"):
        assert phrase in text, text[-3000:]


def _widths(html: Path, folder: Path) -> tuple[int, int]:
    """(document scroll width, window inner width) of ``html`` in a 1280-pixel-wide headless Chromium,
    measured by a script added to a copy of the page (the report itself has none)."""
    probe = folder / "probe.html"
    measure = ("<script>document.title = document.documentElement.scrollWidth + ' ' + window.innerWidth;"
               "</script></body>")  # fmt: skip
    probe.write_text(html.read_text().replace("</body>", measure))
    done = subprocess.run(
        [shutil.which("chromium") or "chromium", *FLAGS, f"--user-data-dir={folder / 'profile'}",
         "--window-size=1280,2400", "--dump-dom", probe.as_uri()],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    title = done.stdout.split("<title>")[1].split("</title>")[0]
    scroll, inner = map(int, title.split())
    return scroll, inner


def test_the_report_fits_a_1280_pixel_screen_with_airflow_run_ids_and_long_names(ingested_kb, tmp_path):
    """Airflow's long run ids, a deep source path and a long reason: no column is pushed off screen."""
    import dataclasses

    from chandra_ocr.report import collect
    from chandra_ocr.report.charts import chart_pngs
    from chandra_ocr.report.page import render_html
    from chandra_ocr.store.layout import KbLayout

    data = collect(KbLayout(ingested_kb.kb))
    data.runs = [
        dataclasses.replace(r, run_id=f"scheduled__2026-12-0{i + 1}T00:00:00.123456+00:00")
        for i, r in enumerate(data.runs)
    ]
    deep = "/".join(["archive", "department-of-water-quality", "2025", "quarterly-reports"] * 3)
    data.incomplete.append((f"{deep}/scan-{'x' * 60}.pdf", "partial", "3 of 40 pages could not be read " * 8,
                            data.runs[0].run_id))  # fmt: skip
    html = tmp_path / "report.html"
    html.write_text(render_html(data, chart_pngs(data)))
    scroll, inner = _widths(html, tmp_path)
    assert inner == 1280 and scroll <= inner
