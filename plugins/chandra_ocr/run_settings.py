"""The run settings, each declared once: name, type, default, environment variable, CLI flag, help.

The CLI's ``run`` flags (cli_flags.py), the Airflow DAGs' Params (airflow/graph.py) and the
environment resolution of the Airflow run settings (airflow/settings.py) are made from this table.
A setting that is an ``IngestOptions`` field takes its default from ``IngestOptions()``. An
interface a setting is deliberately not part of is listed in ``absent`` with the reason
(tests/test_settings_parity.py holds the table to the interfaces).

Library errors name settings (``max_documents must be ≥ 1``, or a name in backticks inside a
sentence); the CLI shows its flag in their place (``flag_message``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.kinds import ENGINE_KINDS

CLI, PARAM, ENV, OPTIONS = "cli", "param", "env", "options"  # the interfaces a setting can be part of
INTERFACES = (CLI, PARAM, ENV, OPTIONS)
_DEFAULTS = IngestOptions()


def parse_pairs(items: list[str]) -> dict[str, Any]:
    """``KEY=JSON`` items → a dict (a value that is not JSON stays a string)."""
    out: dict[str, Any] = {}
    for pair in items:
        key, _, value = pair.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def parse_kind_pairs(items: list[str]) -> dict[str, dict[str, Any]]:
    """``KIND:KEY=JSON`` items → {kind: {key: value}}."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        kind, sep, pair = item.partition(":")
        if not sep:
            raise ConfigError(f"fallback_options {item!r}: write KIND:KEY=VALUE, e.g. cpu:lang=eng+deu")
        out.setdefault(kind, {}).update(parse_pairs([pair]))
    return out


@dataclass(frozen=True)
class Setting:
    """One run setting and the interfaces it is part of."""

    name: str  # the Param, the Variable key, the name in error messages
    type: type  # str | int | float | bool | dict
    help: str
    option: str | None = None  # its IngestOptions field ("pdf.settle_seconds"), which gives the default
    fallback: Any = None  # the default of a setting that is not an IngestOptions field
    env: str | None = None  # the environment variable (Airflow)
    flag: str | None = None  # the CLI's flag of ``run``; "" for a positional argument
    required: bool = False  # the CLI needs the flag (the default is Airflow's, under $AIRFLOW_HOME)
    param: str | None = None  # the DAGs with a Param: "all" | "backfill"
    title: str | None = None  # the Param's title in Airflow's trigger form
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    metavar: str | None = None  # a repeatable CLI flag that builds a dict
    parse: Callable[[list[str]], dict[str, Any]] | None = None  # its items → the dict
    absent: Mapping[str, str] = field(default_factory=dict)  # interface → why it is not part of it

    @property
    def default(self) -> Any:
        return self.fallback if self.option is None else self.get(_DEFAULTS)

    def get(self, options: IngestOptions) -> Any:
        """The setting's value in ``options`` (its IngestOptions field)."""
        value: Any = options
        for part in str(self.option).split("."):
            value = getattr(value, part)
        return value

    def put(self, values: dict[str, Any], value: Any) -> None:
        """Set ``value`` at the setting's IngestOptions field in the plain ``values`` (``from_dict``'s)."""
        *parents, leaf = str(self.option).split(".")
        for part in parents:
            values[part] = dict(values.get(part) or {})
            values = values[part]
        values[leaf] = value

    def convert(self, raw: str) -> Any:
        """The value of the environment text ``raw`` (named by the variable in errors)."""
        return convert(self.env or self.name, raw, self.type)

    def coerce(self, value: Any, where: str) -> Any:
        """A value given as JSON (a Param, a Variable key) as the setting's type; text is read as the
        environment's would be. Raises ConfigError naming ``where`` (e.g. "Variable 'chandra_ocr' key
        'batch_pages'")."""
        if isinstance(value, str) and self.type is not str:
            return convert(where, value, self.type)
        fits = isinstance(value, self.type) and (self.type is bool or not isinstance(value, bool))
        if not fits and self.type is float:
            fits = isinstance(value, int) and not isinstance(value, bool)
        if not fits:
            raise ConfigError(f"{where} must be {_TYPE_WORDS[self.type]}, got {value!r}")
        return float(value) if self.type is float else value


