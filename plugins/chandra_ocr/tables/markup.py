"""Tables from model output (HTML or Markdown pipe tables) → ``Table`` cell grids.

Grid rules (shared by every source):

- Cells are placed row by row, left to right, skipping positions already covered by a
  ``rowspan`` from above (the HTML table model). A cell appears once, at its top-left
  position, with its spans. ``n_rows`` / ``n_cols`` are the size of the resulting grid, so
  ragged rows simply leave uncovered positions (empty in ``grid``).
- Hostile sizes are bounded: spans are capped at ``MAX_SPAN``; a ``colspan`` is also capped at
  the table's plausible width (the widest row, counting each colspan as at most the largest
  number of cells in any row), so one absurd span cannot push the other cells out; a
  ``rowspan`` is clipped to the table's rows (``rowspan="0"`` spans the remaining rows). At
  most ``MAX_ROWS`` rows × ``MAX_COLS`` columns are read, the grid area is kept within
  ``MAX_CELLS``, and the work spent marking spanned positions is bounded by ``MAX_CELLS``.
- Header rows: the leading ``<thead>`` rows; else the leading rows made only of ``<th>``
  cells; else the first row if it *looks like a header* — the table has ≥ 2 rows, every
  first-row cell is non-empty and non-numeric (or a year, beside a text cell), and some later
  cell is a number other than a year (with the rows its cells span down to: a second header row
  under a spanning one); a first row of one cell spanning the table (a title) is passed over and
  counted as a header row. Markdown tables: the row above the delimiter row.
  Only cells in header rows get ``is_header`` (``<th>`` row headers in the body do not) and a
  ``header_level`` (the header row they start in, from 1); ``Table.header_rows`` counts the header
  rows, and ``Table.header`` holds one label per column: the column's header cells top to bottom,
  a cell spanning several columns (a group label) followed by " / " ("Literacy Status / Read &
  Write"), a cell of this column only (a wrapped line of one label: "Inference" over "time
  (secs)") by a space; a cell spanning rows counts once, empty ones not at all; title rows (one
  cell spanning every column) are left out — a title becomes the table's caption when it has none.
  ``Table.stub_head`` is the first column's label when that column holds row labels (text, not
  numbers, in most body rows).
"""

from __future__ import annotations

import dataclasses
import html
import logging
import re
from dataclasses import dataclass, field
from typing import Literal

from chandra_ocr.document import BBoxPt, Table, TableCell
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.html_text import Tag, html_to_text, iter_tokens

log = logging.getLogger(__name__)

MAX_SPAN = 1000
MAX_ROWS = 5000
MAX_COLS = 1000
MAX_CELLS = 250_000

