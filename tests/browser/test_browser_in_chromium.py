"""The knowledge-base browser as a person uses it: ``chandra-ingest serve`` on 127.0.0.1, Debian's
Chromium headless. Boxes are checked where the browser paints them against the ``blocks`` rows;
screenshots of each view are written to the test's tmp folder."""

from __future__ import annotations

import io
import urllib.error
import urllib.request

import pytest
from browser_kb import FALLBACK_ID, PAYLOADS, XSS_FILE
from PIL import Image
from serving import serving, url_of

pytestmark = pytest.mark.slow

_BOXES = """[...document.querySelectorAll('svg#page g.block')].map(g => {
  const r = g.querySelector('rect'), box = r.getBoundingClientRect();
  return {no: +g.dataset.block, label: g.dataset.label,
          attrs: ['x', 'y', 'width', 'height'].map(a => +r.getAttribute(a)),
          screen: [box.left, box.top, box.width, box.height]};
})"""
_SHEET = (
    "(() => { const b = document.querySelector('svg#page rect.sheet').getBoundingClientRect(); "
    "return [b.left, b.top, b.width, b.height]; })()"
)  # fmt: skip  (the painted page)


def _check_boxes(browser, kb, doc_id: str, page_no: int) -> list[dict]:
    """Every block with a box is drawn at its place: the SVG attributes are the row's PDF points and
    the painted rectangle sits at the same place of the painted page (to a pixel)."""
    width, height = kb.rows("SELECT width_pt, height_pt FROM pages WHERE doc_id = ? AND page_no = ?",
                            [doc_id, page_no])[0]  # fmt: skip
    rows = kb.rows(
        "SELECT block_no, label, x0, y0, x1, y1 FROM blocks WHERE doc_id = ? AND page_no = ? "
        "AND x0 IS NOT NULL ORDER BY block_no",
        [doc_id, page_no],
    )
    drawn = browser.js(_BOXES)
    assert [(d["no"], d["label"]) for d in drawn] == [(no, label) for no, label, *_ in rows]
    left, top, sheet_w, sheet_h = browser.js(_SHEET)
    scale = sheet_w / width
    assert sheet_h == pytest.approx(height * scale, abs=2)  # the page keeps its proportions
    for d, (_, _, x0, y0, x1, y1) in zip(drawn, rows, strict=True):
        assert d["attrs"] == pytest.approx([x0, y0, x1 - x0, y1 - y0], abs=1e-6)
        expected = [left + x0 * scale, top + y0 * scale, (x1 - x0) * scale, (y1 - y0) * scale]
        assert d["screen"] == pytest.approx(expected, abs=1.5)  # stroke width aside
    return drawn


def _page_image(browser, base_url: str) -> Image.Image:
    """The page image the view shows, fetched as the browser fetched it."""
    href = browser.js("document.getElementById('page-image').getAttribute('href')")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(base_url + href, timeout=60) as reply:
        assert reply.headers["Content-Type"] == "image/png"
        return Image.open(io.BytesIO(reply.read()))


def _dark_pixels(shot, box: list[float]) -> int:
    """Near-black pixels inside a painted box (3 px in from its edges): the page image's ink."""
    x, y, w, h = box
    with Image.open(shot) as image:
        inside = image.convert("L").crop((int(x) + 3, int(y) + 3, int(x + w) - 3, int(y + h) - 3))
        return sum(n for n, level in inside.getcolors(maxcolors=256 * 256) or [] if level < 100)


def test_the_document_list_shows_every_document_and_filters(browser, base_url, browser_kb, tmp_path):
    browser.goto(base_url + "/")
    shown = zip(
        browser.attrs("#documents tbody tr", "data-doc"), browser.table("#documents tbody tr"), strict=True
    )
    stored = browser_kb.rows("SELECT doc_id, status, file_name FROM documents")
    assert sorted((doc_id, row[1], row[0]) for doc_id, row in shown) == sorted(stored)
    runs = browser_kb.rows("SELECT run_id, n_documents FROM runs")
    assert [(row[0], int(row[3])) for row in browser.table("#runs tbody tr")] == runs
    browser.screenshot(tmp_path / "documents.png")

    browser.goto(base_url + "/?status=quarantined")
    assert [row[0] for row in browser.table("#documents tbody tr")] == ["broken.pdf"]
    browser.goto(base_url + "/?flagged=true")
    assert browser.attrs("#documents tbody tr", "data-doc") == [FALLBACK_ID]


