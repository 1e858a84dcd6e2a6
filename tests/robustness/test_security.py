"""Security: user paths and document content are data, never shell or SQL; Ghostscript runs with -dSAFER;
discovery does not follow links out of the source; model-output parsers survive anything, in bounded time."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chandra_ocr.errors import ParseError
from chandra_ocr.ocr.presets import PRESETS, get_preset

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "chandra_ocr"

# File names a shell or an SQL string would misread; each is a scanned page (Ghostscript compresses
# documents with large images) or a text page whose own text is hostile too.
SCAN_NAMES = ["$(touch PWNED-subst).pdf", "a;touch PWNED-semi;b.pdf", "-dNOSAFER 50%_off.pdf"]
TEXT_NAMES = ["x'); DROP TABLE documents; --.pdf", 'it\'s "quoted" & |piped| `id`.pdf']
HOSTILE_TEXT = 'Robert\'); DROP TABLE chunks; -- "quoted" $(touch PWNED-text) `id` %s {0} \\x00'


def _gs_recorder(folder: Path, log: Path) -> None:
    """A ``gs`` first on PATH that logs its argument list, then runs the real Ghostscript."""
    real = shutil.which("gs")
    assert real, "Ghostscript is a system dependency (scripts/system-deps.sh)"
    script = folder / "gs"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"os.execv({real!r}, [{real!r}] + sys.argv[1:])\n"
    )
    script.chmod(0o755)


def _text_pdf(path: Path, text: str) -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    for i in range(3):
        page.insert_text((72, 100 + 20 * i), text, fontsize=9)
    doc.save(path)


@pytest.mark.corpus
@pytest.mark.slow
def test_hostile_names_and_content_are_data_and_ghostscript_runs_safe(corpus: Path, tmp_path: Path):
    src, elsewhere, bin_dir = tmp_path / "in", tmp_path / "elsewhere", tmp_path / "bin"
    for d in (src, elsewhere, bin_dir):
        d.mkdir()
    for name in SCAN_NAMES:
        shutil.copy(corpus / "ocrmypdf/tests/resources/linn.pdf", src / name)  # a 2550 x 3300 px scan
        (src / name).write_bytes((src / name).read_bytes() + f"\n% {name}\n".encode())  # distinct doc_ids
    for name in TEXT_NAMES:
        _text_pdf(src / name, HOSTILE_TEXT + name)
    _text_pdf(elsewhere / "secret.pdf", "outside the source folder " * 5)
    (src / "link.pdf").symlink_to(elsewhere / "secret.pdf")
    log = tmp_path / "gs-argv.jsonl"
    _gs_recorder(bin_dir, log)
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    kb = tmp_path / "kb"

    done = subprocess.run(
        [sys.executable, "-m", "chandra_ocr.cli", "run", str(src), "--kb", str(kb), "--engine", "cpu",
         "--settle-seconds", "0"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    inputs = sorted(args[-1] for args in calls)
    assert inputs == sorted(str((src / n).resolve()) for n in SCAN_NAMES)  # each path one whole argument
    for args in calls:
        assert "-dSAFER" in args and "-dNOSAFER" not in args and args[-2] == "-f"
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))
    assert "refused" in done.stdout and "link.pdf" in done.stdout and "outside the source root" in done.stdout

    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        docs = dict(con.execute("SELECT file_name, source_uri FROM documents").fetchall())
        texts = dict(
            con.execute(
                "SELECT d.file_name, string_agg(c.text, ' ') "
                "FROM chunks c JOIN documents d USING (doc_id) GROUP BY 1"
            ).fetchall()
        )
    finally:
        con.close()
    assert docs == {n: str((src / n).resolve()) for n in SCAN_NAMES + TEXT_NAMES}  # link.pdf not followed
    for name in TEXT_NAMES:
        assert (HOSTILE_TEXT + name).split(" $(")[0] in texts[name]


# Names whose values may appear inside SQL text: fixed identifiers of the schema, and numbers.
FIXED_SQL_PARTS = {
    "table",  # loops over DOCUMENT_TABLES / fixed table names
    "where",  # a constant WHERE clause
    "picks",  # table_view: c0, c1, ... aliases over int column numbers
    "COLUMNS",  # vector index: a constant column list
    "_COLUMNS",  # vector/chunk_records: a constant column list (FIELDS)
    "dim",  # embedding dimension (int)
    "view_sql",  # store/dataset.py: a view's file paths as escaped literals (a view takes no parameters)
}


def _sql_interpolations() -> list[tuple[str, int, str]]:
    """(file, line, expression) of every value formatted into the SQL text of an execute/sql call."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            if node.func.attr not in ("execute", "sql", "query", "executemany"):
                continue
            sql = node.args[0]
            if isinstance(sql, ast.Name):  # a query built beforehand: follow its assignment
                sql = _assigned(tree, sql.id, node.lineno) or sql
            for value in ast.walk(sql):
                if isinstance(value, ast.FormattedValue):
                    found.append((path.relative_to(REPO).as_posix(), node.lineno, ast.unparse(value.value)))
            if isinstance(sql, ast.BinOp) or (
                isinstance(sql, ast.Call) and ast.unparse(sql.func).endswith("format")
            ):
                found.append((path.relative_to(REPO).as_posix(), node.lineno, ast.unparse(sql)))
    return found


def _assigned(tree: ast.Module, name: str, before: int) -> ast.AST | None:
    values = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and n.lineno < before
        and any(getattr(t, "id", None) == name for t in n.targets)
    ]
    return values[-1] if values else None


def test_sql_text_is_built_only_from_fixed_identifiers_and_numbers():
    """Values (paths, document content, header labels, ids) travel as parameters; what is formatted
    into SQL text is a schema identifier from the code or a number."""
    offending = []
    for file, line, expr in _sql_interpolations():
        head = expr.split("(")[0].split(".")[0].split("[")[0]
        is_number = expr.startswith(("int(", "float(")) or expr in ("i", "dim")
        if head not in FIXED_SQL_PARTS and not is_number:
            offending.append(f"{file}:{line}: {expr}")
    assert not offending, "values formatted into SQL text:\n" + "\n".join(offending)


def test_no_shell_anywhere():
    """Every child process is started with an argument list: no shell=True, os.system or os.popen."""
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                shell = any(k.arg == "shell" and ast.unparse(k.value) != "False" for k in node.keywords)
                if shell or name in (
                    "os.system",
                    "os.popen",
                    "subprocess.getoutput",
                    "subprocess.getstatusoutput",
                ):
                    offending.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}")
    assert not offending, offending


FRAGMENTS = [
    "<div", "</div>", '<div data-bbox="0 0 1000 1000" data-label="Table">', "<table>", "<tr>", "<td>",
    '<td colspan="100000">', "<math>", "<!--", "]]>", "&#x0;", "| a |", "|---|", "\n", "# ", "```", "$$",
    "<", ">", '"', "'", "\x00", "\ud7ff", "<img", "<br>", "</td></tr></table>",
]  # fmt: skip
model_output = st.one_of(
    st.text(max_size=3000),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=300).map("".join),
)


@pytest.mark.timeout(600)  # an endless loop in a parser fails here instead of hanging the suite
@settings(max_examples=200, deadline=3000, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PRESETS)), text=model_output)
def test_every_preset_parser_takes_any_model_output(name, text):
    """What the engines call on model output: the preset's parser returns a page or raises ParseError."""
    preset = get_preset(name)
    try:
        page = preset.parse(text, 612.0, 792.0)
    except ParseError:
        return
    assert [b.block_no for b in page.blocks] == list(range(len(page.blocks)))