_YEAR = re.compile(r"(?:19|20)\d\d")
_NUMERIC = re.compile(r"[-+±−(]?\s*[$€£¥]?\s*\d[\d\s,.]*%?\)?")
_DELIMITER_ROW = re.compile(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?")
_PIPE_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass
class _RawCell:
    text: str
    rowspan: int = 1
    colspan: int = 1
    is_th: bool = False


@dataclass
class _RawRow:
    cells: list[_RawCell] = field(default_factory=list)
    in_thead: bool = False


def find_tables(source: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the outermost ``<table>…</table>`` elements (unclosed: to the end)."""
    spans: list[tuple[int, int]] = []
    depth, start = 0, 0
    for tok in iter_tokens(source):
        if not isinstance(tok, Tag) or tok.name != "table":
            continue
        if not tok.closing:
            if depth == 0:
                start = tok.start
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((start, tok.end))
    if depth:
        spans.append((start, len(source)))
    return spans


def table_from_html(
    html: str,
    *,
    table_no: int,
    bbox: BBoxPt | None,
    source: Literal["html", "native", "markdown"] = "html",
    caption: str | None = None,
) -> Table:
    """The first table in ``html`` (or bare ``<tr>`` rows) as a ``Table``.

    ``caption`` wins over the table's own ``<caption>``. Raises ParseError when there are no cells.
    """
    spans = find_tables(html)
    fragment = html[spans[0][0] : spans[0][1]] if spans else html
    rows, own_caption = _html_rows(fragment, implicit_table=not spans)
    if not any(r.cells for r in rows):
        raise ParseError("no table cells found in the table HTML")
    n_header = _html_header_rows(rows)
    return _build(rows, n_header, table_no, bbox, source, caption or own_caption, fragment)


def table_from_rows(
    rows: list[list[tuple[str, int, int]]], *, table_no: int, bbox: BBoxPt | None, n_header: int | None = None
) -> Table:
    """Cells already cut into rows, ``(text, rowspan, colspan)`` each, as a native ``Table``.

    The same as ``table_from_html`` of the equivalent ``<tr>``/``<td>`` markup (kept as
    ``Table.html``, the first ``n_header`` rows in ``<thead>``) for texts with whitespace already
    collapsed, without parsing it back: header rows ``n_header`` when given, else by the rule for
    tables without ``<thead>``/``<th>``. Raises ParseError when there are no cells.
    """
    raw = [_RawRow([_RawCell(t, min(rs, MAX_SPAN), min(cs, MAX_SPAN)) for t, rs, cs in row]) for row in rows]
    if not any(r.cells for r in raw):
        raise ParseError("no table cells")
    if n_header is None:
        n_header = _html_header_rows(raw)
    return _build(raw, n_header, table_no, bbox, "native", None, _markup(rows, n_header))


def with_header_rows(table: Table, n_header: int) -> Table:
    """A native table (``table_from_rows``) found to have no header, with its first ``n_header`` rows
    as the header: cells marked, column labels and ``html`` as ``table_from_rows`` makes them."""
    rows: dict[int, list[tuple[str, int, int]]] = {}
    for cell in table.cells:  # row by row, left to right
        rows.setdefault(cell.row, []).append((cell.text, cell.rowspan, cell.colspan))
    return _with_header(dataclasses.replace(table, html=_markup(list(rows.values()), n_header)), n_header)


def _markup(rows: list[list[tuple[str, int, int]]], n_header: int) -> str:
    trs = ["<tr>" + "".join(map(_td, row)) + "</tr>" for row in rows]
    head = "<thead>" + "".join(trs[:n_header]) + "</thead><tbody>" if n_header else ""
    return "<table>" + head + "".join(trs[n_header:]) + ("</tbody>" if n_header else "") + "</table>"


def _td(cell: tuple[str, int, int]) -> str:
    text, rowspan, colspan = cell
    rs = f' rowspan="{rowspan}"' if rowspan > 1 else ""
    cs = f' colspan="{colspan}"' if colspan > 1 else ""
    return f"<td{rs}{cs}>{html.escape(text)}</td>"


def table_text(table: Table) -> str:
    """The table as plain text: a line per row, its cells joined by " | " (as ``html_to_text``
    renders a table's HTML), made from the cells."""
    rows: dict[int, list[str]] = {}
    for cell in table.cells:  # row by row, left to right
        rows.setdefault(cell.row, []).append(cell.text)
    lines = (" ".join(" | ".join(texts).split()) for texts in rows.values())
    return "\n".join(line for line in lines if line)


def table_from_markdown(
    md: str, *, table_no: int, bbox: BBoxPt | None = None, caption: str | None = None
) -> Table:
    """A Markdown pipe table (header row, delimiter row, body rows) as a ``Table``.

    Rows longer than the header keep their extra cells (OCR output is not trusted to be
    aligned). Without a delimiter row every line is a body row. Raises ParseError when no
    line has cells.
    """
    lines = [ln.strip() for ln in md.splitlines() if ln.strip()]
    n_header = 0
    if len(lines) >= 2 and _DELIMITER_ROW.fullmatch(lines[1]) and "-" in lines[1]:
        lines = [lines[0], *lines[2:]]
        n_header = 1
    rows = [_RawRow([_RawCell(c) for c in split_pipe_row(ln)]) for ln in lines[:MAX_ROWS]]
    rows = [r for r in rows if r.cells]
    if not rows:
        raise ParseError("no table rows found in the Markdown table")
    return _build(rows, min(n_header, len(rows)), table_no, bbox, "markdown", caption, None)


def split_pipe_row(line: str) -> list[str]:
    """Cells of one pipe-table line (outer pipes optional, ``\\|`` is a literal pipe)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    parts = _PIPE_SPLIT.split(line, maxsplit=MAX_COLS)[:MAX_COLS]
    return [" ".join(p.replace("\\|", "|").split()) for p in parts]


def grid(table: Table) -> list[list[str]]:
    """The dense ``n_rows × n_cols`` text grid; a spanned cell's text is repeated over its area.

    Positions no cell covers (ragged rows) are empty strings.
    """
    rows = [[""] * table.n_cols for _ in range(table.n_rows)]
    for cell in table.cells:
        for r in range(cell.row, min(cell.row + cell.rowspan, table.n_rows)):
            row = rows[r]
            for c in range(cell.col, min(cell.col + cell.colspan, table.n_cols)):
                row[c] = cell.text
    return rows


def _span(value: str | None) -> int:
    m = re.match(r"\s*\+?(\d{1,7})", value or "")
    return min(int(m.group(1)), MAX_SPAN) if m else 1


class _RowCollector:
    """Cuts one table's HTML into rows of raw cells (only the outermost table's structure)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.rows: list[_RawRow] = []
        self.in_thead = False
        self.cell: tuple[int, _RawCell] | None = None  # (content start offset, cell)
        self.caption_start: int | None = None
        self.caption = ""
        self.full = False  # MAX_ROWS reached: later rows are ignored

    def end_cell(self, at: int) -> None:
        if self.cell is not None:
            start, cell = self.cell
            cell.text = html_to_text(self.source[start:at], alt_fallback=False).replace("\n", " ")
            self.cell = None

    def start_cell(self, tok: Tag) -> None:
        self.end_cell(tok.start)
        if not self.rows:
            self.rows.append(_RawRow(in_thead=self.in_thead))
        row = self.rows[-1]
        if self.full or len(row.cells) >= MAX_COLS:
            return
        rowspan = _span(tok.attrs.get("rowspan"))
        colspan = _span(tok.attrs.get("colspan"))
        cell = _RawCell("", rowspan or MAX_SPAN, colspan or 1, tok.name == "th")
        row.cells.append(cell)
        self.cell = (tok.end, cell)

    def structural(self, tok: Tag) -> None:
        """A tag of the outermost table (depth 1)."""
        name, closing = tok.name, tok.closing
        if name in ("td", "th") and closing:
            self.end_cell(tok.start)
        elif name in ("td", "th"):
            self.start_cell(tok)
        elif name == "tr":
            self.end_cell(tok.start)
            if not closing:
                self.full = self.full or len(self.rows) >= MAX_ROWS
                if not self.full:
                    self.rows.append(_RawRow(in_thead=self.in_thead))
        elif name in ("thead", "tbody", "tfoot"):
            self.end_cell(tok.start)
            self.in_thead = name == "thead" and not closing
        elif name == "caption":
            if closing and self.caption_start is not None:
                self.caption = html_to_text(self.source[self.caption_start : tok.start]).replace("\n", " ")
                self.caption_start = None
            elif not closing:
                self.caption_start = tok.end


def _html_rows(source: str, *, implicit_table: bool) -> tuple[list[_RawRow], str | None]:
    collector = _RowCollector(source)
    depth = 1 if implicit_table else 0
    for tok in iter_tokens(source):
        if not isinstance(tok, Tag):
            continue
        if tok.name == "table":
            depth = depth + 1 if not tok.closing else max(0, depth - 1)
            if depth == 0:
                collector.end_cell(tok.start)
        elif depth == 1:
            collector.structural(tok)
    collector.end_cell(len(source))
    return collector.rows, collector.caption or None


def _is_numeric(text: str) -> bool:
    return bool(_NUMERIC.fullmatch(text.strip()))


def _html_header_rows(rows: list[_RawRow]) -> int:
    rows = [r for r in rows if r.cells]
    n = 0
    while n < len(rows) and rows[n].in_thead:
        n += 1
    if n:
        return n
    while n < len(rows) and all(c.is_th for c in rows[n].cells):
        n += 1
    if n:
        return n
    title = int(len(rows) >= 3 and len(rows[0].cells) == 1 and rows[0].cells[0].colspan > 1)
    cells = rows[title].cells if len(rows) > title else []
    first_is_label_row = (
        len(rows) >= 2 + title
        and all(_label_like(c.text) for c in cells)
        and any(not _is_numeric(c.text) for c in cells)
    )
    if first_is_label_row and any(
        _is_numeric(c.text) and not _YEAR.fullmatch(c.text.strip())
        for r in rows[1 + title :]
        for c in r.cells
    ):
        deepest = max(c.rowspan for c in cells)  # a header cell spanning rows down: those rows are header
        return min(title + deepest, len(rows) - 1)
    return 0


def _label_like(text: str) -> bool:
    """A header cell: text, or a year (columns by year)."""
    return bool(text) and (not _is_numeric(text) or bool(_YEAR.fullmatch(text.strip())))


def _place(rows: list[_RawRow]) -> list[tuple[int, int, int, int, _RawCell]]:
    """Grid positions (row, col, rowspan, colspan, cell) following the HTML table model."""
    n_rows = len(rows)
    widest = max(len(r.cells) for r in rows)
    width = min(MAX_COLS, max(sum(min(c.colspan, widest) for c in r.cells) for r in rows))
    covered: list[set[int]] = [set() for _ in range(n_rows)]  # positions taken by rowspans from above
    placed = []
    marks = 0
    for r, row in enumerate(rows):
        c = 0
        for cell in row.cells:
            while c in covered[r]:
                c += 1
            if c >= MAX_COLS:
                break
            colspan = min(cell.colspan, width, MAX_COLS - c)
            rowspan = min(cell.rowspan, n_rows - r)
            if rowspan > 1 and marks + (rowspan - 1) * colspan > MAX_CELLS:
                rowspan = 1 + max(0, MAX_CELLS - marks) // colspan
            for rr in range(r + 1, r + rowspan):
                covered[rr].update(range(c, c + colspan))
            marks += (rowspan - 1) * colspan
            placed.append((r, c, rowspan, colspan, cell))
            c += colspan
    return placed


def _build(
    rows: list[_RawRow],
    n_header: int,
    table_no: int,
    bbox: BBoxPt | None,
    source: Literal["html", "native", "markdown"],
    caption: str | None,
    html: str | None,
) -> Table:
    rows = [r for r in rows if r.cells]
    placed = _place(rows)
    n_cols = max(c + cs for _, c, _, cs, _ in placed)
    n_rows = len(rows)
    if n_rows * n_cols > MAX_CELLS:
        n_rows = max(1, MAX_CELLS // n_cols)
        log.warning("table %d truncated to %d rows × %d columns (grid limit)", table_no, n_rows, n_cols)
    n_header = min(n_header, n_rows)
    cells = tuple(
        TableCell(r, c, cell.text, min(rs, n_rows - r), cs) for r, c, rs, cs, cell in placed if r < n_rows
    )
    table = Table(table_no, bbox, n_rows, n_cols, (), source, cells, html=html, caption=caption)
    return _with_header(table, n_header)


def _with_header(table: Table, n_header: int) -> Table:
    """``table`` with its first ``n_header`` rows as the header: cells marked with their level, column
    labels (a header row of one cell spanning every column is a title: the caption, when the table
    has none, not part of every column's name) and the stub head."""
    cells = tuple(
        dataclasses.replace(
            c, is_header=c.row < n_header, header_level=c.row + 1 if c.row < n_header else None
        )
        for c in table.cells
    )
    table = dataclasses.replace(table, cells=cells, header_rows=n_header)
    if not n_header:
        return table
    titles = [c for c in cells if c.row < n_header and c.colspan == table.n_cols and table.n_cols > 1]
    skip = {c.row for c in titles}
    caption = table.caption or (titles[0].text if titles else None)
    head = [cell for cell in cells if cell.row < n_header and cell.row not in skip and cell.text]
    labels = []
    for col in range(table.n_cols):
        label, last = "", None
        for cell in sorted((c for c in head if c.col <= col < c.col + c.colspan), key=lambda c: c.row):
            if last is None:
                label = cell.text
            elif cell.text != last.text:  # under a group label over several columns, or a wrapped line
                label += (" / " if last.colspan > 1 else " ") + cell.text
            last = cell
        labels.append(label)
    stub = labels[0] if _row_labels(table, head) else None
    return dataclasses.replace(table, header=tuple(labels), caption=caption, stub_head=stub)


def _row_labels(table: Table, head: list[TableCell]) -> bool:
    """Whether the first column holds row labels: text other than numbers in most body rows, under a
    header of its own (no label over it spans further columns)."""
    if table.n_cols < 2 or any(c.col == 0 and c.colspan > 1 for c in head):
        return False
    first = [c.text for c in table.cells if c.col == 0 and not c.is_header and c.colspan == 1]
    labels = sum(1 for t in first if t and not _is_numeric(t))
    return labels > 0 and 2 * labels >= table.n_rows - table.header_rows
