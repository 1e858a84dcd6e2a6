"""The fallback chain's engines and their options come from IngestOptions, checked before any work."""

from __future__ import annotations

import pytest

from chandra_ocr.config import IngestOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.preflight import check_fallbacks


def test_fallback_options_are_checked_before_any_work():
    check_fallbacks(IngestOptions())  # the default chain: text, then cpu
    check_fallbacks(IngestOptions(fallback_options={"cpu": {"lang": "eng", "psm": 6}}))
    with pytest.raises(ConfigError, match=r"fallback_options.'cpu'.: unknown CpuOptions option.s.: bogus"):
        check_fallbacks(IngestOptions(fallback_options={"cpu": {"bogus": 1}}))
    with pytest.raises(ConfigError, match=r"fallback_options\['cpu'\]: tesseract language data missing: xx"):
        check_fallbacks(IngestOptions(fallback_options={"cpu": {"lang": "xx"}}))


def test_only_the_text_and_cpu_engines_can_be_fallbacks():
    with pytest.raises(ConfigError, match="fallbacks can be the text and cpu engines"):
        IngestOptions(fallbacks=("text", "vllm"))
    assert IngestOptions(fallbacks=["cpu"]).fallbacks == ("cpu",)  # a JSON list becomes a tuple
    round_trip = IngestOptions.from_dict(IngestOptions(fallback_options={"cpu": {"lang": "deu"}}).to_dict())
    assert round_trip.fallback_options == {"cpu": {"lang": "deu"}} and round_trip.fallbacks == ("text", "cpu")