def test_a_born_digital_page_shows_its_boxes_over_its_image_and_its_table(
    browser, base_url, browser_kb, tmp_path
):
    doc_id = browser_kb.doc_id("report.pdf")
    browser.goto(f"{base_url}/doc/{doc_id}/page/1")
    assert _page_image(browser, base_url).width == 1200
    assert browser.texts("#image-error") == []
    drawn = _check_boxes(browser, browser_kb, doc_id, 1)
    table = next(d for d in drawn if d["label"] == "table")
    shot = browser.screenshot(tmp_path / "born_digital_page.png")
    assert _dark_pixels(shot, table["screen"]) > 1000  # the table's rules and figures, under its box

    # The table as a grid: header row and body as stored, the column names as stored.
    sql = "SELECT header, n_rows, n_cols FROM tables WHERE doc_id = ? AND page_no = 1 AND table_no = 1"
    header, n_rows, n_cols = browser_kb.rows(sql, [doc_id])[0]
    tags = browser.js("[...document.querySelectorAll('table.grid[data-table=\"1\"] th, "
                      "table.grid[data-table=\"1\"] td')].map(c => c.tagName)")  # fmt: skip
    grid = browser.table('table.grid[data-table="1"] tr')
    cells = browser_kb.rows(
        "SELECT is_header, text FROM table_cells WHERE doc_id = ? AND page_no = 1 AND table_no = 1 "
        'ORDER BY "row", col',
        [doc_id],
    )
    assert len(grid) == n_rows and all(len(row) == n_cols for row in grid)
    assert [c for row in grid for c in row] == [text for _, text in cells]
    assert tags == ["TH" if is_header else "TD" for is_header, _ in cells]
    assert grid[0] == list(header)
    assert browser.texts("p.columns code") == list(header)
    assert browser.attrs('table.grid[data-table="1"]', "data-block") == [str(table["no"])]

    # Pointing at the table's box shows its label and text.
    x, y, w, h = table["screen"]
    browser.hover(x + w / 2, y + h / 2)
    sql = "SELECT text FROM blocks WHERE doc_id = ? AND page_no = 1 AND block_no = ?"
    assert browser.texts("#picked-label") == ["table"]
    assert (
        browser.js("document.getElementById('picked-text').textContent")
        == browser_kb.rows(sql, [doc_id, table["no"]])[0][0]
    )


def test_a_scanned_page_shows_the_boxes_tesseract_read(browser, base_url, browser_kb, tmp_path):
    doc_id = browser_kb.doc_id("scanned_memo.pdf")
    sql = "SELECT route, engine, attempts, markdown FROM pages WHERE doc_id = ? AND page_no = 1"
    route, engine, attempts, markdown = browser_kb.rows(sql, [doc_id])[0]
    assert route == "ocr"
    browser.goto(f"{base_url}/doc/{doc_id}/page/1")
    assert _page_image(browser, base_url).width == 1200
    drawn = _check_boxes(browser, browser_kb, doc_id, 1)
    assert len(drawn) >= 2
    shot = browser.screenshot(tmp_path / "scanned_page.png")
    assert _dark_pixels(shot, drawn[0]["screen"]) > 50  # the scan's ink under the first box
    facts = dict(browser.table("#page-facts tr"))
    assert facts["Route"].startswith("ocr") and facts["Engine / model"].startswith(engine)
    assert facts["Attempts"] == str(attempts)
    assert browser.js("document.getElementById('markdown').textContent") == markdown


def test_the_review_queue_leads_to_the_pages_to_look_at(browser, base_url, browser_kb, tmp_path):
    browser.goto(base_url + "/review")
    assert browser.table("#review-pages tbody tr") == [
        [
            "ledger.pdf",
            "p. 1",
            "fallback",
            "ocr",
            "cpu",
            "3",
            "length",
            "vllm: output cut at max_tokens 3 times",
            "",
        ]
    ]
    docs = [(row[0], row[1], row[3]) for row in browser.table("#review-documents tbody tr")]
    assert sorted(docs) == sorted(
        browser_kb.rows("SELECT file_name, status, error FROM documents WHERE status <> 'ingested'")
    )
    browser.screenshot(tmp_path / "review.png")

    # One click to the page; its source is gone, so no image, and the extracted content still shows.
    browser.click("#review-pages tbody a")
    assert browser.js("location.pathname") == f"/doc/{FALLBACK_ID}/page/1"
    assert "the source is gone" in browser.texts("#image-error")[0]
    assert browser.attrs("#page-image", "href") == []
    assert "read by the fallback engine" in browser.texts("#blocks")[0]
    drawn = _check_boxes(browser, browser_kb, FALLBACK_ID, 1)
    shot = browser.screenshot(tmp_path / "review_page.png")
    assert _dark_pixels(shot, drawn[0]["screen"]) < 20  # a blank page under the box


