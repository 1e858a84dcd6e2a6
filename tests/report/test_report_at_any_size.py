"""The report of the smallest knowledge base (one document, one run, one status) still says something.

Measured on the chart PNGs the page embeds: bars keep room beside them, the time axis reads as
clock times, and every chart has a plain-language explanation under it.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from bs4 import BeautifulSoup
from PIL import Image

from chandra_ocr.report import write_report
from chandra_ocr.report.charts import CHARTS, STAGE_COLOURS, STATUS_COLOURS, _pyplot, _throughput, chart_pngs
from chandra_ocr.report.data import collect
from chandra_ocr.report.page import ENGINE_VALUES_TITLE
from chandra_ocr.store.layout import KbLayout


def colour_mask(png: bytes, hex_colour: str, tolerance: int = 12) -> np.ndarray:
    """Pixels of ``png`` within ``tolerance`` of ``hex_colour`` (a bool array, rows × columns)."""
    with Image.open(io.BytesIO(png)) as image:
        rgb = np.asarray(image.convert("RGB"), dtype=int)
    target = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return np.all(np.abs(rgb - target) <= tolerance, axis=2)


def longest_run(mask: np.ndarray) -> int:
    """The longest run of True along the rows of ``mask`` (transpose it for columns)."""
    best = 0
    for row in mask:
        edges = np.diff(np.concatenate(([0], row.astype(int), [0])))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        best = max(best, int((ends - starts).max(initial=0)))
    return best


@pytest.fixture(scope="module")
def pngs(one_document_kb) -> dict[str, bytes]:
    return chart_pngs(collect(KbLayout(one_document_kb.kb)))


def test_one_status_does_not_fill_the_documents_chart(pngs):
    green = colour_mask(pngs["documents"], STATUS_COLOURS["ingested"])
    assert green.sum() > 1_000  # the bar is there
    assert longest_run(green) < 0.3 * green.shape[1]  # and narrow: partial and quarantined keep their places


def test_one_route_and_one_run_do_not_fill_their_charts(pngs):
    ok = colour_mask(pngs["pages"], STATUS_COLOURS["ok"])
    assert ok.sum() > 1_000 and longest_run(ok.T) < 0.25 * ok.shape[0]
    extract = colour_mask(pngs["stages"], STAGE_COLOURS["extract"])
    assert extract.sum() > 200 and longest_run(extract.T) < 0.25 * extract.shape[0]


def test_one_run_has_a_readable_time_axis(one_document_kb):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    try:
        _throughput(ax, collect(KbLayout(one_document_kb.kb)))
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        offset = ax.xaxis.get_offset_text().get_text()
        low, high = ax.get_xlim()
    finally:
        plt.close(fig)
    assert len(labels) >= 3 and all(
        re.fullmatch(r"\d{2}:\d{2}|\w{3} \d{1,2}|\d{4}-\w{3}-\d{2}", t) for t in labels
    )
    assert not re.search(r"\d\.\d{3}", " ".join(labels) + offset)  # no seconds with fractions
    assert (high - low) * 24 * 60 >= 29  # days → minutes: at least half an hour around the run


def test_every_chart_and_the_engine_values_are_explained(one_document_kb, tmp_path):
    files = write_report(one_document_kb.kb, tmp_path)
    soup = BeautifulSoup(files.html.read_text(encoding="utf-8"), "lxml")
    explained = [img.find_next_sibling("p", class_="explain") for img in soup.find_all("img")]
    shown = [c for c in CHARTS.values() if soup.find("img", alt=c.title)]
    assert [p.get_text() for p in explained] == [c.explanation for c in shown] and len(shown) >= 4
    for chart in (c for c in CHARTS.values() if c not in shown):  # an empty chart: its title and one line
        heading = next(h for h in soup.find_all("h2") if h.get_text() == chart.title)
        assert heading.find_next_sibling().get_text() == chart.when_empty
    assert all(len(c.explanation.split()) >= 15 for c in CHARTS.values())
    heading = next(h for h in soup.find_all("h2") if h.get_text() == ENGINE_VALUES_TITLE)
    assert "paging values" in heading.find_next_sibling("p", class_="explain").get_text()
    assert "Paging values used" not in soup.get_text()
