"""A text-layer page's tables, ruled and unruled, and its blocks with each word in exactly one of them.

- Ruled tables first (``tables/native.py``, searched only when the drawn edges enclose cells),
  then partly ruled ones (``tables/partly_ruled.py``, searched only in frames of drawn rules), then
  tables from word alignment (``tables/stream.py``) among the words no ruled table
  holds (nor page headers/footers), searched only when at least ``MIN_ROW_SPLITS`` text lines
  start beside another line on the same row (``TextStats.row_splits``, counted in the one text
  pass) or the drawn edges enclose cells.
- Blocks: a text block keeps the words no table took (rebuilt from them when some were taken,
  dropped when none are left), so every word of the page is in one block, a table's words in
  its ``table`` block only. A table block takes the place of the first block it took words from.
- Header rows: each reader's text rules; a table left without a header gets its bold leading rows
  (``tables/bold_header.py``) when its body is not bold.
- Captions: a block directly before (preferred) or after a table that starts like "Table 3"
  becomes the table's ``caption``.
"""

from __future__ import annotations

import dataclasses
import re

import pymupdf

from chandra_ocr.document import Block, Table
from chandra_ocr.errors import ParseError
from chandra_ocr.pdf.text_layer import join_lines
from chandra_ocr.tables.alignment import StreamTable
from chandra_ocr.tables.bold_header import bold_headers
from chandra_ocr.tables.frames import frames
from chandra_ocr.tables.markup import table_from_rows, table_text
from chandra_ocr.tables.native import ruled_tables
from chandra_ocr.tables.partly_ruled import partly_ruled_tables
from chandra_ocr.tables.ruled_grid import has_cells
from chandra_ocr.tables.rules import Word, drawn_rules, merge_edges, page_words
from chandra_ocr.tables.stream import stream_tables

_CAPTION = re.compile(r"^\s*(?:table|tab\.|tabelle|tableau|tabla)\s*[A-Z]?[\dIVXLC]+\b", re.IGNORECASE)
_EDGE = ("page_header", "page_footer")
MIN_ROW_SPLITS = 6  # fewer side-by-side text lines: no table from word alignment is searched for


def page_tables(
    page: pymupdf.Page, blocks: list[Block], textpage: pymupdf.TextPage | None = None, row_splits: int = 0
) -> tuple[list[Block], list[Table]]:
    """The tables of ``page`` (reading order, numbered from 1) and ``blocks`` with table blocks in place.

    ``blocks``: the page's text blocks (``text_layer.read_page``); ``row_splits``: its
    ``TextStats.row_splits``; ``textpage``: its text extracted with ``TEXT_FLAGS``, if at hand.
    """
    rules = drawn_rules(page, page.get_cdrawings())
    ruled = rules if rules is not None and has_cells(rules) else None
    framed = frames(rules) if rules is not None else []
    aligned = ruled is not None or row_splits >= MIN_ROW_SPLITS  # worth reading by word alignment
    if not aligned and not framed:
        return blocks, []
    words = page_words(page, textpage)
    found = ruled_tables(page, ruled, words) if ruled is not None else []
    taken = frozenset().union(*(used for _, used in found))
    boxes = [t.bbox for t, _ in found if t.bbox]
    boxes += [b.bbox for b in blocks if b.label in _EDGE and b.bbox]  # running lines: no cells
    free = [i for i, w in enumerate(words) if i not in taken and not _centre_in_any(w, boxes)]
    for st in partly_ruled_tables([words[i] for i in free], framed) if framed else []:
        found += _found(st, free)
    taken = frozenset().union(*(used for _, used in found))
    free = [i for i in free if i not in taken]
    h_rules = rules.h if rules is not None else []
    v_rules = merge_edges(rules.drawn_v) if rules is not None and rules.drawn_v and aligned else []
    for st in stream_tables([words[i] for i in free], h_rules, v_rules) if aligned else []:
        found += _found(st, free)
    if not page.rotation and found:  # spans are read in unrotated space
        tables = bold_headers(page, [table for table, _ in found], textpage)
        found = [(table, used) for table, (_, used) in zip(tables, found, strict=True)]
    return with_table_blocks(blocks, words, found)


