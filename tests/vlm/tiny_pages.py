"""The corpus pages the engine tests read through the tiny model (chandra_ocr.testing.tiny_model)."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from chandra_ocr.document import PageRequest, RenderSpec
from chandra_ocr.pdf.render import render_page

# (corpus path, pages): born-digital pages of several sizes, landscape and portrait scans and two
# small scans, so prompts differ in tile count — 18 pages.
PAGES = [
    ("docling/tests/data/pdf/sources/multi_page.pdf", 5),
    ("docling/tests/data/pdf/sources/normal_4pages.pdf", 4),
    ("docling/tests/data/pdf/sources/code_and_formula.pdf", 2),
    ("docling/tests/data/pdf/sources/picture_classification.pdf", 2),
    ("docling/tests/data/pdf/sources/table_mislabeled_as_picture.pdf", 1),
    ("derived/8071_093.3B.scan.pdf", 1),
    ("derived/8087_054.3B.scan.pdf", 1),
    ("derived/eurotext.scan.pdf", 1),
    ("derived/phototest.scan.pdf", 1),
]


def page_requests(pdfs: list[tuple[Path, int | None]]) -> list[PageRequest]:
    """Requests (no image yet) for the first ``n`` pages (None: all) of each PDF; doc_id = file stem."""
    requests = []
    for path, n in pdfs:
        with pymupdf.open(path) as doc:
            sizes = [(p.rect.width, p.rect.height) for p in doc]
        for page_no, (w, h) in enumerate(sizes[:n], start=1):
            requests.append(PageRequest(path.stem, page_no, str(path), w, h))
    return requests


def rendered(requests: list[PageRequest], spec: RenderSpec) -> list[PageRequest]:
    """The requests with their images rendered in this process."""
    return [with_image(r, render_page(r.pdf_path, r.page_no, spec)) for r in requests]


def with_image(r: PageRequest, image) -> PageRequest:
    return PageRequest(r.doc_id, r.page_no, r.pdf_path, r.width_pt, r.height_pt, image=image)
