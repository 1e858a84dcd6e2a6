"""The Tesseract engine on real scans from the corpus, with the real `tesseract` program."""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from pathlib import Path

import pymupdf
import pytest
from metrics import order_similarity, word_f1
from pace import scaled
from PIL import Image

from chandra_ocr.config import from_mapping
from chandra_ocr.document import PageRequest, PageResult
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.cpu_engine import CpuEngine, CpuOptions
from chandra_ocr.ocr.tesseract_tsv import mean_confidence, parse_tsv, words_to_blocks
from chandra_ocr.pdf.render import render_page

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
DOCLING_OCR = "docling/tests/data/ocr"


@pytest.fixture(scope="module")
def engine():
    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)")
    engine = CpuEngine(CpuOptions(workers=2))
    engine.start()
    yield engine
    engine.close()


def scans_with_truth(corpus: Path) -> list[tuple[Path, Path]]:
    """Every derived/*.scan.pdf with its ground-truth text, as MANIFEST.tsv names it."""
    with open(corpus / "MANIFEST.tsv", newline="") as f:
        rows = {r["local_path"]: r["ground_truth"] for r in csv.DictReader(f, delimiter="\t")}
    pairs = [(corpus / path, corpus / rows[path]) for path in sorted(rows) if path.endswith(".scan.pdf")]
    assert sorted(p for p, _ in pairs) == sorted((corpus / "derived").glob("*.scan.pdf"))
    return pairs


def request_for(pdf: Path, image: Image.Image | None = None, page_no: int = 1) -> PageRequest:
    with pymupdf.open(pdf) as doc:
        rect = doc[page_no - 1].rect
    return PageRequest(pdf.name, page_no, str(pdf), rect.width, rect.height, image)


def assert_blocks_inside(result: PageResult, request: PageRequest) -> None:
    assert result.blocks, f"{result.doc_id}: no blocks"
    for block in result.blocks:
        x0, y0, x1, y1 = block.bbox
        assert 0 <= x0 < x1 <= request.width_pt and 0 <= y0 < y1 <= request.height_pt, block
        assert block.label == "text" and block.text.strip()
    assert [b.block_no for b in result.blocks] == list(range(len(result.blocks)))


def tesseract_children() -> list[int]:
    """Live `tesseract` processes whose parent is this test process (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if not stat or stat[stat.index("(") + 1 : stat.rindex(")")] != "tesseract":
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid():  # fields after comm: state ppid
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.corpus
def test_scanned_pages_match_their_ground_truth(engine, corpus):
    pairs = scans_with_truth(corpus)
    truth = {pdf.name: gt.read_text() for pdf, gt in pairs}
    requests = {pdf.name: request_for(pdf, render_page(str(pdf), 1, engine.render_spec)) for pdf, _ in pairs}
    started = time.perf_counter()
    results = list(engine.run(requests.values()))
    wall = time.perf_counter() - started
    assert sorted(r.doc_id for r in results) == sorted(requests)
    for r in sorted(results, key=lambda r: r.doc_id):
        f1, order = word_f1(r.text, truth[r.doc_id]), order_similarity(r.text, truth[r.doc_id])
        print(f"{r.doc_id}: word F1 {f1:.3f}, order similarity {order:.3f}, {r.latency_ms / 1000:.2f} s")
        assert r.status == "ok" and r.finish_reason == "stop" and r.engine == "cpu"
        assert r.model and r.model.startswith("tesseract-") and r.model[10].isdigit()
        assert f1 >= 0.8, f"{r.doc_id}: word F1 {f1:.3f}"
        assert order >= 0.8, f"{r.doc_id}: reading order {order:.3f}"
        assert_blocks_inside(r, requests[r.doc_id])
    print(f"{len(results)} pages in {wall:.1f} s with {engine.options.workers} workers")


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize(
    "name", ["ocr_test", "ocr_test_rotated_90", "ocr_test_rotated_180", "ocr_test_rotated_270"]
)
def test_rotated_pages_read_upright_with_boxes_where_the_text_is(engine, corpus, name):
    """Text turned within the page: Tesseract's OSD (90/270) or our 180° retry; the engine renders."""
    pdf = corpus / DOCLING_OCR / "sources" / f"{name}.pdf"
    gt = corpus / DOCLING_OCR / "groundtruth/tesseract/full_page" / f"{name}.tesseract.full_page"
    request = request_for(pdf)  # no image: the engine renders the page at its render_spec
    (result,) = engine.run([request])
    f1 = word_f1(result.text, Path(f"{gt}.md").read_text())
    print(f"{name}: word F1 {f1:.3f}, {result.latency_ms / 1000:.2f} s")
    assert result.status == "ok" and f1 >= 0.9
    assert_blocks_inside(result, request)
    # docling's ground truth boxes are bottom-left based; flip them into our top-left space
    item = json.loads(Path(f"{gt}.json").read_text())["texts"][0]
    boxes = [(p["bbox"]["l"], p["bbox"]["t"], p["bbox"]["r"], p["bbox"]["b"]) for p in item["prov"]]
    h = request.height_pt
    expected = (
        min(b[0] for b in boxes),
        h - max(b[1] for b in boxes),
        max(b[2] for b in boxes),
        h - min(b[3] for b in boxes),
    )
    got = [b.bbox for b in result.blocks]
    union = (min(b[0] for b in got), min(b[1] for b in got), max(b[2] for b in got), max(b[3] for b in got))
    assert iou(union, expected) >= 0.8, (union, expected)


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    areas = [(r[2] - r[0]) * (r[3] - r[1]) for r in (a, b)]
    return w * h / (sum(areas) - w * h)