def _found(st: StreamTable, free: list[int]) -> list[tuple[Table, frozenset[int]]]:
    """[(table, its page words' indices)] for a table read from the words at ``free``; [] without text."""
    try:
        return [(_to_table(st), frozenset(free[i] for i in st.words))]
    except ParseError:
        return []


def _to_table(st: StreamTable) -> Table:
    x0, y0, x1, y1 = st.bbox
    bbox = (round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2))
    return table_from_rows(_padded(st), table_no=0, bbox=bbox, n_header=st.n_header)


def _padded(st: StreamTable) -> list[list[tuple[str, int, int]]]:
    """Rows of (text, rowspan, colspan) with empty cells where a row has no text in a column (nor a
    cell spanning down from a row above)."""
    rows: list[list[tuple[str, int, int]]] = []
    by_row: dict[int, list[tuple[int, int, int, str]]] = {}
    for r, c, rs, cs, text in st.cells:
        by_row.setdefault(r, []).append((c, rs, cs, text))
    below: set[tuple[int, int]] = set()  # positions covered by a cell spanning down from above
    for r in range(st.n_rows):
        row: list[tuple[str, int, int]] = []
        cells = {c: (rs, cs, text) for c, rs, cs, text in by_row.get(r, [])}
        col = 0
        while col < st.n_cols:
            if (r, col) in below:
                col += 1
            elif col in cells:
                rs, cs, text = cells[col]
                row.append((text, rs, cs))
                below |= {(r + k, col + j) for k in range(1, rs) for j in range(cs)}
                col += cs
            else:
                row.append(("", 1, 1))
                col += 1
        rows.append(row)
    return rows


def with_table_blocks(
    blocks: list[Block], words: list[Word], found: list[tuple[Table, frozenset[int]]]
) -> tuple[list[Block], list[Table]]:
    """``blocks`` with the words of each table moved into its ``table`` block; tables get captions.

    ``found``: (table, indices of the ``words`` in it). Blocks are renumbered; tables are numbered
    in reading order.
    """
    if not found:
        return blocks, []
    owner = _owners(blocks, words)
    out: list[Block] = []
    placed: set[int] = set()
    by_word = {i: n for n, (_, used) in enumerate(found) for i in used}
    for b, mine in zip(blocks, owner, strict=True):
        tables_here = sorted({by_word[i] for i in mine if i in by_word})
        for n in tables_here:
            if n not in placed:
                placed.add(n)
                out.append(_table_block(found[n][0]))
        if not tables_here:
            out.append(b)
            continue
        rest = [i for i in mine if i not in by_word]
        if rest:
            out.append(
                dataclasses.replace(b, text=_text_of([words[i] for i in rest]), bbox=_box(words, rest))
            )
    for n, (table, _) in enumerate(found):  # tables whose words no block holds: by position
        if n not in placed:
            assert table.bbox is not None, "a table found in the PDF without a box"  # found by position
            top = table.bbox[1]
            at = next((i for i, b in enumerate(out) if b.bbox and b.bbox[1] > top), len(out))
            out.insert(at, _table_block(table))
    tables = [t for t, _ in found]
    out, tables = _captions(out, tables)
    order = {b.bbox: n for n, b in enumerate(b for b in out if b.label == "table")}
    tables = sorted(tables, key=lambda t: order.get(t.bbox, len(order)))
    tables = [dataclasses.replace(t, table_no=n) for n, t in enumerate(tables, start=1)]
    numbers = {t.bbox: t.table_no for t in tables}
    out = [dataclasses.replace(b, table_no=numbers.get(b.bbox)) if b.label == "table" else b for b in out]
    return [dataclasses.replace(b, block_no=i) for i, b in enumerate(out)], tables


