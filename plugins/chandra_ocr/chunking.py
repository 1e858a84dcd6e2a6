"""Blocks → retrieval chunks: header-aware, size-limited, tables whole (or split by rows).

Sizes are measured with ``token_count``, a documented proxy for sub-word tokens that needs
no vocabulary download: the number of words plus the number of punctuation marks. For
English prose it is within ~20 % of BPE tokenisers such as cl100k (BPE counts run higher).
Long blocks are split with langchain's ``RecursiveCharacterTextSplitter`` using that measure.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from langchain_text_splitters import RecursiveCharacterTextSplitter

from chandra_ocr.config import ChunkOptions
from chandra_ocr.document import Block, Chunk, Document, Table
from chandra_ocr.tables.markup import grid

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SKIP = {"page_header", "page_footer"}
_HEADINGS = {"section_header", "title"}


def token_count(text: str) -> int:
    """Tokens by the documented proxy: words + punctuation marks."""
    return len(_TOKEN.findall(text))


@dataclass
class _Piece:
    text: str
    page_no: int
    bbox: tuple[int, float, float, float, float] | None


@dataclass
class _Draft:
    kind: str
    header_path: tuple[str, ...]
    pieces: list[_Piece] = field(default_factory=list)
    tokens: int = 0  # of the pieces so far (the chunk's n_tokens): counts add up, no token spans a line break

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.pieces)


def chunk_document(doc: Document, options: ChunkOptions) -> list[Chunk]:
    """Split a document's pages into chunks with stable ids and provenance."""
    drafts = _drafts(doc, options)
    seen: Counter[tuple[tuple[str, ...], str]] = Counter()
    chunks: list[Chunk] = []
    for draft in drafts:
        text = draft.text
        key = (draft.header_path, text)
        chunk_id = _chunk_id(doc.doc_id, draft.header_path, text, seen[key])
        seen[key] += 1
        pages = [p.page_no for p in draft.pieces]
        chunks.append(
            Chunk(
                chunk_id=chunk_id,
                doc_id=doc.doc_id,
                chunk_no=len(chunks),
                kind=draft.kind,  # type: ignore[arg-type]
                text=text,
                n_tokens=draft.tokens,
                header_path=draft.header_path,
                page_start=min(pages),
                page_end=max(pages),
                bboxes=tuple(dict.fromkeys(p.bbox for p in draft.pieces if p.bbox is not None)),
            )
        )
    return chunks


def _chunk_id(doc_id: str, header_path: tuple[str, ...], text: str, occurrence: int) -> str:
    """Content-addressed id: unchanged text under the same headings keeps its id when other parts move."""
    payload = "\x1f".join([doc_id, "\x1e".join(header_path), text, str(occurrence)])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _drafts(doc: Document, options: ChunkOptions) -> list[_Draft]:
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=options.max_tokens, chunk_overlap=options.overlap_tokens, length_function=token_count
    )
    headers: list[tuple[int, str]] = []
    drafts: list[_Draft] = []
    current: _Draft | None = None
    for page in doc.pages:
        tables = {t.table_no: t for t in page.tables}
        blocks = [b for b in page.blocks if b.label not in _SKIP and b.text.strip()]
        captions = _table_captions(blocks)
        for block in blocks:
            if block.block_no in captions.values():
                continue
            if block.label in _HEADINGS:
                level = block.level or (1 if block.label == "title" else 2)
                headers = [h for h in headers if h[0] < level] + [(level, " ".join(block.text.split()))]
                current = None
                continue
            path = tuple(h[1] for h in headers)
            if block.label == "table":
                table = tables.get(block.table_no) if block.table_no is not None else None
                caption = next((b.text for b in blocks if b.block_no == captions.get(block.block_no)), None)
                drafts.extend(_table_drafts(block, table, caption, path, page.page_no, options))
                current = None
                continue
            text = block.text.strip()
            pieces = [(text, token_count(text))]
            if pieces[0][1] > options.max_tokens:
                pieces = [(t, token_count(t)) for t in splitter.split_text(text)]
            for text, n in pieces:
                piece = _Piece(text, page.page_no, _bbox(page.page_no, block))
                if current is None or current.tokens + n > options.max_tokens:
                    current = _Draft("text", path)
                    drafts.append(current)
                current.pieces.append(piece)
                current.tokens += n
    return drafts


