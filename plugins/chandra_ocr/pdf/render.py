"""Rendering a page for OCR at exactly the size a RenderSpec allows, directly at that scale."""

from __future__ import annotations

import math

import pymupdf
from PIL import Image

from chandra_ocr.document import RenderSpec
from chandra_ocr.errors import BadDocumentError
from chandra_ocr.pdf.triage import open_pdf

_EPS = 1e-6  # float slack so that e.g. 612 pt at 200 dpi is 1700 px, not 1699


def target_size(width_pt: float, height_pt: float, spec: RenderSpec) -> tuple[int, int]:
    """The (width, height) in pixels to render a page of this displayed size under ``spec``.

    Applies, in order: ``dpi``; scale up to ``min_short_side``; scale down to ``longest_edge``
    and ``max_pixels`` (the caps win); round down to ``multiple_of`` (at least one multiple).
    The result never exceeds ``max_pixels`` or ``longest_edge``. Raises ``BadDocumentError``
    for a page without a finite positive size.
    """
    if not (math.isfinite(width_pt) and math.isfinite(height_pt) and width_pt > 0 and height_pt > 0):
        raise BadDocumentError(f"page size {width_pt} x {height_pt} pt cannot be rendered")
    w = width_pt * spec.dpi / 72.0
    h = height_pt * spec.dpi / 72.0
    if spec.min_short_side and min(w, h) < spec.min_short_side:
        scale = spec.min_short_side / min(w, h)
        w, h = w * scale, h * scale
    if spec.longest_edge and max(w, h) > spec.longest_edge:
        scale = spec.longest_edge / max(w, h)
        w, h = w * scale, h * scale
    if w * h > spec.max_pixels:
        scale = math.sqrt(spec.max_pixels / (w * h))
        w, h = w * scale, h * scale
    return _round(w, h, spec)


def _round(w: float, h: float, spec: RenderSpec) -> tuple[int, int]:
    """Round both sides down to ``multiple_of`` and re-check the caps after rounding."""
    m = max(1, spec.multiple_of)
    steps = spec.longest_edge // m if spec.longest_edge else None
    width = max(m, _steps(w, m, steps) * m)
    height = max(m, _steps(h, m, steps) * m)
    while width * height > spec.max_pixels and max(width, height) > m:
        # only reachable when a side was raised to one multiple: shrink the long side
        if width >= height:
            width = max(m, min(width - m, (spec.max_pixels // height) // m * m))
        else:
            height = max(m, min(height - m, (spec.max_pixels // width) // m * m))
    return width, height


def _steps(value: float, m: int, cap: int | None) -> int:
    """How many whole multiples of ``m`` fit in ``value`` (float slack allowed), at most ``cap``."""
    n = math.floor(value / m + _EPS)
    return n if cap is None else min(n, cap)


def render_page(pdf_path: str, page_no: int, spec: RenderSpec, *, password: str | None = None) -> Image.Image:
    """Render page ``page_no`` (1-based) of ``pdf_path`` as an RGB image of exactly ``target_size``.

    The size is checked before rendering and MuPDF renders straight at that scale (never large
    then shrunk). Raises ``BadDocumentError`` when the document cannot be opened or the page
    does not exist; MuPDF errors while drawing propagate.
    """
    with open_pdf(pdf_path, password=password) as doc:
        if not 1 <= page_no <= doc.page_count:
            raise BadDocumentError(f"page {page_no} does not exist (document has {doc.page_count} pages)")
        page = doc.load_page(page_no - 1)
        return render_loaded(page, spec)


def render_loaded(page: pymupdf.Page, spec: RenderSpec) -> Image.Image:
    """Render an already loaded page; see ``render_page``."""
    rect = page.rect
    width, height = target_size(rect.width, rect.height, spec)
    matrix = pymupdf.Matrix(width / rect.width, height / rect.height)
    pix = page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False)
    image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples_mv, "raw", "RGB", pix.stride)
    if image.size != (width, height):
        # MuPDF rounds the pixmap outward; at most a pixel to trim or pad
        image = _fit(image, width, height)
    return image


def _fit(image: Image.Image, width: int, height: int) -> Image.Image:
    """Crop or pad (white) ``image`` to exactly width x height without scaling."""
    canvas = Image.new("RGB", (width, height), "white")
    canvas.paste(image.crop((0, 0, min(width, image.width), min(height, image.height))))
    return canvas
