"""When a VLM page counts as read, and the attempt schedule that retries it with rising temperature.

Shared by the in-process vLLM engine and the server client, so both judge pages the same way:
a page is valid only if generation finished with ``stop`` and the preset's parser accepts the
text. ``length`` (ran out of tokens), ``repetition`` (vLLM's repetition detector cut a loop),
``abort``/``error`` and parse failures are retried with the next temperature of the preset's
schedule until the attempts run out; then the page fails with the last reason.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chandra_ocr.document import PageRequest, PageResult, ParsedPage
from chandra_ocr.errors import ParseError
from chandra_ocr.ocr.presets import Preset, Sampling

log = logging.getLogger(__name__)

# vLLM's RepetitionDetectionParams: stop when the last 1..48 tokens repeat 20 times in a row.
# Long enough that tables of empty cells and dotted leaders in tables of contents pass.
DEFAULT_REPETITION_DETECTION: Mapping[str, int] = {
    "min_pattern_size": 1,
    "max_pattern_size": 48,
    "min_count": 20,
}


def temperature_schedule(sampling: Sampling, max_attempts: int | None = None) -> tuple[float, ...]:
    """Temperature per attempt: the preset's, cut to ``max_attempts`` or extended with the last one."""
    temps = tuple(sampling.temperatures) or (0.0,)
    n = len(temps) if max_attempts is None else max_attempts
    if n < 1:
        raise ValueError("max_attempts must be ≥ 1")
    return temps[:n] + (temps[-1],) * max(0, n - len(temps))


def judge(
    text: str, finish_reason: str | None, preset: Preset, width_pt: float, height_pt: float
) -> tuple[ParsedPage | None, str | None]:
    """Decide whether one generation is a valid page.

    Returns ``(parsed, None)`` when ``finish_reason == "stop"`` and ``preset.parse`` succeeds,
    else ``(None, reason)`` with reason ``length``, ``repetition``, ``abort``, ``error`` or
    ``parse: <message>``. Never raises for bad model output.
    """
    if finish_reason != "stop":
        return None, finish_reason or "abort"
    try:
        return preset.parse(text, width_pt, height_pt), None
    except ParseError as e:
        return None, f"parse: {e}"
    except Exception as e:  # a parser bug must fail the page, not the whole batch
        log.warning("parser of preset %s raised %s", preset.name, type(e).__name__, exc_info=True)
        return None, f"parse: {type(e).__name__}: {e}"


@dataclass
class PageAttempts:
    """One page's way through the attempt schedule, with its accounting summed over attempts.

    ``latency_ms`` of the result runs from the first submission to the final answer.
    """

    request: PageRequest
    temperatures: tuple[float, ...]
    attempt: int = 0  # attempts finished so far
    prompt_tokens: int = 0
    output_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    history: list[tuple[float, str | None, str | None]] = field(default_factory=list)

    @property
    def temperature(self) -> float:
        """Temperature of the attempt to submit next."""
        return self.temperatures[self.attempt]

    def record(
        self, text: str, finish_reason: str | None, prompt_tokens: int, output_tokens: int, preset: Preset
    ) -> tuple[ParsedPage | None, str | None]:
        """Account one finished attempt and judge it; returns what `judge` returns."""
        req = self.request
        parsed, reason = judge(text, finish_reason, preset, req.width_pt, req.height_pt)
        temp = self.temperature
        self.attempt += 1
        self.prompt_tokens += prompt_tokens
        self.output_tokens += output_tokens
        self.history.append((temp, finish_reason, reason))
        facts = {"doc_id": req.doc_id, "page_no": req.page_no, "attempt": self.attempt, "temperature": temp}
        facts |= {"finish_reason": finish_reason, "reason": reason}
        log.debug(
            "page %s/%d attempt %d/%d at temperature %.2f: finish=%s %s",
            *(req.doc_id, req.page_no, self.attempt, len(self.temperatures), temp),
            *(finish_reason, reason or "valid"),
            extra=facts,
        )
        return parsed, reason

    @property
    def exhausted(self) -> bool:
        """True when no attempt is left."""
        return self.attempt >= len(self.temperatures)

    def seed(self, base: int | None) -> int | None:
        """A per-attempt sampling seed derived from ``base`` (None: unseeded), stable across runs."""
        if base is None:
            return None
        key = f"{self.request.doc_id}:{self.request.page_no}:{self.attempt}".encode()
        return (base + zlib.crc32(key)) % (2**31)

    def result(self, engine: str, model: str | None, text: str, parsed: ParsedPage | None) -> PageResult:
        """The page's final result: ``ok`` with the parsed content, else ``failed`` with the last reason."""
        req = self.request
        _, finish, reason = self.history[-1] if self.history else (None, None, "not run")
        return PageResult.of(
            req, engine, model, error=None if parsed is not None else reason, text=text,
            blocks=parsed.blocks if parsed else (), tables=parsed.tables if parsed else (),
            finish_reason=finish, prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
            latency_ms=(time.monotonic() - self.started) * 1000.0, attempts=self.attempt,
        )  # fmt: skip


def failed_result(request: PageRequest, engine: str, model: str | None, reason: str) -> PageResult:
    """A page the engine could not even submit (e.g. no rendered image)."""
    return PageResult.of(request, engine, model, error=reason, attempts=0)


def sampling_fields(sampling: Sampling, temperature: float, seed: int | None) -> dict[str, Any]:
    """The sampling values both engines send for one attempt (vLLM SamplingParams / OpenAI request names)."""
    values: dict[str, Any] = {
        "max_tokens": sampling.max_tokens,
        "temperature": temperature,
        "top_p": sampling.top_p if temperature > 0 else 1.0,
        "stop": list(sampling.stop) or None,
        "repetition_penalty": sampling.repetition_penalty,
    }
    if seed is not None and temperature > 0:
        values["seed"] = seed
    return values
