"""A new user's first hour with the real ``chandra-ingest`` (``python -m chandra_ocr.cli`` in a subprocess).

Errors the user can fix are one or two lines with exit code 2 and no traceback, found before any
work; a run with quarantined documents exits 1; pipes to ``head`` end quietly; ``--json`` is JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = ("report.pdf", "mixed.pdf", "broken.pdf")


def cli(
    *args: str, cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The real CLI in a child process (PYTHONPATH and the rest of the environment carry over, or ``env``)."""
    return subprocess.run(
        [sys.executable, "-m", "chandra_ocr.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )


def piped_to_head(command: str, cwd: Path) -> tuple[int, str, str]:
    """``command | head -n 1`` in bash: the CLI's exit status, head's output, the CLI's stderr."""
    script = f"{command} 2>err.txt | head -n 1; echo $" + "{PIPESTATUS[0]} > rc.txt"
    head = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, timeout=300)
    return int((cwd / "rc.txt").read_text()), head.stdout, (cwd / "err.txt").read_text()


def user_error(done: subprocess.CompletedProcess) -> list[str]:
    """Asserts a usage error (exit 2, no traceback, at most two lines on stderr); its lines."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and 1 <= len(lines) <= 2, done.stderr
    assert lines[0].startswith("error: ")
    return lines


def landing(folder: Path, samples: Path, names=SAMPLES, settled: bool = True) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        shutil.copy(samples / name, folder / name)
        if settled:
            os.utime(folder / name, (1_700_000_000, 1_700_000_000))
    return folder


@pytest.fixture(scope="module")
def kb(tmp_path_factory, samples) -> tuple[Path, subprocess.CompletedProcess]:
    """A knowledge base made by ``chandra-ingest run`` from two good samples and a broken file."""
    root = tmp_path_factory.mktemp("first-hour")
    source = landing(root / "landing", samples)
    done = cli("run", str(source), "--kb", str(root / "kb"), "--engine", "text")
    return root / "kb", done


def test_a_run_with_a_quarantined_document_exits_1_and_names_it(kb):
    path, done = kb
    assert done.returncode == 1, done.stderr[-2000:]
    assert "found 3 new" in done.stdout and "2 ingested, 1 quarantined" in done.stdout
    assert "quarantined: broken.pdf: not a PDF" in done.stdout
    assert f"knowledge base: {path / 'kb.duckdb'}" in done.stdout
    assert "chandra-ingest query --kb" in done.stdout  # what to type next


def test_a_rerun_with_nothing_new_exits_0(kb, tmp_path, samples):
    path, _ = kb
    again = cli("run", str(path.parent / "landing"), "--kb", str(path), "--engine", "text")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "found 0 new, 3 already ingested" in again.stdout


def test_a_wrong_column_is_one_line_and_a_hint(kb):
    path, _ = kb
    lines = user_error(cli("query", "--kb", str(path), "SELECT bytes_in FROM documents"))
    assert 'Referenced column "bytes_in" not found' in lines[0] and '"bytes"' in lines[0]  # candidates
    assert lines[1].startswith("hint: ") and "DESCRIBE documents" in lines[1]
    lines = user_error(cli("query", "--kb", str(path), "DELETE FROM documents"))
    assert "read-only" in lines[0] and "forget" in lines[1]


def test_debug_shows_the_traceback(kb):
    path, _ = kb
    done = cli("--debug", "query", "--kb", str(path), "SELECT bytes_in FROM documents")
    assert done.returncode == 2 and "Traceback" in done.stderr and "bytes_in" in done.stderr


def test_a_kb_that_is_a_file_is_refused_before_any_work(tmp_path, samples):
    source = landing(tmp_path / "landing", samples, ("report.pdf",))
    (tmp_path / "kb").write_text("my notes")
    lines = user_error(cli("run", str(source), "--kb", str(tmp_path / "kb"), "--engine", "text"))
    assert lines == [
        f"error: --kb {tmp_path / 'kb'} is a file, not a folder: give a folder for the knowledge base"
    ]
    assert (tmp_path / "kb").read_text() == "my notes"
    assert not list(tmp_path.rglob("*.parquet*")) and not list(tmp_path.rglob("compressed.pdf"))


def test_a_missing_or_empty_source_is_an_error(tmp_path):
    lines = user_error(cli("run", str(tmp_path / "nowhere"), "--kb", str(tmp_path / "kb")))
    assert f"source {tmp_path / 'nowhere'} does not exist" in lines[0]
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.txt").write_text("no PDF")
    lines = user_error(cli("run", str(tmp_path / "empty"), "--kb", str(tmp_path / "kb")))
    assert f"source {tmp_path / 'empty'} holds no PDF file" in lines[0]
    lines = user_error(cli("run", str(tmp_path / "empty" / "*.pdf"), "--kb", str(tmp_path / "kb")))
    assert "matches no file" in lines[0]
    assert not (tmp_path / "kb").exists()


def test_unreadable_passwords_bad_engine_options_and_no_server_are_found_before_any_work(tmp_path, samples):
    source = landing(tmp_path / "landing", samples, ("report.pdf",))
    kb = tmp_path / "kb"
    lines = user_error(
        cli("run", str(source), "--kb", str(kb), "--passwords-file", str(tmp_path / "no.json"))
    )
    assert f"cannot read passwords file {tmp_path / 'no.json'}" in lines[0]
    lines = user_error(
        cli("run", str(source), "--kb", str(kb), "--engine", "cpu", "--engine-option", "dpu=300")
    )
    assert "unknown CpuOptions option(s): dpu" in lines[0]
    server = (
        "--engine",
        "openai",
        "--engine-option",
        "base_url=http://127.0.0.1:9/v1",
        "--engine-option",
        "max_retries=0",
    )
    lines = user_error(cli("run", str(source), "--kb", str(kb), *server))  # port 9 (discard): nothing answers
    assert "http://127.0.0.1:9/v1 failed the health check" in lines[0] and "vllm serve" in lines[0]
    assert not kb.exists()


@pytest.mark.parametrize("engine", ["auto", "text", "cpu", "vllm", "openai"])
def test_an_unknown_preset_is_refused_before_any_work_whatever_the_engine(tmp_path, samples, engine):
    source = landing(tmp_path / "landing", samples, ("report.pdf",))
    done = cli("run", str(source), "--kb", str(tmp_path / "kb"), "--engine", engine, "--preset", "olmocr3")
    assert user_error(done)[0].startswith(
        "error: --preset 'olmocr3' is unknown; known presets: chandra2, lightonocr2, olmocr2, olmocr2-fp8"
    )
    assert not (tmp_path / "kb").exists()


def test_the_presets_of_the_preset_modules_are_known(tmp_path, samples):
    (tmp_path / "my_presets.py").write_text(
        "import dataclasses\nfrom chandra_ocr.ocr.presets import OLMOCR2\n"
        "PRESETS = {'mine': dataclasses.replace(OLMOCR2, name='mine')}\n"
    )
    env = os.environ | {"CHANDRA_OCR_PRESET_MODULES": "my_presets", "PYTHONPATH": str(tmp_path)}
    source = landing(tmp_path / "landing", samples, ("report.pdf",))
    kb = str(tmp_path / "kb")
    refused = user_error(cli("run", str(source), "--kb", kb, "--preset", "olmocr3", env=env))
    assert "known presets: chandra2, lightonocr2, mine, olmocr2, olmocr2-fp8" in refused[0]
    done = cli("run", str(source), "--kb", kb, "--engine", "text", "--preset", "mine", env=env)
    assert done.returncode == 0 and "1 ingested" in done.stdout, done.stderr[-2000:]


def test_sql_that_duckdb_refuses_is_a_usage_error_with_duckdbs_message(kb):
    path, _ = kb
    # README's typed SQL on a column of names: DuckDB refuses the cast while it runs, not when it binds
    typed = (
        "SELECT r.record['Station']::DOUBLE AS station FROM kb_table_rows((SELECT doc_id FROM documents "
        "WHERE file_name = 'report.pdf'), 1, 1) r"
    )
    refused = {
        typed: "Conversion Error: Could not convert string 'Millbrook' to DOUBLE",
        "SELEC 1": 'Parser Error: syntax error at or near "SELEC"',
        "SELECT * FROM nope": "Catalog Error: Table with name nope does not exist",
        "SELECT 9223372036854775807 + 1": "Out of Range Error: Overflow in addition of INT64",
    }
    for sql, message in refused.items():
        lines = user_error(cli("query", "--kb", str(path), sql))
        assert lines[0].startswith(f"error: the query failed: {message}"), lines
        hint = {typed: ["TRY_CAST"], "SELECT 9223372036854775807 + 1": []}.get(sql, ["SHOW TABLES"])
        assert [h for h in hint if h in lines[-1]] == hint and len(lines) == 1 + len(hint), lines
    as_json = user_error(cli("query", "--kb", str(path), "--json", typed))  # rows fetched, not shown
    assert as_json[0].startswith(f"error: the query failed: {refused[typed]}")


def test_without_the_embed_extra_feed_and_search_match_words_and_print_the_command_that_installs_it(
    kb, without_embed, tmp_path
):
    from chandra_ocr.extras import install_command

    path, _ = kb
    command = install_command("embed")
    repo = Path(__file__).resolve().parents[1]  # this venv's editable install: the checkout's form
    assert command == (
        f"pip install -c {repo / 'constraints.txt'} --extra-index-url https://download.pytorch.org/whl/cpu "
        f"-e '{repo}[embed]'"
    )
    path = Path(shutil.copytree(path, tmp_path / "kb"))  # the module's KB stays unfed for the other tests
    index = ("--index", str(tmp_path / "vector"))  # none there yet
    (line,) = user_error(cli("search", "--kb", str(path), *index, "nitrate", env=without_embed))
    assert f"run `chandra-ingest feed --kb {path}` first" in line
    fed = cli("feed", "--kb", str(path), *index, env=without_embed)
    assert fed.returncode == 0, fed.stderr[-2000:]
    *_, words, vectors = fed.stdout.splitlines()
    assert words.startswith("search index: 1 outbox file(s) applied") and "chunks in all" in words
    assert vectors.startswith("vector index: not built, search matches words only") and command in vectors
    found = cli("search", "--kb", str(path), *index, "nitrate", env=without_embed)
    assert found.returncode == 0 and found.stdout.startswith("1. ") and "report.pdf" in found.stdout
    assert "note: words only: vector search (feed and search) needs the 'embed' extra" in found.stderr
    assert command in found.stderr


def test_files_still_being_written_are_named_with_the_flag_that_takes_them(tmp_path, samples):
    source = landing(tmp_path / "landing", samples, ("report.pdf", "mixed.pdf"), settled=False)
    done = cli("run", str(source), "--kb", str(tmp_path / "kb"), "--engine", "text")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 new" in done.stdout and "2 still being written" in done.stdout
    assert "mixed.pdf, report.pdf" in done.stdout and "--settle-seconds 0" in done.stdout
    now = cli("run", str(source), "--kb", str(tmp_path / "kb"), "--engine", "text", "--settle-seconds", "0")
    assert now.returncode == 0 and "found 2 new" in now.stdout, now.stderr[-2000:]


def test_read_commands_need_a_knowledge_base_and_create_no_folder(tmp_path):
    missing = tmp_path / "missing"
    for args in (("table", "--kb", str(missing), "report.pdf", "1", "1"), ("status", "--kb", str(missing)),
                 ("query", "--kb", str(missing), "SELECT 1"), ("feed", "--kb", str(missing)),
                 ("report", "--kb", str(missing))):  # fmt: skip
        lines = user_error(cli(*args))
        assert (
            f"no knowledge base at {missing / 'kb.duckdb'}" in lines[0] and "chandra-ingest run" in lines[0]
        )
    assert not missing.exists()


def test_an_unknown_table_or_document_is_a_usage_error(kb):
    path, _ = kb
    assert "no table 9 on page 1" in user_error(cli("table", "--kb", str(path), "report.pdf", "1", "9"))[0]
    assert (
        "no document match 'nope.pdf'" in user_error(cli("table", "--kb", str(path), "nope.pdf", "1", "1"))[0]
    )


def test_pipes_into_head_end_quietly(kb, tmp_path):
    path, _ = kb
    big = f'{sys.executable} -m chandra_ocr.cli query --kb {path} --json "SELECT range FROM range(300000)"'
    rc, out, err = piped_to_head(big, tmp_path)
    assert rc == 0 and out.startswith('[{"range": 0}') and "Error" not in err, err
    table = f"{sys.executable} -m chandra_ocr.cli table --kb {path} report.pdf 1 1"
    for command in (table, table + " --csv"):
        rc, out, err = piped_to_head(command, tmp_path)
        assert rc == 0 and out and "Error" not in err, err


def test_status_and_query_give_json_for_scripts(kb):
    path, _ = kb
    status = cli("status", "--kb", str(path), "--json")
    assert status.returncode == 0, status.stderr
    rows = {r["status"]: r for r in json.loads(status.stdout)}
    assert rows["ingested"]["documents"] == 2 and rows["quarantined"]["documents"] == 1
    query = cli(
        "query", "--kb", str(path), "--json", "SELECT file_name, ingested_at FROM documents ORDER BY 1"
    )
    docs = json.loads(query.stdout)
    assert [d["file_name"] for d in docs] == sorted(SAMPLES) and "T" in docs[0]["ingested_at"]
    text = cli("status", "--kb", str(path))
    assert "quarantined" in text.stdout and not text.stdout.lstrip().startswith("[")


@pytest.mark.slow
def test_feed_prints_a_summary_or_json_not_python_objects(kb):
    path, _ = kb
    done = cli("feed", "--kb", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ApplyCounts" not in done.stdout + done.stderr
    assert "outbox: export 1" in done.stdout and "chunks embedded" in done.stdout
    again = json.loads(cli("feed", "--kb", str(path), "--json").stdout)
    assert again["outbox_file"] is None and again["index_counts"]["files"] == 0
    assert again["index_counts"]["vectors"] > 0


def test_help_documents_the_exit_codes():
    for args in ((), ("run",), ("query",)):
        done = cli(*args, "--help")
        assert done.returncode == 0 and "exit codes: 0 done; 1 run finished" in " ".join(done.stdout.split())