@pytest.mark.corpus
def test_odd_page_size_and_image_modes(engine, corpus):
    """A strip-shaped page with unequal x/y scales, and 1-bit / palette images of the same scan."""
    pdf = corpus / "derived/phototest.scan.pdf"
    gold = (corpus / "tesseract-test/testing/phototest.gold.txt").read_text()
    scan = render_page(str(pdf), 1, engine.render_spec).convert("L")
    canvas = Image.new("L", (4000, 900), 255)
    canvas.paste(scan, (2500, 100))
    sx, sy = 0.24, 0.48  # points per pixel: 960 × 432 pt page
    strip = PageRequest("strip", 1, str(pdf), 4000 * sx, 900 * sy, canvas)
    base = request_for(pdf)
    variants = [
        strip,
        PageRequest("1-bit", 1, str(pdf), base.width_pt, base.height_pt, scan.convert("1")),
        PageRequest("palette", 1, str(pdf), base.width_pt, base.height_pt, scan.convert("RGB").convert("P")),
    ]
    results = {r.doc_id: r for r in engine.run(variants)}
    for request in variants:
        r = results[request.doc_id]
        print(f"{r.doc_id} ({request.image.mode}): word F1 {word_f1(r.text, gold):.3f}")
        assert r.status == "ok" and word_f1(r.text, gold) >= 0.9
        assert_blocks_inside(r, request)
    # where the scan was pasted, in points: x 600…830.4, y 48…393.6 (scales differ per axis)
    for block in results["strip"].blocks:
        x0, y0, x1, y1 = block.bbox
        assert x0 >= 599 and x1 <= 831.4 and y0 >= 47 and y1 <= 394.6, block.bbox


@pytest.mark.slow
@pytest.mark.corpus
def test_results_stream_in_completion_order_pulling_requests_lazily(engine, corpus):
    big, small = corpus / "derived/8087_054.3B.scan.pdf", corpus / "derived/phototest.scan.pdf"
    big_image, small_image = (render_page(str(p), 1, engine.render_spec) for p in (big, small))
    pulled = []

    def stream():
        for i, (pdf, image) in enumerate([(big, big_image)] + [(small, small_image)] * 3):
            pulled.append(i)
            base = request_for(pdf, image)
            yield PageRequest(f"{i}", 1, str(pdf), base.width_pt, base.height_pt, image)

    results = engine.run(stream())
    first = next(results)
    assert first.doc_id != "0", "the large page finished first: results are not in completion order"
    assert len(pulled) <= engine.options.workers, f"pulled {len(pulled)} requests before the first result"
    rest = list(results)
    assert sorted(r.doc_id for r in [first, *rest]) == ["0", "1", "2", "3"]
    assert all(r.status == "ok" for r in [first, *rest])


