"""The flags of ``chandra-ingest run``, made from the run settings' table (run_settings.py)."""

from __future__ import annotations

import argparse
from typing import Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.run_settings import SETTINGS, Setting


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """One argument per setting with a flag: its type, default, choices and help from the table."""
    for s in SETTINGS:
        if s.flag is None:
            continue
        if s.flag == "":
            parser.add_argument(s.name, help=s.help)
        else:
            parser.add_argument(s.flag, dest=s.name, **_kwargs(s))


def _kwargs(s: Setting) -> dict[str, Any]:
    help = s.help.replace("%", "%%")
    if s.type is bool:  # a flag that turns on what is off by default, or off what is on
        if s.default:
            return {"action": "store_false", "help": f"no {help}"}
        return {"action": "store_true", "help": help}
    if s.parse is not None:
        return {"action": "append", "default": [], "metavar": s.metavar, "help": help}
    if s.required:
        return {"required": True, "help": help}
    default = f"{s.default:g}" if isinstance(s.default, float) else s.default
    help += f" (default {default})" if s.default not in (None, "") else ""
    metavar = None if s.choices else str(s.flag).lstrip("-").upper().replace("-", "_")
    return {"type": s.type, "default": s.default, "choices": s.choices, "metavar": metavar, "help": help}


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    """The run's options: each flag's value at its IngestOptions field, the rest the library's defaults."""
    values: dict[str, Any] = {}
    for s in SETTINGS:
        if s.flag and s.option is not None:
            value = getattr(args, s.name)
            s.put(values, s.parse(value) if s.parse is not None else value)
    return IngestOptions.from_dict(values)
