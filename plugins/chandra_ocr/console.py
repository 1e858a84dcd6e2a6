"""How the CLI talks to people and scripts: exit codes, one-line errors, JSON or text, quiet broken pipes."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import duckdb

from chandra_ocr.errors import ChandraOcrError, ConfigError, NotFoundError, StoreError

# Exit codes (README "Exit codes", and the CLI's --help).
OK = 0  # done; for `run`: every document ingested
INCOMPLETE = 1  # `run` finished, but some documents are quarantined or partial (see `status`)
USAGE = 2  # a usage or configuration error the user can fix; nothing was done
FAILED = 3  # a failure while working (engine, storage, an unexpected error); --debug shows the traceback
INTERRUPTED = 130  # Ctrl-C

EXIT_CODES_HELP = (
    "exit codes: 0 done; 1 run finished but some documents are quarantined or partial; "
    "2 usage or configuration error (nothing done); 3 failed while working (--debug shows the traceback)"
)


class QueryError(ChandraOcrError):
    """SQL the user gave that DuckDB refused (syntax, unknown table or column, a write)."""


def guarded(command: Callable[[], int], *, debug: bool) -> int:
    """Run ``command``; turn every error into one or two lines on stderr and its exit code."""
    try:
        return command()
    except BrokenPipeError:
        _silence_stdout()  # the reader (e.g. `head`) has what it wanted
        return OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
    except (ConfigError, NotFoundError, QueryError) as e:
        return _report(e, USAGE, debug)
    except ChandraOcrError as e:
        return _report(e, FAILED, debug)
    except Exception as e:  # anything else is a bug or an environment problem: say so, briefly
        return _report(e, FAILED, debug, f"unexpected {type(e).__name__}: ")


def _report(error: BaseException, code: int, debug: bool, prefix: str = "") -> int:
    if debug:
        traceback.print_exc()
    print(f"error: {prefix}{error}", file=sys.stderr)
    if code == FAILED and not debug:
        print("(run again with --debug for the traceback)", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# What DuckDB raises for SQL it refuses, while binding it or while running it (a cast that fails on one
# cell): parser, binder, catalog, conversion, out-of-range, type and constraint errors, a write on a
# read-only database. The rest (I/O, memory, internal errors) are failures of the work, not of the SQL.
REFUSED = (duckdb.ProgrammingError, duckdb.DataError, duckdb.NotSupportedError, duckdb.IntegrityError,
           duckdb.PermissionException, duckdb.DependencyException, duckdb.SequenceException)  # fmt: skip


@contextmanager
def refused_sql() -> Iterator[None]:
    """Run and print the user's SQL within this block: SQL that DuckDB refuses becomes a QueryError (exit 2)
    with DuckDB's own message and a hint; an I/O error a StoreError (exit 3)."""
    try:
        yield
    except REFUSED as e:
        what = _first_part(e)
        if "base table" in what:  # DELETE/UPDATE/INSERT on a dataset table (a view over Parquet files)
            what = f"the knowledge base is read-only here: {what}"
        if "read-only" in what:
            hint = "\nhint: `query` only reads; documents are removed with `chandra-ingest forget`"
        elif isinstance(e, duckdb.ConversionException):  # a value that does not convert, e.g. a cell cast
            hint = "\nhint: TRY_CAST(value AS DOUBLE) gives NULL where a value does not convert"
        elif isinstance(e, duckdb.DataError):  # an overflow, a value out of range: the message says it all
            hint = ""
        else:
            hint = (
                '\nhint: list the tables with "SHOW TABLES" and a table\'s columns with "DESCRIBE documents"'
            )
        raise QueryError(f"the query failed: {what}{hint}") from None
    except duckdb.IOException as e:  # a file the query reads is missing or unreadable
        raise StoreError(f"the query failed reading its files: {_first_part(e)}") from None


def _first_part(error: duckdb.Error) -> str:
    """DuckDB's message without the query and caret it appends after a blank line, on one line."""
    return " ".join(str(error).split("\n\n")[0].split())


def emit(relation: duckdb.DuckDBPyRelation | None, *, as_json: bool, max_rows: int = 1000) -> None:
    """Print ``relation`` as a text grid (at most ``max_rows`` rows) or as a JSON array of row objects."""
    if as_json:
        rows = [] if relation is None else relation.fetchall()
        columns = [] if relation is None else relation.columns
        print_json([dict(zip(columns, row, strict=True)) for row in rows])
    elif relation is not None:
        relation.show(max_width=200, max_rows=max_rows)


def print_json(value: Any) -> None:
    """``value`` as JSON on stdout (times as ISO text, decimals as numbers)."""
    json.dump(value, sys.stdout, default=_plain, ensure_ascii=False)
    sys.stdout.write("\n")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)
