"""The run report of a real knowledge base: its numbers against DuckDB, self-containment, escaping, CLI."""

from __future__ import annotations

import base64
import html
import io
import json
import re

import pytest
from bs4 import BeautifulSoup
from ingested import ODD_NAME
from PIL import Image

from chandra_ocr.cli import main
from chandra_ocr.report import write_report
from chandra_ocr.report.data import STAGES


@pytest.fixture(scope="module")
def report(ingested_kb, tmp_path_factory):
    files = write_report(ingested_kb.kb, tmp_path_factory.mktemp("report"))
    text = files.html.read_text(encoding="utf-8")
    return files, text, BeautifulSoup(text, "lxml")


def _table_after(soup: BeautifulSoup, heading: str, nth: int = 0) -> list[list[str]]:
    """The body rows (cell texts) of the ``nth`` table following the h2 whose text starts with ``heading``."""
    h2 = next(h for h in soup.find_all("h2") if h.get_text().startswith(heading))
    table = h2.find_all_next("table")[nth]
    return [[td.get_text() for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]


def test_the_run_records_every_stages_seconds(ingested_kb):
    (metrics,) = ingested_kb.rows("SELECT metrics FROM runs")[0]
    metrics = json.loads(metrics)
    stages = metrics["stage_seconds"]
    assert set(stages) == set(STAGES) and all(s > 0 for s in stages.values())
    assert sum(stages.values()) <= metrics["seconds"]  # stages run one after another inside the run
    assert metrics["batches"] == len(ingested_kb.summary.batches) > 1
    assert metrics["workers"] == 2  # the cpu engine's values travel into the run record


def test_documents_and_pages_tables_match_the_knowledge_base(ingested_kb, report):
    _, _, soup = report
    docs = {r[0]: (int(r[1]), int(r[2])) for r in _table_after(soup, "Documents by status")}
    expected = ingested_kb.rows("SELECT status, count(*), sum(n_pages) FROM documents GROUP BY 1")
    assert docs == {status: (n, pages) for status, n, pages in expected}
    pages = {tuple(r[:3]): int(r[3]) for r in _table_after(soup, "Pages by route")}
    expected = ingested_kb.rows("SELECT route, engine, status, count(*) FROM pages GROUP BY ALL")
    assert pages == {(r, e, s): n for r, e, s, n in expected}
    assert {k for k, _, _ in pages} == {"text", "ocr"}


def test_runs_stages_compression_and_paging_values_are_shown(ingested_kb, report):
    _, _, soup = report
    summary = ingested_kb.summary
    (run,) = _table_after(soup, "Throughput over time")
    assert run[0] == summary.run_id and int(run[4]) == summary.pages
    stages = {r[0]: float(r[1]) for r in _table_after(soup, "Time per stage")}
    (metrics,) = ingested_kb.rows("SELECT metrics FROM runs")[0]
    recorded = json.loads(metrics)["stage_seconds"]
    assert stages == pytest.approx({s: recorded[s] for s in STAGES}, abs=0.051)
    compression = {r[0]: r for r in _table_after(soup, "Compression savings")}
    for method, n, before, after in ingested_kb.rows(
        "SELECT coalesce(compress_method, 'none'), count(*), sum(bytes), "
        "sum(coalesce(compressed_bytes, bytes)) FROM documents GROUP BY 1"
    ):
        assert int(compression[method][1]) == n
        assert compression[method][4] == f"{1 - after / before:.1%}"
    paging = {r[0]: r[1] for r in _table_after(soup, "Engine settings of each run")}
    assert paging["workers"] == "2" and "busy_s" in paging


def test_biggest_and_slowest_documents_are_ranked(ingested_kb, report):
    _, _, soup = report
    biggest = [r[0] for r in _table_after(soup, "Biggest documents")]
    by_size = ingested_kb.rows("SELECT file_name FROM documents ORDER BY bytes DESC, 1")
    assert biggest == [r[0] for r in by_size]
    slowest = _table_after(soup, "Slowest documents")
    seconds = [float(r[3]) for r in slowest]
    assert seconds == sorted(seconds, reverse=True) and seconds[0] > 0
    ocr_docs = {r[0] for r in ingested_kb.rows("SELECT DISTINCT file_name FROM documents JOIN pages "
                                                "USING (doc_id) WHERE route = 'ocr'")}  # fmt: skip
    assert slowest[0][0] in ocr_docs  # Tesseract pages take longer than text-layer pages


def test_the_page_is_self_contained_and_its_charts_are_pngs(report):
    files, text, soup = report
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:|//|file:)""", text, re.I)
    assert not soup.find_all(["script", "link"])
    images = soup.find_all("img")
    assert len(images) == 6 - len(soup.find_all("p", class_="none")) >= 4  # an empty chart is one line
    for img in images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        with Image.open(io.BytesIO(base64.b64decode(img["src"][len(prefix) :]))) as chart:
            assert chart.format == "PNG" and chart.width >= 600 and chart.height >= 300
    with Image.open(files.png) as overview:
        assert overview.format == "PNG" and overview.width >= 1200
        assert len(overview.getcolors(maxcolors=1 << 20) or []) > 50  # drawn, not blank


def test_file_names_are_escaped(report):
    _, text, soup = report
    assert ODD_NAME not in text and html.escape(ODD_NAME) in text
    assert ODD_NAME in {r[0] for r in _table_after(soup, "Biggest documents")}


def test_cli_writes_the_report_into_the_kb_and_refuses_a_folder_without_one(ingested_kb, tmp_path, capsys):
    assert main(["report", "--kb", str(ingested_kb.kb)]) == 0
    out = capsys.readouterr().out
    assert str(ingested_kb.kb / "report" / "report.html") in out
    assert (ingested_kb.kb / "report" / "report.png").stat().st_size > 0
    assert main(["report", "--kb", str(tmp_path / "nothing")]) == 2
    assert "no knowledge base" in capsys.readouterr().err


def test_quarantined_and_partial_documents_are_listed_with_reason_and_run(ingested_kb, report):
    _, _, soup = report
    listed = _table_after(soup, "Quarantined and partial documents")
    expected = ingested_kb.rows(
        "SELECT file_name, status, error, run_id FROM documents WHERE status <> 'ingested' ORDER BY file_name"
    )
    assert expected and sorted(map(tuple, listed)) == sorted(expected)  # samples/broken.pdf at least


def test_an_empty_chart_is_one_line_and_run_ids_read_as_kind_date_and_time(one_document_kb, tmp_path):
    from chandra_ocr.report.charts import CHARTS, run_label

    soup = BeautifulSoup(write_report(one_document_kb.kb, tmp_path).html.read_text(), "lxml")
    h2 = soup.find("h2", id="reasons")  # one born-digital document: no retry, no fallback
    assert (
        h2.find_next_sibling().name == "p"
        and h2.find_next_sibling().get_text() == CHARTS["reasons"].when_empty
    )
    assert not soup.find("img", alt=CHARTS["reasons"].title) and soup.find("img", alt=CHARTS["pages"].title)
    assert run_label("manual__2026-12-06T19:46:49.687664+00:00") == "manual 2026-12-06 19:46:49"
    assert run_label("cli-20261206T194649-1a2b3c") == "cli-20261206T194649-1a2b3c"
    assert run_label("x" * 20 + "y" * 20) == "x" * 20 + "y" + "…" + "y" * 8