def _owners(blocks: list[Block], words: list[Word]) -> list[list[int]]:
    """For each block, the indices of its words: those of the MuPDF block whose words' box matches
    its box best, one MuPDF block per block (the text layer makes one block of each MuPDF block, so
    each word is in one block; blocks drawn over each other get one MuPDF block each)."""
    by_mupdf: dict[int, list[int]] = {}
    for i, w in enumerate(words):
        by_mupdf.setdefault(w[5], []).append(i)
    boxes = [b.bbox if b.bbox and b.label != "table" else None for b in blocks]
    pairs = []
    for key, ids in by_mupdf.items():
        x0, y0, x1, y1 = box = _box(words, ids)
        pairs += [
            (-score, n, key)
            for n, other in enumerate(boxes)  # the cheap test first: boxes apart score 0
            if other and other[0] <= x1 and x0 <= other[2] and other[1] <= y1 and y0 <= other[3]
            if (score := _iou(other, box))
        ]
    owner: list[list[int]] = [[] for _ in blocks]
    taken: set[int] = set()
    for _, n, key in sorted(pairs):
        if not owner[n] and key not in taken:
            owner[n] = by_mupdf[key]
            taken.add(key)
    return owner


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Intersection over union of two boxes; a box without area counts as a thin one."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w < 0 or h < 0:
        return 0.0
    inter = max(w, 0.1) * max(h, 0.1)
    area_a = max(a[2] - a[0], 0.1) * max(a[3] - a[1], 0.1)
    area_b = max(b[2] - b[0], 0.1) * max(b[3] - b[1], 0.1)
    return inter / (area_a + area_b - inter)


def _centre_in_any(w: Word, boxes: list[tuple[float, float, float, float]]) -> bool:
    x, y = (w[0] + w[2]) / 2, (w[1] + w[3]) / 2
    return any(b[0] <= x <= b[2] and b[1] <= y <= b[3] for b in boxes)


def _text_of(words: list[Word]) -> str:
    """Words (in MuPDF's order) as block text: lines joined as the text layer joins them."""
    lines: dict[tuple[int, int], list[str]] = {}
    for w in sorted(words, key=lambda w: (w[5], w[6], w[7])):
        lines.setdefault((w[5], w[6]), []).append(w[4])
    return join_lines([" ".join(line) for line in lines.values()])


def _box(words: list[Word], ids: list[int]) -> tuple[float, float, float, float]:
    return (
        round(min(words[i][0] for i in ids), 2),
        round(min(words[i][1] for i in ids), 2),
        round(max(words[i][2] for i in ids), 2),
        round(max(words[i][3] for i in ids), 2),
    )


def _table_block(table: Table) -> Block:
    return Block(0, "table", table.bbox, table_text(table), html=table.html)


def _captions(blocks: list[Block], tables: list[Table]) -> tuple[list[Block], list[Table]]:
    """Label "Table N …" blocks next to table blocks as captions; tables get the caption text.

    A caption's second line set as its own block ("Table 3. Savings" over "by region, 2004") is
    joined to it when it is one short line between the caption and the table.
    """
    blocks = _join_caption_lines(blocks)
    by_bbox = {t.bbox: t for t in tables}
    taken: set[int] = set()
    for i, b in enumerate(blocks):
        if b.label != "table" or b.bbox not in by_bbox:
            continue
        for j in (i - 1, i + 1):
            if 0 <= j < len(blocks) and j not in taken and _is_caption(blocks[j]):
                taken.add(j)
                blocks[j] = dataclasses.replace(blocks[j], label="caption", level=None)
                by_bbox[b.bbox] = dataclasses.replace(by_bbox[b.bbox], caption=blocks[j].text)
                break
    return blocks, [by_bbox[t.bbox] for t in tables]


def _join_caption_lines(blocks: list[Block]) -> list[Block]:
    out: list[Block] = []
    for i, b in enumerate(blocks):
        follows_caption = out and _is_caption(out[-1]) and not _is_caption(b)
        before_table = i + 1 < len(blocks) and blocks[i + 1].label == "table"
        short = b.label in ("text", "section_header") and "\n" not in b.text and len(b.text) <= 100
        if follows_caption and before_table and short and b.bbox and out[-1].bbox:
            box = out[-1].bbox
            joined = (min(box[0], b.bbox[0]), box[1], max(box[2], b.bbox[2]), max(box[3], b.bbox[3]))
            out[-1] = dataclasses.replace(out[-1], text=out[-1].text + " " + b.text, bbox=joined)
        else:
            out.append(b)
    return out


def _is_caption(block: Block) -> bool:
    return block.label in ("text", "section_header") and bool(_CAPTION.match(block.text))
