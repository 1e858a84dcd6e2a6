"""What the engine tests share: an instrumented input stream, the attempt log, request copies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tiny_pages import with_image

from chandra_ocr.document import PageRequest

FINISH_REASONS = {"stop", "length", "repetition"}


class CountingFeed:
    """An input stream that records how many pages were pulled when each result came out."""

    def __init__(self, pages: list[PageRequest]) -> None:
        self.pages, self.pulled = pages, 0

    def __iter__(self):
        for page in self.pages:
            self.pulled += 1
            yield page


def attempt_log(caplog: pytest.LogCaptureFixture) -> dict[tuple[str, int], list[float]]:
    """Temperatures of every attempt, per page, from validity's debug records."""
    temps: dict[tuple[str, int], list[float]] = {}
    for rec in caplog.records:
        if rec.name == "chandra_ocr.ocr.validity" and hasattr(rec, "temperature"):
            temps.setdefault((rec.doc_id, rec.page_no), []).append(rec.temperature)
    return temps


def fresh(pages: list[PageRequest]) -> list[PageRequest]:
    """Copies of the requests (an engine may keep references to the ones it was given)."""
    return [with_image(p, p.image) for p in pages]


@contextmanager
def preset_swapped(engine: Any, preset: Any) -> Iterator[None]:
    """Read with ``preset``'s prompt, sampling and parser on the session's started engine (same model),
    then go back to its own preset: a second engine would load the model again."""
    from chandra_ocr.ocr.validity import temperature_schedule

    original = engine.preset

    def use(p: Any) -> None:
        engine.preset, engine.render_spec = p, p.render
        engine.temperatures = temperature_schedule(p.sampling, engine.options.max_attempts)

    use(preset)
    try:
        yield
    finally:
        use(original)
