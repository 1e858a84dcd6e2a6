"""Render sizes (property-based) and real renders of corpus pages, huge and rotated ones included."""

from __future__ import annotations

import math
from pathlib import Path

import pymupdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chandra_ocr.document import RenderSpec
from chandra_ocr.errors import BadDocumentError
from chandra_ocr.pdf.render import render_page, target_size


@st.composite
def specs(draw) -> RenderSpec:
    m = draw(st.sampled_from([1, 2, 14, 16, 28, 32]))
    longest = draw(st.none() | st.integers(min_value=m * 8, max_value=10_000))
    return RenderSpec(
        dpi=draw(st.integers(min_value=50, max_value=600)),
        max_pixels=draw(st.integers(min_value=max(100_000, 64 * m * m), max_value=40_000_000)),
        min_short_side=draw(st.integers(min_value=0, max_value=3000)),
        longest_edge=longest,
        multiple_of=m,
    )


sides = st.floats(min_value=1.0, max_value=60_000.0, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(width=sides, height=sides, spec=specs())
def test_target_size_respects_every_cap(width: float, height: float, spec: RenderSpec) -> None:
    w, h = target_size(width, height, spec)
    assert w * h <= spec.max_pixels
    assert w % spec.multiple_of == 0 and h % spec.multiple_of == 0
    assert w >= spec.multiple_of and h >= spec.multiple_of
    if spec.longest_edge:
        assert max(w, h) <= spec.longest_edge
    # the aspect ratio survives wherever both sides are many multiples long
    if min(w, h) >= 40 * spec.multiple_of:
        assert math.isclose(w / h, width / height, rel_tol=0.1)


@settings(max_examples=200, deadline=None)
@given(width=st.floats(min_value=36.0, max_value=2000.0), height=st.floats(min_value=36.0, max_value=2000.0))
def test_target_size_is_the_dpi_size_when_no_cap_binds(width: float, height: float) -> None:
    spec = RenderSpec(dpi=150, max_pixels=10**9)
    w, h = target_size(width, height, spec)
    assert (w, h) == (math.floor(width * 150 / 72 + 1e-6), math.floor(height * 150 / 72 + 1e-6))


def test_min_short_side_scales_small_pages_up() -> None:
    w, h = target_size(200, 100, RenderSpec(dpi=72, min_short_side=700, multiple_of=28))
    assert h == 700 and w == 1400


def test_huge_page_is_scaled_down_to_the_pixel_cap() -> None:
    spec = RenderSpec(dpi=200, max_pixels=6_291_456, multiple_of=28)
    w, h = target_size(18000, 36000, spec)  # a real page size seen in the corpus
    assert w * h <= spec.max_pixels and h > w
    assert w * h >= 0.95 * spec.max_pixels  # scaled down, not thrown away


@pytest.mark.parametrize("size", [(0, 792), (612, -1), (math.nan, 792), (math.inf, 10)])
def test_pages_without_area_are_refused(size: tuple[float, float]) -> None:
    with pytest.raises(BadDocumentError):
        target_size(*size, RenderSpec())


@pytest.mark.corpus
def test_real_render_has_the_target_size_and_ink(corpus: Path) -> None:
    path = corpus / "docling/tests/data/pdf/sources/2305.03393v1-pg9.pdf"
    spec = RenderSpec(dpi=100, multiple_of=28)
    image = render_page(str(path), 1, spec)
    rect = pymupdf.open(path)[0].rect
    assert image.mode == "RGB" and image.size == target_size(rect.width, rect.height, spec)
    darkest, lightest = image.convert("L").getextrema()
    assert darkest < 60 and lightest > 240  # black text on white paper


@pytest.mark.corpus
def test_rotated_page_renders_as_displayed(corpus: Path) -> None:
    path = corpus / "docling/tests/data/ocr/sources/ocr_test_rotated_90.pdf"
    image = render_page(str(path), 1, RenderSpec(dpi=72))
    page = pymupdf.open(path)[0]
    assert page.rotation and image.size == (int(page.rect.width), int(page.rect.height))
    assert image.width > image.height


@pytest.mark.corpus
def test_huge_page_renders_within_the_cap(corpus: Path) -> None:
    path = corpus / "ocrmypdf/tests/resources/hugemono.pdf"
    page = pymupdf.open(path)[0]
    spec = RenderSpec(dpi=300, max_pixels=2_000_000)
    assert page.rect.width * 300 / 72 > 30_000  # at its dpi this page would be ~1 gigapixel
    image = render_page(str(path), 1, spec)
    assert image.size == target_size(page.rect.width, page.rect.height, spec)
    assert image.width * image.height <= spec.max_pixels


@pytest.mark.corpus
def test_missing_page_and_locked_document(corpus: Path) -> None:
    with pytest.raises(BadDocumentError, match="does not exist"):
        render_page(str(corpus / "derived/eurotext.scan.pdf"), 2, RenderSpec())
    locked = str(corpus / "pdfplumber/tests/pdfs/password-example.pdf")
    with pytest.raises(BadDocumentError, match="password"):
        render_page(locked, 1, RenderSpec())
    assert render_page(locked, 1, RenderSpec(dpi=50), password="test").mode == "RGB"
