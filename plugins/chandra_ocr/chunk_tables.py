"""A table as text a retriever understands: its title, its columns, then one line per row.

``TableText.of(table)`` reads a table grid into

- ``title``: the caption and the rows above the column headers that carry one text across the
  table (a statement's name, "(in millions, except per share data)");
- ``columns``: each column's name, its header cells joined top to bottom ("Read & Write / 1-4 std.");
- ``rows``: each body row as "label — column: value; column: value", the label being the row's
  leading text cells, empty cells and lone currency or percent signs left out; a header part that
  most value columns share ("Year Ended December 31, / 2019") is left out of the row lines, which
  name the column by the rest ("2019: 11,588"): the columns line says it once.

Row lines never depend on each other, so a long table is split between rows, each part repeating
the title and the columns (``chunking``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from chandra_ocr.document import Table
from chandra_ocr.tables.markup import grid

_SIGN = re.compile(r"^[\s$€£¥%()—–-]*$")  # no text of its own: currency, percent, parentheses, dashes
_YEAR = re.compile(r"^(?:fiscal\s+)?(?:19|20)\d\d$", re.IGNORECASE)
_TRAILING_SIGN = re.compile(r"\s*[$€£¥]+$")
_NUMBER = re.compile(r"^[\s$€£¥(+\-−–—]*[\d.,]+[\s%)]*$|^[\s—–-]+$")


@dataclass(frozen=True)
class TableText:
    """A table's title lines, column names and row lines (see the module doc)."""

    title: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[str, ...]

    @classmethod
    def of(cls, table: Table, caption: str | None = None) -> TableText:
        cells = [[_clean(c) for c in row] for row in grid(table)]
        n_header = max(1, max((c.row + c.rowspan for c in table.cells if c.is_header), default=1))
        title = [caption.strip()] if caption and caption.strip() else []
        label_cols = _label_columns(cells[n_header:] or cells)
        if table.stub_head is not None:  # the reader saw a row-label column
            label_cols = max(label_cols, 1)
        while cells and (text := _title_text(cells[0], label_cols)) is not None:
            if text and text not in title:
                title.append(text)
            cells.pop(0)
            n_header -= 1
        header, body = cells[: max(n_header, 0)], cells[max(n_header, 0) :]
        while (
            label_cols
            and len(body) > 1
            and _header_like(body[0], label_cols)
            and any(not _header_like(row, label_cols) for row in body[1:])
        ):  # a row without a label, or of years alone, above the data rows: a header row
            row = body.pop(0)
            label = " ".join(t for t in row[:label_cols] if t)
            if label and label not in title:
                title.append(label)  # "(Dollars in millions)" beside the years
            header.append([""] * label_cols + row[label_cols:])
        names = _column_names(header, table.n_cols)
        short = _without_shared_part(names, label_cols)
        rows = tuple(line for row in body if (line := _row_line(row, short, label_cols)))
        return cls(tuple(title), tuple(names), rows)

    def head(self) -> list[str]:
        """The lines every part of the table repeats: title, then the columns."""
        names = [n for n in dict.fromkeys(self.columns) if n]
        return [*self.title, f"Columns: {'; '.join(names)}"] if names else list(self.title)


def _clean(text: str) -> str:
    return " ".join(text.split())


def _title_text(row: list[str], label_cols: int) -> str | None:
    """The text of a title row ("" for an empty row), else None: one text, not a number, starting in
    the row-label columns (a header over the value columns starts further right)."""
    filled = [i for i, c in enumerate(row) if c]
    if not filled:
        return ""
    texts = {row[i] for i in filled}
    if len(texts) != 1 or len(row) < 2:
        return None
    (text,) = texts
    if _NUMBER.match(text) or _SIGN.match(text):
        return None
    return text if filled[0] < max(label_cols, 1) else None


def _header_like(row: list[str], label_cols: int) -> bool:
    """A row of column labels: values but no row label, or values that are all years."""
    values = [t for t in row[label_cols:] if t and not _SIGN.match(t)]
    if not values:
        return False
    return not any(row[:label_cols]) or all(_YEAR.match(t) for t in values)


def _column_names(header: list[list[str]], n_cols: int) -> list[str]:
    """Each column's header texts joined top to bottom (repeats of a spanned cell said once)."""
    names = []
    for col in range(n_cols):
        parts: list[str] = []
        for row in header:
            text = row[col] if col < len(row) else ""
            if text and not _SIGN.match(text) and text not in parts:
                parts.append(text)
        names.append(" / ".join(parts))
    return names


def _label_columns(body: list[list[str]]) -> int:
    """How many leading columns hold row labels: those whose filled cells are mostly not numbers."""
    if not body:
        return 0
    n = 0
    for col in range(len(body[0])):
        filled = [row[col] for row in body if row[col]]
        if filled and sum(1 for t in filled if _NUMBER.match(t) or _SIGN.match(t)) * 2 > len(filled):
            break
        n += 1
    return min(n, max(len(body[0]) - 1, 0))


def _without_shared_part(names: list[str], label_cols: int) -> list[str]:
    """The names with the leading header part most named value columns share ("Year Ended December
    31,") cut off the value columns' names (a column named by that part alone keeps its name)."""
    firsts = Counter(n.split(" / ")[0] for n in names[label_cols:] if " / " in n)
    if not firsts or firsts.most_common(1)[0][1] < 2:
        return names
    cut = firsts.most_common(1)[0][0] + " / "
    return [n[len(cut) :] if i >= label_cols and n.startswith(cut) else n for i, n in enumerate(names)]


def _row_line(row: list[str], names: list[str], label_cols: int) -> str:
    """One body row as "label — column: value; …" ("" for an empty row)."""
    label = _TRAILING_SIGN.sub("", " ".join(dict.fromkeys(t for t in row[:label_cols] if t)))
    values = []
    for col in range(label_cols, len(row)):
        text = row[col]
        if not text or _SIGN.match(text):
            continue
        if col > label_cols and text == row[col - 1]:
            continue  # a spanned cell, said once
        name = names[col] if col < len(names) else ""
        values.append(f"{name}: {_TRAILING_SIGN.sub('', text)}" if name and name != text else text)
    if not values:
        return label
    return f"{label} — {'; '.join(values)}" if label else "; ".join(values)
