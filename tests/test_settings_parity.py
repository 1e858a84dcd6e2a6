"""Settings parity: every run setting is in every interface — ``IngestOptions``, the CLI's ``run`` flags,
the Airflow Params, the environment Airflow resolves — or its declaration says why not.

Each interface is read from the real thing (the dataclass fields, the CLI's parser, the DAGs' Params,
the variables the resolution reads), never from the table, so a field, flag, Param or variable added
by hand and not declared in chandra_ocr/run_settings.py fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.run_settings import BY_NAME, CLI, ENV, INTERFACES, OPTIONS, OPTIONS_ONLY, PARAM, SETTINGS

NOT_SETTINGS_ENV = {"CHANDRA_OCR_BASE_DIR", "AIRFLOW_HOME"}  # where relative paths resolve, not a setting


class RecordingEnviron(dict):
    """An empty environment that remembers which variables were looked up."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def _fields(cls: Any, prefix: str = "") -> Iterator[str]:
    """The leaf fields of an options dataclass, nested ones as ``pdf.workers``."""
    for f in dataclasses.fields(cls):
        kind = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(kind):
            yield from _fields(type(kind), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


def _run_flags() -> set[str]:
    """The destinations of ``chandra-ingest run``'s arguments (the setting each one sets)."""
    import argparse

    from chandra_ocr.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest for a in sub.choices["run"]._actions if a.dest not in ("help", "verbose", "debug")}


def _interfaces() -> dict[str, set[str]]:
    from chandra_ocr.airflow.backfill import DONE_PARAM, TOTAL_PARAM
    from chandra_ocr.airflow.graph import run_params
    from chandra_ocr.airflow.settings import resolve_run_config

    environ = RecordingEnviron()
    resolve_run_config({}, None, environ)
    by_env = {s.env: s.name for s in SETTINGS if s.env}
    unknown_env = environ.read - set(by_env) - NOT_SETTINGS_ENV
    assert not unknown_env, f"the run settings' resolution reads undeclared variables: {sorted(unknown_env)}"
    by_option = {s.option: s.name for s in SETTINGS if s.option}
    fields = set(_fields(IngestOptions))
    undeclared = fields - set(by_option) - OPTIONS_ONLY
    assert not undeclared, f"IngestOptions fields neither declared nor listed in OPTIONS_ONLY: {undeclared}"
    return {
        CLI: _run_flags(),
        PARAM: set(run_params(backfill=True)) - {DONE_PARAM, TOTAL_PARAM},  # the backfill's own bookkeeping
        ENV: {by_env[v] for v in environ.read if v in by_env},
        OPTIONS: {by_option[f] for f in fields if f in by_option},
    }


def test_every_setting_is_in_every_interface_or_says_why_not():
    found = _interfaces()
    for interface, names in found.items():
        assert names <= set(BY_NAME), f"{interface} has undeclared settings: {sorted(names - set(BY_NAME))}"
    gaps = [
        f"{s.name}: {'in' if s.name in found[i] else 'not in'} {i}, "
        + (f"yet listed as absent ({s.absent[i]!r})" if i in s.absent else "and no reason given")
        for s in SETTINGS
        for i in INTERFACES
        if (s.name in found[i]) == bool(s.absent.get(i))
    ]
    assert not gaps, gaps


def test_options_only_lists_real_fields_without_a_setting_of_their_own():
    fields = set(_fields(IngestOptions))
    assert fields >= OPTIONS_ONLY, sorted(OPTIONS_ONLY - fields)
    assert not OPTIONS_ONLY & {s.option for s in SETTINGS}


def test_the_ingest_dag_has_the_params_for_every_run_and_the_backfill_the_rest():
    from chandra_ocr.airflow.graph import run_params

    assert set(run_params(backfill=False)) == {s.name for s in SETTINGS if s.param == "all"}
    assert {s.name for s in SETTINGS if s.param == "backfill"} <= set(run_params(backfill=True))


def test_the_cli_shows_its_flags_where_library_errors_name_settings():
    from chandra_ocr.run_settings import flag_message

    assert flag_message("max_documents must be ≥ 1, got 0") == "--limit must be ≥ 1, got 0"
    assert flag_message("kb /x is a file") == "--kb /x is a file"
    assert (
        flag_message("engine vllm needs vLLM; use `engine` cpu")
        == "--engine vllm needs vLLM; use --engine cpu"
    )
    assert flag_message("source /x does not exist") == "source /x does not exist"  # positional: no flag
    assert flag_message("the cpu engine: `options` …") == "the cpu engine: `options` …"  # no flag: as it was
