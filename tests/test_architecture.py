"""The module graph the README's Development section describes: no import cycle among the library's
modules (counting every import, those inside functions too), the Airflow layer calls the stages and
nothing below them, and the rooms' modules stay the size of one job."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "plugins" / "chandra_ocr"
# What the Airflow layer must not reach past the stages for.
BELOW_THE_STAGES = (
    "chandra_ocr.pdf.workers",
    "chandra_ocr.ocr.registry",
    "chandra_ocr.store.duckdb_store",
    "chandra_ocr.stages.extract",
    "chandra_ocr.stages.fallback",
    "chandra_ocr.stages.write",
    "chandra_ocr.pipeline",
)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every chandra_ocr module ``path`` imports, at any depth: top level, inside functions and under
    ``if TYPE_CHECKING`` (``from a import b`` counts as a.b when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chandra_ocr"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("chandra_ocr")}
    return found


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}
# Packages whose modules are held to the size of one job (the issue-50 rooms); widen as rooms land.
MAX_LINES = 420  # "no product module over ~400 lines"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan): each imports itself through
    the others, whatever the import's depth in the file."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for d in sorted(graph[m]):
            if d not in index:
                visit(d)
                low[m] = min(low[m], low[d])
            elif d in on_stack:
                low[m] = min(low[m], index[d])
        if low[m] == index[m]:
            group = []
            while True:
                d = stack.pop()
                on_stack.discard(d)
                group.append(d)
                if d == m:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return groups


def test_no_import_cycle_among_the_library_modules():
    """No circle counting every import, those inside functions included (an import moved into a
    function to break a circle at import time still ties the two modules together)."""
    graph = {m: (_imports(p) & MODULES.keys()) - {m} for m, p in MODULES.items()}
    circles = [
        [f"{a} -> {b}" for a in group for b in sorted(graph[a]) if b in group] for group in _circles(graph)
    ]
    assert not circles, circles


def test_the_circle_finder_sees_a_circle_through_a_function_level_import(tmp_path):
    """The check above can fail: a circle closed by an import inside a function is found."""
    (tmp_path / "a.py").write_text("from chandra_ocr.b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from chandra_ocr.a import g\n")
    graph = {f"chandra_ocr.{m}": _imports(tmp_path / f"{m}.py") for m in ("a", "b")}
    assert graph == {"chandra_ocr.a": {"chandra_ocr.b"}, "chandra_ocr.b": {"chandra_ocr.a"}}
    assert _circles(graph) == [["chandra_ocr.a", "chandra_ocr.b"]]
    assert _circles({"chandra_ocr.a": {"chandra_ocr.b"}, "chandra_ocr.b": set()}) == []


def test_no_module_of_the_library_is_over_the_size_of_one_job():
    """No module of the library is over ``MAX_LINES`` lines."""
    long = {
        m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_airflow_layer_calls_the_stages_and_nothing_below_them():
    reached = {
        (m, d)
        for m, p in MODULES.items()
        if m.startswith("chandra_ocr.airflow")
        for d in _imports(p)
        if d.startswith(BELOW_THE_STAGES)
    }
    assert not reached, sorted(reached)


def test_the_dag_files_parse_without_the_libraries_the_tasks_use():
    """Airflow parses a DAG file in every task process before the task runs, within
    ``core.dagbag_import_timeout`` (30 s): the operators import the stages (PyMuPDF, Arrow, DuckDB,
    LangChain, Pillow) as they run, not at parse time, where on a busy two-core machine they took
    that long."""
    import subprocess
    import sys

    heavy = ("pymupdf", "pyarrow", "duckdb", "langchain_text_splitters", "langchain_core", "PIL", "pebble",
             "numpy", "matplotlib", "openai")  # fmt: skip
    probe = (
        "import runpy, sys; from airflow.sdk.execution_time import task_runner; "
        "[runpy.run_path(p) for p in sys.argv[2:]]; "
        "print(sorted(m for m in sys.argv[1].split(',') if m in sys.modules))"
    )
    dags = sorted(str(p) for p in (PACKAGE.parents[1] / "dags").glob("*.py"))
    out = subprocess.run([sys.executable, "-c", probe, ",".join(heavy), *dags],
                         capture_output=True, text=True, check=True, timeout=600)  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_a_triage_worker_imports_neither_duckdb_nor_arrow():
    """A worker unpickling the extract stage's worker function imports its module alone: under the
    300 MB address-space cap of the memory test, DuckDB or Arrow would not even load."""
    import subprocess
    import sys

    probe = (
        "import sys, chandra_ocr.stages.extract as e; e.triage_and_checkpoint; "
        "print(sorted(m for m in ('duckdb', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=600
    )
    assert out.stdout.strip() == "[]"
