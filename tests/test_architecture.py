"""The module graph the README's Development section describes: no import cycle among the library's
modules, and the Airflow layer calls the stages, nothing below them."""

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


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """The chandra_ocr modules ``path`` imports (``from a import b`` counts as a.b when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chandra_ocr"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("chandra_ocr")}
    return found


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def test_no_import_cycle_among_the_library_modules():
    graph = {m: _imports(p, top_level_only=True) & MODULES.keys() for m, p in MODULES.items()}
    graph = {m: {d for d in deps if d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append([*path[path.index(d) :], d] if d in path else [m, d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    # a package importing its own submodules (chandra_ocr.stages → chandra_ocr.stages.load) is no cycle
    # unless a submodule imports the package back, which the search above would report
    assert not cycles, cycles


def test_the_airflow_layer_calls_the_stages_and_nothing_below_them():
    reached = {
        (m, d)
        for m, p in MODULES.items()
        if m.startswith("chandra_ocr.airflow")
        for d in _imports(p, top_level_only=False)
        if d.startswith(BELOW_THE_STAGES)
    }
    assert not reached, sorted(reached)


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
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
