"""Table accuracy metric: exact-cell match after whitespace normalisation over aligned grids.

Rows and columns of the expected and the extracted grid are aligned monotonically (dynamic
programming, as in a sequence alignment): rows by how many non-empty cell texts they share,
then columns by how many aligned-row cells agree. A cell matches when both normalised texts
are equal and non-empty. The score of one table is

    matched cells / max(non-empty expected cells, non-empty extracted cells)

so missing, wrong and extra cells all cost; 1.0 is a perfect table. Alignment keeps a split or
merged header row from shifting every cell below it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from chandra_ocr.document import Table
from chandra_ocr.tables.markup import grid


def norm(text: str | None) -> str:
    """Whitespace collapsed to single spaces, ends stripped."""
    return " ".join((text or "").split())


def anchor_grid(table: Table) -> list[list[str]]:
    """The table's grid with a spanned cell's text only at its top-left position (others empty)."""
    rows = [[""] * table.n_cols for _ in range(table.n_rows)]
    for cell in table.cells:
        rows[cell.row][cell.col] = cell.text
    return rows


def filled_grid(table: Table) -> list[list[str]]:
    """The table's grid with a spanned cell's text repeated over its area."""
    return grid(table)


def _align(n: int, m: int, score: Callable[[int, int], int]) -> list[tuple[int, int]]:
    """Monotone pairs (i, j) maximising the summed score (Needleman–Wunsch without gap costs)."""
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = max(best[i + 1][j], best[i][j + 1], best[i + 1][j + 1] + score(i, j))
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        s = score(i, j)
        if s and best[i][j] == best[i + 1][j + 1] + s:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def align_grids(
    expected: list[list[str]], got: list[list[str]]
) -> tuple[list[list[str]], list[list[str]], list[tuple[int, int]], list[tuple[int, int]]]:
    """Both grids normalised and padded, with the aligned (row, row) and (column, column) pairs."""
    exp = [[norm(c) for c in row] for row in expected]
    out = [[norm(c) for c in row] for row in got]
    width_e = max((len(r) for r in exp), default=0)
    width_o = max((len(r) for r in out), default=0)
    exp = [r + [""] * (width_e - len(r)) for r in exp]
    out = [r + [""] * (width_o - len(r)) for r in out]

    def row_score(i: int, j: int) -> int:
        a = Counter(c for c in exp[i] if c)
        b = Counter(c for c in out[j] if c)
        return sum((a & b).values())

    rows = _align(len(exp), len(out), row_score)

    def col_score(k: int, x: int) -> int:
        return sum(1 for i, j in rows if exp[i][k] and exp[i][k] == out[j][x])

    return exp, out, rows, _align(width_e, width_o, col_score)


def cell_match(expected: list[list[str]], got: list[list[str]]) -> float:
    """The score defined in the module docstring (0.0 for an empty pair)."""
    exp, out, rows, cols = align_grids(expected, got)
    matched = sum(1 for i, j in rows for k, x in cols if exp[i][k] and exp[i][k] == out[j][x])
    total = max(sum(1 for r in exp for c in r if c), sum(1 for r in out for c in r if c))
    return matched / total if total else 0.0
