"""The report as a person sees it: headless Chromium (Debian ``chromium``) renders the HTML to a PNG."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from PIL import Image

from chandra_ocr.report import write_report
from chandra_ocr.report.charts import STATUS_COLOURS

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


def test_chromium_renders_the_report_with_its_charts(ingested_kb, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed: run `make test` (scripts/system-deps.sh)"
    files = write_report(ingested_kb.kb, tmp_path / "report")
    shot = tmp_path / "screenshot.png"
    subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2400",
         f"--screenshot={shot}", files.html.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    with Image.open(shot) as image:
        assert image.size == (1280, 2400)
        # The charts were decoded and painted: the bars of ingested documents / ok pages are there
        # in their colour, over an area no text or border would fill.
        assert _colour_pixels(image, STATUS_COLOURS["ingested"]) > 5_000
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 22)) > 200
