"""Build an OCR engine from its kind, preset and options (imports happen only for the kind used)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chandra_ocr.config import from_mapping
from chandra_ocr.errors import ConfigError, EngineError
from chandra_ocr.ocr.base import OcrEngine
from chandra_ocr.ocr.kinds import ENGINE_KINDS


def resolve_kind(kind: str) -> str:
    """``auto`` → ``vllm`` when vLLM and a CUDA device are present, else ``cpu``."""
    if kind != "auto":
        return kind
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    return "vllm" if torch.cuda.is_available() else "cpu"


def fallback_kinds(fallbacks: Iterable[str], primary: OcrEngine) -> list[str]:
    """The kinds of the fallback chain ``fallbacks`` to try after ``primary``: all but its own."""
    return [kind for kind in fallbacks if kind != primary.name]


def build_engine(
    kind: str,
    preset: str,
    options: Mapping[str, Any] | None = None,
    passwords: Mapping[str, str] | None = None,
    connection: Callable[[], Mapping[str, Any]] | None = None,
    warm_idle_timeout_s: float | None = None,
) -> OcrEngine:
    """The engine for the OCR route: ``text`` | ``cpu`` | ``vllm`` | ``openai`` | ``auto``.

    ``passwords`` (doc_id → password) is for the text engine, which opens the PDFs itself.
    ``connection`` gives the server settings (base_url, api_key, model, …) of the ``openai`` kind,
    e.g. from an Airflow connection; ``options`` win over them. It is called only for that kind.
    With ``warm_idle_timeout_s`` the ``vllm`` kind reads through the GPU's warm server, kept for that
    many idle seconds (`WarmVllmEngine`: Airflow's tasks), instead of loading the model in-process."""
    options = dict(options or {})
    kind = resolve_kind(kind)
    if kind == "text":
        from chandra_ocr.ocr.text_engine import TextEngine

        if options:
            raise ConfigError(f"the text engine takes no options, got {sorted(options)}")
        return TextEngine(passwords)
    if kind == "cpu":
        from chandra_ocr.ocr.cpu_engine import CpuEngine, CpuOptions

        return CpuEngine(from_mapping(CpuOptions, options))
    if kind == "vllm":
        from chandra_ocr.ocr.presets import get_preset
        from chandra_ocr.ocr.vllm_args import VllmOptions
        from chandra_ocr.ocr.vllm_engine import VllmEngine

        if warm_idle_timeout_s is not None:
            from chandra_ocr.ocr.warm_engine import WarmVllmEngine

            return WarmVllmEngine(
                get_preset(preset), from_mapping(VllmOptions, options), idle_timeout_s=warm_idle_timeout_s
            )
        return VllmEngine(get_preset(preset), from_mapping(VllmOptions, options))
    if kind == "openai":
        from chandra_ocr.ocr.openai_engine import OpenAIEngine, ServerOptions
        from chandra_ocr.ocr.presets import get_preset

        server = dict(connection()) if connection is not None else {}
        return OpenAIEngine(get_preset(preset), from_mapping(ServerOptions, server | options))
    raise ConfigError(f"engine must be one of {ENGINE_KINDS}, got {kind!r}")


def ready_engine(kind: str, preset: str, options: Mapping[str, Any]) -> OcrEngine:
    """The engine built from the options, checked as far as it can be without loading a model.

    The cpu engine is started (Tesseract and its languages found), and so is the openai engine (its
    server answers and serves the model); the vllm kind needs vLLM installed (its model loads when
    the run starts).
    """
    resolved = resolve_kind(kind)
    if resolved == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "engine vllm needs vLLM (pip install vllm on a CUDA machine); "
            "without a GPU set engine to cpu, or to openai with a vLLM server"
        )
    engine = build_engine(resolved, preset, options)
    if resolved == "openai":
        try:
            engine.start()
        except EngineError as e:
            engine.close()
            raise ConfigError(
                f"engine openai: {e}; start the server (`vllm serve MODEL`) or set "
                'engine_options base_url to it ("http://HOST:PORT/v1")'
            ) from None
    elif resolved in ("text", "cpu"):
        engine.start()
    return engine
