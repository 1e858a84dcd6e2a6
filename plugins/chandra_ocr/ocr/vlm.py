"""What the two VLM engines (in-process vLLM, a vLLM server) share: one preset read with the same
prompt, render spec, temperature schedule and validity rules (``validity``)."""

from __future__ import annotations

from chandra_ocr.ocr.presets import Preset
from chandra_ocr.ocr.validity import temperature_schedule


class VlmEngine:
    """The common part of `OcrEngine` for a vision-language model served by vLLM."""

    name: str
    threads = True  # both run threads with sockets (vLLM's engine-core client, the HTTP client's loop)
    reads_images = True

    def __init__(
        self, preset: Preset, *, model: str | None, in_flight_pages: int | None, max_attempts: int | None
    ):
        self.preset = preset
        self.model: str | None = model or preset.model_id
        self.render_spec = preset.render
        self.in_flight_pages: int | None = in_flight_pages
        self.temperatures = temperature_schedule(preset.sampling, max_attempts)
