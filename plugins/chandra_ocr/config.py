"""Validated options objects: one per stage group, unknown keys rejected, no environment reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.kinds import check_engine, check_fallbacks

T = TypeVar("T")


def from_mapping(cls: type[T], values: Mapping[str, Any]) -> T:
    """Build the options dataclass ``cls`` from a mapping; unknown keys raise ConfigError."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} option(s): {', '.join(unknown)}; known: {sorted(names)}")
    return cls(**values)


@dataclass(frozen=True)
class PdfOptions:
    """Discovery, compression, triage and rendering."""

    settle_seconds: float = 30.0  # skip files modified more recently (still being written)
    compress: bool = True
    compress_timeout_s: float = 120.0
    compress_min_image_pixels: int = 1_000_000  # only documents with an image this large are compressed
    ocr_dpi: int = 200  # render resolution for OCR pages (before the pixel cap)
    native_tables: bool = True  # find ruled tables on text pages (~30–300 ms per page with rules)
    min_text_chars: int = 40  # fewer extractable characters than this → OCR route
    max_bad_glyph_ratio: float = 0.3  # more replacement/unmapped glyphs than this → OCR route
    image_cover_ratio: float = 0.8  # one image covering this share of the page → OCR route
    doc_timeout_s: float = 300.0  # limit for opening + triage of a document (or of one part), in a worker
    page_timeout_s: float = 60.0  # per-page limit for rendering / text extraction
    memory_limit_mb: int = 3072  # address-space cap for PDF worker processes
    workers: int = 2  # PDF worker processes (triage, rendering)
    passwords_file: str | None = None  # JSON {doc_id | path ending | file name: password} (pdf/passwords.py)

    def __post_init__(self) -> None:
        if self.ocr_dpi < 72:
            raise ConfigError("ocr_dpi must be ≥ 72")
        if self.workers < 1:
            raise ConfigError("workers must be ≥ 1")


@dataclass(frozen=True)
class ChunkOptions:
    """Chunk sizing (tokens of the local tokenizer, see chunking.py)."""

    max_tokens: int = 512
    overlap_tokens: int = 64
    table_max_tokens: int = 256  # a longer table is split between rows into parts of at most this

    def __post_init__(self) -> None:
        if not 0 <= self.overlap_tokens < self.max_tokens:
            raise ConfigError("need 0 ≤ overlap_tokens < max_tokens")
        if self.table_max_tokens < 16:
            raise ConfigError("table_max_tokens must be ≥ 16")


@dataclass(frozen=True)
class IngestOptions:
    """Everything one ingestion run needs; built by the CLI or the DAGs, never from globals."""

    engine: str = "auto"  # auto | text | cpu | vllm | openai
    preset: str = "olmocr2"  # model preset for the vllm/openai engines (README: Models and licences)
    # pages per mapped batch (Airflow) / per engine run: what a retry redoes at most and what one task
    # in the UI stands for; with a warm model per GPU it no longer sets the throughput (README)
    batch_pages: int = 100
    failed_page_budget: float = 0.1  # share of failed pages above which a document is `partial`
    reprocess: bool = False  # redo documents already in the knowledge base
    rehash: bool = False  # read and hash every source entry, even those unchanged since the last run
    # A run that leaves a document quarantined or partial fails (Airflow: its report task, once the
    # report is written; the CLI's `run` exits 1 whatever this says).
    fail_on_incomplete: bool = False
    pdf: PdfOptions = field(default_factory=PdfOptions)
    chunk: ChunkOptions = field(default_factory=ChunkOptions)
    engine_options: Mapping[str, Any] = field(default_factory=dict)  # passed to the engine's own options
    # Engines that read, in this order, a page the engine could not read validly (stages/fallback.py).
    fallbacks: tuple[str, ...] = ("text", "cpu")
    # Options per fallback engine kind, e.g. {"cpu": {"lang": "eng+deu"}} (Tesseract's languages).
    fallback_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Nothing (no page, no document) finished for this long → the batch fails naming the stage and
    # what it waits on; a warning is logged after a sixth of it (watchdog.py).
    stall_timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        check_engine(self.engine)
        if not 0.0 <= self.failed_page_budget <= 1.0:
            raise ConfigError("failed_page_budget must be within [0, 1]")
        if self.batch_pages < 1:
            raise ConfigError("batch_pages must be ≥ 1")
        check_fallbacks((*self.fallbacks, *self.fallback_options))
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        pdf = self.pdf
        longest = max(pdf.doc_timeout_s, pdf.page_timeout_s, pdf.compress_timeout_s + 30)
        if self.stall_timeout_s <= longest:
            raise ConfigError(
                f"stall_timeout_s ({self.stall_timeout_s:g}) must exceed the longest per-document limit "
                f"({longest:g} s); raise it or lower the pdf limits"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> IngestOptions:
        """Build from plain (e.g. JSON/Param) values, nested ``pdf`` and ``chunk`` mappings included."""
        values = dict(values)
        if isinstance(values.get("pdf"), Mapping):
            values["pdf"] = from_mapping(PdfOptions, values["pdf"])
        if isinstance(values.get("chunk"), Mapping):
            values["chunk"] = from_mapping(ChunkOptions, values["chunk"])
        return from_mapping(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON-serialisable), the inverse of ``from_dict``."""
        return dataclasses.asdict(self) | {
            "engine_options": dict(self.engine_options),
            "fallbacks": list(self.fallbacks),
            "fallback_options": {k: dict(v) for k, v in self.fallback_options.items()},
        }
