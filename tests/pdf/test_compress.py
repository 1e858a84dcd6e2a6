"""Compression of real scans with the real Ghostscript and PyMuPDF: originals untouched, copies checked."""

from __future__ import annotations

import hashlib
import math
import shutil
from pathlib import Path

import pymupdf
import pytest

from chandra_ocr.errors import ConfigError
from chandra_ocr.pdf.compress import compress_pdf, ghostscript_args

pytestmark = pytest.mark.corpus
needs_gs = pytest.mark.skipif(shutil.which("gs") is None, reason="ghostscript (gs) is not installed")

OCR_SOURCES = "docling/tests/data/ocr/sources"
MIN_DPI = 200


def _state(path: Path) -> tuple[str, int, float]:
    stat = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_size, stat.st_mtime


def _min_image_dpi(path: Path) -> float:
    """The lowest effective resolution of any image, from pixels per displayed area (rotation-proof)."""
    lowest = math.inf
    for page in pymupdf.open(path):
        for info in page.get_image_info():
            x0, y0, x1, y1 = info["bbox"]
            area_in = (x1 - x0) * (y1 - y0) / 72**2
            lowest = min(lowest, math.sqrt(info["width"] * info["height"] / area_in))
    return lowest


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] if folder.exists() else []


@needs_gs
def test_ghostscript_shrinks_a_600_dpi_scan_without_going_below_min_dpi(corpus: Path, tmp_path: Path) -> None:
    src = corpus / OCR_SOURCES / "nemotron_multipage.pdf"
    before = _state(src)
    dst = tmp_path / "out" / "nemotron.pdf"
    result = compress_pdf(src, dst, min_dpi=MIN_DPI, timeout_s=120)
    assert _state(src) == before
    assert (result.method, result.kept, result.output) == ("ghostscript", True, str(dst))
    assert result.bytes_before == before[1] and result.bytes_after == dst.stat().st_size < before[1]
    assert pymupdf.open(dst).page_count == pymupdf.open(src).page_count
    assert _min_image_dpi(src) > 1.5 * MIN_DPI  # so the copy was downsampled...
    assert _min_image_dpi(dst) >= MIN_DPI * 0.98  # ...but not below what OCR needs
    assert _leftovers(dst.parent) == []


@needs_gs
def test_copy_that_is_not_smaller_is_dropped(corpus: Path, tmp_path: Path) -> None:
    src = corpus / "derived/phototest.scan.pdf"  # 6 KB of CCITT: nothing to gain
    before = _state(src)
    dst = tmp_path / "phototest.pdf"
    result = compress_pdf(src, dst, min_dpi=MIN_DPI, timeout_s=60)
    assert (result.kept, result.output, result.bytes_after) == (False, str(src), before[1])
    assert "not smaller" in result.note
    assert not dst.exists() and _leftovers(tmp_path) == []
    assert _state(src) == before


@needs_gs
def test_ghostscript_timeout_keeps_the_original(corpus: Path, tmp_path: Path) -> None:
    src = corpus / "ocrmypdf/tests/resources/enormous.pdf"  # takes Ghostscript seconds
    before = _state(src)
    result = compress_pdf(src, tmp_path / "enormous.pdf", min_dpi=MIN_DPI, timeout_s=0.05)
    assert (result.kept, result.output, result.method) == (False, str(src), "ghostscript")
    assert "timed out" in result.note
    assert _leftovers(tmp_path) == [] and not (tmp_path / "enormous.pdf").exists()
    assert _state(src) == before


def test_ghostscript_arguments_are_a_safe_list(tmp_path: Path) -> None:
    args = ghostscript_args("gs", Path("/in/a.pdf"), tmp_path / "50%_off.pdf", 300)
    assert isinstance(args, list) and all(isinstance(a, str) for a in args)
    for flag in ("-dSAFER", "-dBATCH", "-dNOPAUSE", "-sDEVICE=pdfwrite", "-dAutoRotatePages=/None"):
        assert flag in args
    assert "-dNOSAFER" not in args and not any(a.startswith("-dPDFSETTINGS") for a in args)
    for kind in ("Color", "Gray"):
        assert f"-d{kind}ImageResolution=300" in args
    assert "-dDownsampleMonoImages=false" in args
    assert f"-sOutputFile={tmp_path}/50%%_off.pdf" in args and args[-1] == "/in/a.pdf"


def test_pymupdf_path_keeps_pages_and_resolution(corpus: Path, tmp_path: Path) -> None:
    src = corpus / "docling/tests/data/pdf/sources/redp5110_sampled.pdf"  # a Redbook with images
    before = _state(src)
    dst = tmp_path / "redp.pdf"
    result = compress_pdf(src, dst, min_dpi=MIN_DPI, timeout_s=60, method="pymupdf")
    assert (result.method, result.kept, result.output) == ("pymupdf", True, str(dst))
    assert result.bytes_after == dst.stat().st_size < result.bytes_before
    assert pymupdf.open(dst).page_count == pymupdf.open(src).page_count
    assert _min_image_dpi(dst) >= min(_min_image_dpi(src), MIN_DPI) * 0.98
    assert _state(src) == before


@pytest.mark.parametrize("method", ["auto", "pymupdf"])
def test_encrypted_input_is_left_alone(corpus: Path, tmp_path: Path, method: str) -> None:
    src = corpus / "pdfplumber/tests/pdfs/password-example.pdf"
    result = compress_pdf(src, tmp_path / "x.pdf", min_dpi=MIN_DPI, timeout_s=60, method=method)
    assert (result.kept, result.method, result.output) == (False, "none", str(src))
    assert "encrypted" in result.note and not (tmp_path / "x.pdf").exists()


def test_destination_must_differ_from_source(corpus: Path) -> None:
    src = corpus / "derived/phototest.scan.pdf"
    with pytest.raises(ConfigError):
        compress_pdf(src, src, min_dpi=MIN_DPI, timeout_s=10)


def _page_with_image(doc: pymupdf.Document, text: str) -> None:
    page = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 1600, 1000), False)
    pix.clear_with(200)
    page.insert_image(pymupdf.Rect(50, 300, 550, 612), pixmap=pix)
    page.insert_textbox(pymupdf.Rect(50, 50, 550, 290), text, fontsize=10)


def test_only_images_on_pages_triage_sends_to_ocr_call_for_compression(tmp_path: Path) -> None:
    from chandra_ocr.config import PdfOptions
    from chandra_ocr.pdf.compress import has_raster_images

    text = "A born-digital page with a figure under its text layer, read from that layer. " * 12
    doc = pymupdf.open()
    _page_with_image(doc, text)
    doc.save(tmp_path / "born.pdf")
    _page_with_image(doc, "")  # a second page: the same figure and no text, a page to render
    doc.save(tmp_path / "mixed.pdf")
    routes, pixels = PdfOptions(), 1_000_000
    assert has_raster_images(tmp_path / "born.pdf", pixels)  # the image alone would call for a rewrite...
    assert not has_raster_images(tmp_path / "born.pdf", pixels, routes)  # ...but no page of it is rendered
    assert has_raster_images(tmp_path / "mixed.pdf", pixels, routes)
    result = compress_pdf(tmp_path / "born.pdf", tmp_path / "out.pdf", min_dpi=MIN_DPI, timeout_s=60,
                          min_image_pixels=pixels, routes=routes)  # fmt: skip
    assert (result.method, result.kept) == ("none", False)
    assert result.note == "no large raster image on a page to render"