def test_search_finds_chunks_and_tables_and_links_to_their_blocks(browser, base_url, browser_kb, tmp_path):
    question = "/search?q=nitrate+levels+at+every+station"
    browser.goto(base_url + question)
    assert browser.texts("#hits-note") == []
    hits = browser.attrs("#chunk-hits li a", "href")
    assert hits and all(h.startswith("/doc/") for h in hits)
    pages = [h.split("?")[0] for h in hits]
    assert len(set(pages)) == len(pages)  # a page once
    doc_id = browser_kb.doc_id("report.pdf")
    sql = "SELECT block_no FROM blocks WHERE doc_id = ? AND page_no = 1 AND label = 'table'"
    block = browser_kb.rows(sql, [doc_id])[0][0]
    # words, not the phrase: the report's table holds "nitrate" and "station", not the question
    assert browser.attrs("#table-hits tbody a", "href")[:1] == [
        f"/doc/{doc_id}/page/1?block={block}#block-{block}"
    ]
    browser.screenshot(tmp_path / "search.png")

    browser.goto(base_url + "/search?q=Millbrook")
    assert browser.attrs("#table-hits tbody a", "href") == [
        f"/doc/{doc_id}/page/1?block={block}#block-{block}"
    ]
    browser.click("#table-hits tbody a")
    assert browser.attrs("svg#page g.block.picked", "data-block") == [str(block)]
    assert browser.texts("#picked-label") == ["table"]

    # A chunk hit opens its page with the chunk's first block picked.
    browser.goto(base_url + question)
    browser.click("#chunk-hits li a")
    picked = browser.attrs("svg#page g.block.picked", "data-block")
    assert len(picked) == 1 and hits[0].endswith(f"?block={picked[0]}#block-{picked[0]}")


def test_search_without_the_embed_extra_says_the_command_that_installs_it(browser, browser_kb, without_embed):
    from chandra_ocr.extras import install_command

    with serving(browser_kb.root, without_embed) as line:
        browser.goto(url_of(line) + "/search?q=Millbrook")
        (note,) = browser.texts("#hits-note")
        assert note.startswith("words only: vector search (feed and search) needs the 'embed' extra")
        assert note.endswith(install_command("embed"))
        assert browser.attrs("#chunk-hits li a", "href")  # the word index answers without embeddings
        assert browser.attrs("#table-hits tbody a", "href")  # and so does table search


def test_document_text_cell_values_and_file_names_run_nothing(browser, base_url, browser_kb, tmp_path):
    doc_id = browser_kb.doc_id(XSS_FILE)
    cells = [t for (t,) in browser_kb.rows("SELECT text FROM table_cells WHERE doc_id = ?", [doc_id])]
    assert any("<script>" in c for c in cells) and any("onerror" in c for c in cells)  # payloads were read
    for view in (f"/doc/{doc_id}/page/1", f"/doc/{doc_id}", "/", "/review", "/search?q=%3Cscript%3E"):
        browser.goto(base_url + view)
        browser.js("document.querySelectorAll('svg#page g.block').forEach(g => "
                   "g.dispatchEvent(new Event('mouseenter')))")  # fmt: skip
        assert browser.js("window.__xss") is None, view
        assert browser.dialogs() == [], view
        assert browser.js("document.querySelectorAll('img, #injected, [onerror], [onload]').length") == 0, (
            view
        )
        scripts = browser.js("[...document.scripts].map(s => s.src ? s.src.split('/').pop() : s.type)")
        assert set(scripts) <= {"browser.js", "application/json"}, view
        if view != "/review":  # the document is listed: its file name is shown as text
            assert XSS_FILE in browser.js("document.body.textContent"), view
    browser.goto(f"{base_url}/doc/{doc_id}/page/1")
    assert all(p in browser.js("document.getElementById('markdown').textContent") for p in PAYLOADS[:2])
    assert set(cells) <= set(browser.js("[...document.querySelectorAll('table.grid td, table.grid th')]"
                                        ".map(c => c.textContent)"))  # fmt: skip
    browser.js("document.querySelector('ol.blocks li').dispatchEvent(new Event('click'))")
    assert (
        browser.js("document.getElementById('picked-text').textContent")
        == browser_kb.rows("SELECT text FROM blocks WHERE doc_id = ? ORDER BY block_no LIMIT 1", [doc_id])[0][
            0
        ]
    )
    browser.screenshot(tmp_path / "xss_page.png")


def test_requests_name_documents_and_pages_never_paths(base_url, browser_kb):
    doc_id = browser_kb.doc_id("report.pdf")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def status(path: str) -> int:
        try:
            with opener.open(base_url + path, timeout=60) as reply:
                return reply.status
        except urllib.error.HTTPError as e:
            return e.code

    page = f"/doc/{doc_id}/page"
    refused = [
        "/doc/..%2F..%2F..%2Fetc%2Fpasswd", "/doc/%2Fetc%2Fpasswd/page/1/image.png", "/static/..%2Fapp.py",
        "/static/app.py", f"{page}/99", f"{page}/99/image.png", f"{page}/0/image.png", "/doc/nothing",
    ]  # fmt: skip
    for path in refused:
        assert status(path) == 404, path
    assert status(f"/doc/{doc_id}/page/one") == 422
    assert status(f"/doc/{doc_id}/page/1/image.png") == 200