_TYPE_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
               dict: "a JSON object"}  # fmt: skip
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def convert(name: str, raw: str, kind: type) -> Any:
    """Environment text → a value of ``kind`` (bool, int, float, dict as JSON, str); raises ConfigError."""
    if kind is dict:
        return json_object(raw, name)
    if kind is bool and raw.strip().lower() not in (*_TRUE, *_FALSE):
        raise ConfigError(f"{name}={raw!r} is not true or false (true/false, yes/no, on/off, 1/0)")
    try:
        if kind is bool:
            return raw.strip().lower() in _TRUE
        if kind in (int, float):
            return kind(raw)
        return raw
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not a valid {kind.__name__}: {e}") from e


def json_object(text: str, name: str) -> dict[str, Any]:
    """The JSON object ``text`` that ``name`` holds (a Variable, an environment variable); raises
    ConfigError naming ``name`` and, for text that is not JSON, the line and column of the mistake."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{name} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(value, dict):
        raise ConfigError(f'{name} must be a JSON object ({{"key": value, ...}}), got {type(value).__name__}')
    return value


def check_keys(given: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise ConfigError listing the keys of ``given`` that are not ``known`` (``what``: where they were
    given, e.g. "key(s) in Variable 'chandra_ocr'"), with the known ones."""
    names = sorted(known)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(f"unknown {what}: {unknown}; known: {names}")


def positive(value: Any, name: str) -> int | None:
    """``value`` as an int ≥ 1, or None when empty; raises ConfigError naming the setting."""
    if value in (None, ""):
        return None
    if int(value) < 1:
        raise ConfigError(f"{name} must be ≥ 1, got {value!r}")
    return int(value)


_ONE_RUN = "a choice for one run, not a deployment's default"
_AIRFLOW_CONNECTION = "an Airflow connection"
_JSON_OPTIONS = "a JSON object: Airflow sets it in `options`"
_PASSWORDS = "Airflow keeps passwords in the Variable chandra_ocr_pdf_passwords (masked in logs)"
_NOT_AN_OPTION = "not an option of the pipeline: it says what a run reads or writes"