@pytest.mark.corpus
def test_closing_the_stream_early_kills_running_pages(engine, corpus):
    big, small = corpus / "derived/8071_093.3B.scan.pdf", corpus / "derived/phototest.scan.pdf"
    requests = [request_for(p, render_page(str(p), 1, engine.render_spec)) for p in (small, big, big)]
    results = engine.run(requests)
    assert next(results).doc_id == small.name
    bound = scaled(1.5)  # the large page would take several times that to read
    started = time.perf_counter()
    results.close()  # the consumer stops while the large page is being read
    assert time.perf_counter() - started < bound
    assert tesseract_children() == []


@pytest.mark.corpus
def test_page_over_its_time_limit_fails_without_hanging(corpus):
    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is not installed")
    pdf = corpus / "derived/8087_054.3B.scan.pdf"
    engine = CpuEngine(CpuOptions(timeout_s=0.2, workers=1))
    request = request_for(pdf, render_page(str(pdf), 1, engine.render_spec))
    bound = scaled(3.0)  # the page takes far longer to read than that: it was stopped at its limit
    started = time.perf_counter()
    (result,) = engine.run([request])
    assert time.perf_counter() - started < bound
    assert result.status == "failed" and "timed out" in (result.error or "") and not result.blocks
    assert engine.metrics()["timeouts"] == 1
    assert tesseract_children() == []
    engine.close()


def test_missing_program_is_a_config_error_with_an_install_hint(monkeypatch, tmp_path):
    """A PATH without tesseract: the real lookup fails as on a machine without it (no engine mocked)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="apt-get install tesseract-ocr"):
        CpuEngine().start()
    with pytest.raises(ConfigError, match="not found"):
        CpuEngine(CpuOptions(tesseract_cmd=str(tmp_path / "tesseract"))).start()


@needs_tesseract
def test_missing_language_is_a_config_error_naming_the_package():
    with pytest.raises(ConfigError, match="tesseract-ocr-zzz"):
        CpuEngine(CpuOptions(lang="eng+zzz")).start()


def test_options_are_validated():
    assert from_mapping(CpuOptions, {"lang": "eng", "workers": 1}).workers == 1
    for bad in (
        {"lang": "eng", "wrokers": 1},
        {"psm": 0},
        {"workers": 0},
        {"timeout_s": 0},
        {"lang": "eng+"},
    ):
        with pytest.raises(ConfigError):
            from_mapping(CpuOptions, bad)
    engine = CpuEngine(CpuOptions(dpi=150))
    assert isinstance(engine, OcrEngine) and engine.name == "cpu" and engine.render_spec.dpi == 150


# Tesseract's TSV columns: level page block par line word left top width height conf text
TSV = """level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext
1\t1\t0\t0\t0\t0\t0\t0\t1000\t500\t-1\t
5\t1\t1\t1\t1\t1\t100\t50\t40\t20\t96.5\tHello
5\t1\t1\t1\t1\t2\t150\t50\t60\t20\t91.0\tworld,
5\t1\t1\t1\t1\t3\t215\t45\t5\t40\t12.0\t|
5\t1\t1\t1\t2\t1\t100\t80\t50\t20\t88.0\tsecond
5\t1\t2\t1\t1\t1\t900\t400\t150\t120\t20.0\tlow
5\t1\t2\t1\t1\t2\t600\t400\t10\t10\t95.0\t—
5\t1\t2\t1\t1\t3\t620\t400\t10\t10\t95.0\t \n"""


def test_tsv_words_become_paragraph_blocks_in_points():
    words = parse_tsv(TSV)
    assert [w.text for w in words] == ["Hello", "world,", "|", "second", "low", "—"]
    assert mean_confidence(words) == pytest.approx((96.5 + 91.0 + 88.0 + 20.0) / 4)
    blocks = words_to_blocks(words, scale=(0.5, 0.25), page_size=(500.0, 120.0), min_confidence=30.0)
    assert [b.text for b in blocks] == ["Hello world,\nsecond", "low —"]  # "|" is low-confidence noise
    assert blocks[0].bbox == (50.0, 12.5, 105.0, 25.0)  # px (100, 50)–(210, 100) × (0.5, 0.25)
    assert blocks[1].bbox == (300.0, 100.0, 500.0, 120.0)  # clipped to the page
