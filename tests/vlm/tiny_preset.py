"""The tiny model's test preset and the corpus pages the engine tests and the benchmark read."""

from __future__ import annotations

import functools
from pathlib import Path

import pymupdf
from tiny_model import PAGE_EDGE

from chandra_ocr.document import Block, PageRequest, ParsedPage, RenderSpec
from chandra_ocr.errors import ParseError
from chandra_ocr.ocr.presets import Preset, Sampling, user_image_message
from chandra_ocr.ocr.tuning import ModelDims
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


# For the paging sizer on CUDA (the CPU build sizes nothing): ≈ 0.2 M parameters; an image token per
# (16 px patch × scale factor 2)² pixels — tiling adds ~30 % more, max_model_len leaves room for it.
TINY_DIMS = ModelDims(
    name="tiny-idefics3",
    n_layers=2,
    n_kv_heads=1,
    head_dim=32,
    n_params=2.0e5,
    hidden_size=64,
    vocab_size=512,
    max_position=4096,
    pixels_per_image_token=32 * 32,
)


def _lenient_parse(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Any non-empty output is one text block covering the page (the tiny model writes noise)."""
    text = raw.strip()
    if not text:
        raise ParseError("empty output")
    return ParsedPage([Block(0, "text", (0.0, 0.0, width_pt, height_pt), text)], [])


def tiny_preset(
    model_dir: Path,
    *,
    max_tokens: int = 48,
    temperatures: tuple[float, ...] = (0.0, 0.5, 1.0),
    stop: tuple[str, ...] = ("e",),
) -> Preset:
    """A `Preset` for the tiny model: small renders, a short prompt, the lenient parser.

    The stop string ``e`` (a letter many of the trained merges contain) makes some attempts
    end with ``stop`` and others run to ``max_tokens`` or into a loop, so every path of the
    validity/retry logic is taken by real generations.
    """
    return Preset(
        name="tiny-idefics3",
        model_id=str(model_dir),
        output_format="text",
        render=RenderSpec(dpi=72, max_pixels=PAGE_EDGE * PAGE_EDGE, longest_edge=PAGE_EDGE),
        sampling=Sampling(max_tokens=max_tokens, temperatures=temperatures, stop=stop),
        build_messages=functools.partial(user_image_message, prompt="Read this page."),
        parse=_lenient_parse,
        engine_args={
            "max_model_len": 1024,
            "limit_mm_per_prompt": {"image": 1},
            "seed": 0,
            "distributed_executor_backend": "uni",  # the worker inside the engine process: ~30 s less start
        },
        licence="test model, random weights",
        dims=TINY_DIMS,
        expected_output_tokens=max_tokens,
    )


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