SETTINGS: tuple[Setting, ...] = (
    Setting("source", str, "a folder (searched recursively for *.pdf), a quoted glob, or an object-store URL "
            "such as s3://bucket/prefix", fallback="./landing", env="CHANDRA_OCR_SOURCE", flag="",
            param="all", title="Source folder, glob or object-store URL", absent={OPTIONS: _NOT_AN_OPTION}),
    Setting("source_conn_id", str, "the Airflow connection of an object-store source (none: the store's "
            "standard environment)", fallback="",
            env="CHANDRA_OCR_SOURCE_CONN_ID", param="all", title="Connection of an object-store source",
            absent={CLI: f"{_AIRFLOW_CONNECTION}; the CLI reads a store's credentials from its environment",
                    OPTIONS: _NOT_AN_OPTION}),
    Setting("kb", str, "knowledge-base folder (Parquet files + kb.duckdb), created if missing",
            fallback="./kb", env="CHANDRA_OCR_KB", flag="--kb", required=True, param="all",
            title="Knowledge-base folder", absent={OPTIONS: _NOT_AN_OPTION}),
    Setting("engine", str, "engine for OCR-route pages", option="engine", env="CHANDRA_OCR_ENGINE",
            flag="--engine", param="all", choices=ENGINE_KINDS),
    Setting("preset", str, "model preset for the vllm/openai engines", option="preset",
            env="CHANDRA_OCR_PRESET", flag="--preset", param="all"),
    Setting("batch_pages", int, "pages per mapped batch (Airflow) / per engine run", option="batch_pages",
            env="CHANDRA_OCR_BATCH_PAGES", flag="--batch-pages", param="all", minimum=1,
            title="Pages per mapped batch"),
    Setting("settle_seconds", float, "skip files modified this recently, as still being written (0: every "
            "file)", option="pdf.settle_seconds", env="CHANDRA_OCR_SETTLE_SECONDS", flag="--settle-seconds",
            absent={PARAM: "how files arrive in the landing folder is a deployment's: the Variable or "
                    "$CHANDRA_OCR_SETTLE_SECONDS"}),
    Setting("fail_on_incomplete", bool, "fail the run when a document is quarantined or partial",
            option="fail_on_incomplete", env="CHANDRA_OCR_FAIL_ON_INCOMPLETE", param="all",
            title="Fail on quarantine",
            absent={CLI: "the CLI's `run` exits 1 whenever a document is quarantined or partial"}),
    Setting("vllm_conn_id", str, "the `vllm` connection of the openai engine", fallback="vllm_default",
            env="CHANDRA_OCR_VLLM_CONN_ID",
            absent={CLI: f"{_AIRFLOW_CONNECTION}; the CLI takes --engine-option base_url=…",
                    PARAM: "a deployment's connection: the Variable or $CHANDRA_OCR_VLLM_CONN_ID",
                    OPTIONS: _NOT_AN_OPTION}),
    Setting("options", dict, "further IngestOptions as JSON (pdf, chunk, engine_options, fallbacks, ...)",
            fallback={}, env="CHANDRA_OCR_OPTIONS",
            absent={CLI: "the CLI has a flag for each option it offers; the rest keep the library's defaults",
                    PARAM: "a JSON object: the Variable or $CHANDRA_OCR_OPTIONS",
                    OPTIONS: "it holds the options"}),
    Setting("rehash", bool, "read and hash every source file, even those whose size and mtime/ETag are "
            "unchanged", option="rehash", flag="--rehash", param="all", absent={ENV: _ONE_RUN}),
    Setting("reprocess", bool, "redo documents ingested under an older pipeline version", option="reprocess",
            flag="--reprocess", param="backfill", absent={ENV: _ONE_RUN}),
    Setting("max_documents", int, "at most this many new documents", flag="--limit", param="backfill",
            minimum=1, absent={ENV: _ONE_RUN, OPTIONS: "a filter of discovery, not an option"}),
    Setting("modified_since", str, "only files modified at or after this ISO date/time (UTC)",
            param="backfill", absent={CLI: "a backfill's window; a CLI run narrows its source with a glob",
                                      ENV: _ONE_RUN, OPTIONS: "a filter of discovery, not an option"}),
    Setting("modified_until", str, "only files modified before this ISO date/time (UTC)", param="backfill",
            absent={CLI: "a backfill's window; a CLI run narrows its source with a glob", ENV: _ONE_RUN,
                    OPTIONS: "a filter of discovery, not an option"}),
    Setting("compress", bool, "Ghostscript/PyMuPDF pre-compression", option="pdf.compress",
            flag="--no-compress", absent={PARAM: _JSON_OPTIONS, ENV: _JSON_OPTIONS}),
    Setting("workers", int, "PDF worker processes", option="pdf.workers", flag="--workers",
            absent={PARAM: _JSON_OPTIONS, ENV: _JSON_OPTIONS}),
    Setting("passwords_file", str, "JSON {doc_id | path ending | file name: password} for encrypted PDFs "
            "(never logged)", option="pdf.passwords_file", flag="--passwords-file",
            absent={PARAM: _PASSWORDS, ENV: _PASSWORDS}),
    Setting("engine_options", dict, "engine option, e.g. max_attempts=3 (repeatable)",
            option="engine_options", flag="--engine-option", metavar="KEY=JSON", parse=parse_pairs,
            absent={PARAM: _JSON_OPTIONS, ENV: _JSON_OPTIONS}),
    Setting("fallback_options", dict, "option of a fallback engine, e.g. cpu:lang=eng+deu for Tesseract's "
            "languages (repeatable)", option="fallback_options", flag="--fallback-option",
            metavar="KIND:KEY=JSON", parse=parse_kind_pairs,
            absent={PARAM: _JSON_OPTIONS, ENV: _JSON_OPTIONS}),
)  # fmt: skip
BY_NAME = {s.name: s for s in SETTINGS}

# IngestOptions fields with no setting of their own (tuning): Airflow sets them in `options`, the CLI
# runs with the library's defaults.
OPTIONS_ONLY = frozenset({
    "failed_page_budget", "fallbacks", "stall_timeout_s", "chunk.max_tokens", "chunk.overlap_tokens",
    "chunk.table_max_tokens",
    "pdf.compress_timeout_s", "pdf.compress_min_image_pixels", "pdf.ocr_dpi", "pdf.native_tables",
    "pdf.min_text_chars", "pdf.max_bad_glyph_ratio", "pdf.image_cover_ratio", "pdf.doc_timeout_s",
    "pdf.page_timeout_s", "pdf.memory_limit_mb",
})  # fmt: skip


def run_env() -> dict[str, str]:
    """Setting name → environment variable, for the settings that have one (Airflow's run settings)."""
    return {s.name: s.env for s in SETTINGS if s.env}


def flag_message(message: str) -> str:
    """``message`` with the settings it names shown as the CLI's flags: a leading setting name, and any
    setting name in backticks."""

    def flag(name: str, original: str) -> str:
        setting = BY_NAME.get(name)
        return setting.flag if setting is not None and setting.flag else original

    lead = re.match(r"[a-z_]+(?=[\s:])", message)
    if lead:
        message = flag(lead.group(), lead.group()) + message[lead.end() :]
    return re.sub(r"`([a-z_]+)`", lambda m: flag(m.group(1), m.group()), message)