def _table_captions(blocks: list[Block]) -> dict[int, int]:
    """Map table block_no → the caption block_no directly before (preferred) or after it."""
    pairs: dict[int, int] = {}
    used: set[int] = set()
    for i, block in enumerate(blocks):
        if block.label != "table":
            continue
        for j in (i - 1, i + 1):
            if 0 <= j < len(blocks) and blocks[j].label == "caption" and blocks[j].block_no not in used:
                pairs[block.block_no] = blocks[j].block_no
                used.add(blocks[j].block_no)
                break
    return pairs


def _table_drafts(
    block: Block,
    table: Table | None,
    caption: str | None,
    path: tuple[str, ...],
    page_no: int,
    options: ChunkOptions,
) -> list[_Draft]:
    """A table as one chunk (caption + Markdown grid), or row groups with the header repeated."""
    bbox = _bbox(page_no, block)
    head = [caption.strip()] if caption else []
    if table is None or not table.cells:
        return [_table_draft(path, "\n\n".join([*head, block.text.strip()]), page_no, bbox)]
    rows = grid(table)
    n_header = max(1, max((c.row + c.rowspan for c in table.cells if c.is_header), default=1))
    header_rows, body = rows[:n_header], rows[n_header:]
    header_md = _markdown_rows(header_rows, separator=True)
    whole = "\n".join([*head, header_md, *(_markdown_rows([r]) for r in body)])
    n_whole = token_count(whole)
    if n_whole <= options.max_tokens or not body:
        return [_table_draft(path, whole, page_no, bbox, n_whole)]
    context = _repeated_context(head, header_md, table, options.max_tokens)
    drafts: list[_Draft] = []
    group: list[str] = []
    group_tokens = 0
    n_context = token_count("\n".join(context))
    for row in body:
        line = _markdown_rows([row])
        n = token_count(line)
        if group and n_context + group_tokens + n > options.max_tokens:
            drafts.append(
                _table_draft(path, "\n".join([*context, *group]), page_no, bbox, n_context + group_tokens)
            )
            group, group_tokens = [], 0
        group.append(line)
        group_tokens += n
    drafts.append(_table_draft(path, "\n".join([*context, *group]), page_no, bbox, n_context + group_tokens))
    return drafts


def _table_draft(
    path: tuple[str, ...], text: str, page_no: int, bbox: tuple | None, tokens: int | None = None
) -> _Draft:
    """A table chunk's draft: one piece, its tokens counted unless the caller has (lines joined by
    newlines add up, as no token spans a line break)."""
    return _Draft(
        "table", path, [_Piece(text, page_no, bbox)], token_count(text) if tokens is None else tokens
    )


def _repeated_context(head: list[str], header_md: str, table: Table, max_tokens: int) -> list[str]:
    """What each row group of a split table repeats: caption and header rows; when that takes more
    than half of ``max_tokens``, the header's column names as one row, then without the caption,
    then nothing."""
    names = _markdown_rows([list(table.header)], separator=True) if table.header else header_md
    for context in ([*head, header_md], [*head, names], [names], []):
        if token_count("\n".join(context)) <= max_tokens // 2:
            return context
    return []


def _markdown_rows(rows: list[list[str]], separator: bool = False) -> str:
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    if separator and rows:
        lines.append("|" + "---|" * len(rows[-1]))
    return "\n".join(lines)


def _bbox(page_no: int, block: Block) -> tuple[int, float, float, float, float] | None:
    if block.bbox is None:
        return None
    x0, y0, x1, y1 = block.bbox
    return (page_no, round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2))
