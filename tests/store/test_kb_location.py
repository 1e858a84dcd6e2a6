"""A knowledge base opens from any working directory, and after its folder is moved or copied.

kb.duckdb's views name the Parquet files they read; DuckDB resolves a relative name against the
reader's working directory, so they name them by absolute path, and kb.duckdb records the folder
it was written for. A reader of this package that finds the folder elsewhere reads the files where
they are now (and says so, naming the write that re-points kb.duckdb for other DuckDB clients).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from chandra_ocr.cli import main

COUNT = "SELECT count(*) AS n FROM chunks"


def _landing(folder: Path, samples: Path) -> None:
    folder.mkdir(parents=True)
    for name in ("report.pdf", "mixed.pdf"):
        shutil.copy(samples / name, folder / name)
        os.utime(folder / name, (1_700_000_000, 1_700_000_000))


def _cli_count(kb: Path, capsys: pytest.CaptureFixture) -> int:
    capsys.readouterr()
    assert main(["query", "--kb", str(kb), COUNT, "--json"]) == 0
    return json.loads(capsys.readouterr().out)[0]["n"]


def _duckdb_count(kb: Path) -> int:
    """README's way: a plain read-only DuckDB connection to kb.duckdb."""
    with duckdb.connect(str(kb / "kb.duckdb"), read_only=True) as con:
        return con.execute(COUNT).fetchall()[0][0]


def test_a_kb_made_with_a_relative_path_opens_from_anywhere_and_after_a_move_or_copy(
    tmp_path, samples, monkeypatch, capsys, caplog
):
    made, elsewhere = tmp_path / "made", tmp_path / "elsewhere"
    _landing(made / "landing", samples)
    elsewhere.mkdir()
    monkeypatch.chdir(made)
    assert main(["run", "landing", "--kb", "kb", "--engine", "text"]) == 0
    kb = made / "kb"

    monkeypatch.chdir(elsewhere)  # another working directory: the CLI and plain DuckDB read the KB
    n = _cli_count(kb, capsys)
    assert n > 0 and _duckdb_count(kb) == n

    moved = tmp_path / "moved" / "kb"
    moved.parent.mkdir()
    shutil.move(kb, moved)
    with caplog.at_level(logging.WARNING):
        assert _cli_count(moved, capsys) == n  # the CLI reads the files where they are now
    said = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert str(kb) in said and f"chandra-ingest compact --kb {moved}" in said, said
    with pytest.raises(duckdb.IOException, match=str(kb)):  # other clients: the old place, until a write
        _duckdb_count(moved)
    assert main(["compact", "--kb", str(moved)]) == 0
    assert _duckdb_count(moved) == n

    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    shutil.rmtree(moved)  # the copy reads its own files, not the original's
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert _cli_count(copy, capsys) == n
    assert f"chandra-ingest compact --kb {copy}" in caplog.text
    assert main(["compact", "--kb", str(copy)]) == 0
    assert _duckdb_count(copy) == n
