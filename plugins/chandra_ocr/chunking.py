"""Blocks → retrieval chunks: header-aware, size-limited, tables as row lines (split between rows).

Each chunk's ``context`` says what it belongs to: the document's identity (``doc_identity``) and
its section path; search indexes and embeds the context with the text, a reader sees the text.
A table chunk's text is ``chunk_tables.TableText``: title, columns, one line per row.

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

from chandra_ocr.chunk_tables import TableText
from chandra_ocr.config import ChunkOptions
from chandra_ocr.doc_identity import identify
from chandra_ocr.document import Block, Chunk, Document, Table

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SKIP = {"page_header", "page_footer"}
_HEADINGS = {"section_header", "title"}
TITLE_CHARS = 250  # a text block this short directly before a table names it


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
    identity = identify(doc).line
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
                context=context(identity, draft.header_path),
            )
        )
    return chunks


def context(identity: str, header_path: tuple[str, ...]) -> str:
    """A chunk's context: the document's identity line, then its section path (less what the identity
    says already, such as a title that is also the first heading)."""
    path = [h for h in header_path if h not in identity]
    return "\n".join(p for p in (identity, " › ".join(path)) if p)


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
    """Map table block_no → the block that names it: a caption directly before (preferred) or after,
    else a short text block directly before ("CONSOLIDATED BALANCE SHEETS (in millions)", "The
    following table summarizes …:")."""
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
        else:
            before = blocks[i - 1] if i else None
            if (
                before
                and before.label == "text"
                and len(before.text) <= TITLE_CHARS
                and before.block_no not in used
            ):
                pairs[block.block_no] = before.block_no
                used.add(before.block_no)
    return pairs


def _table_drafts(
    block: Block,
    table: Table | None,
    caption: str | None,
    path: tuple[str, ...],
    page_no: int,
    options: ChunkOptions,
) -> list[_Draft]:
    """A table as one chunk (title, columns, row lines), or groups of rows each repeating the title
    and columns; a table without a grid is its block's text."""
    bbox = _bbox(page_no, block)
    if table is None or not table.cells:
        head = [caption.strip()] if caption else []
        return [_table_draft(path, "\n\n".join([*head, block.text.strip()]), page_no, bbox)]
    text = TableText.of(table, caption)
    head = text.head()
    whole = "\n".join([*head, *text.rows])
    n_whole = token_count(whole)
    limit = options.table_max_tokens
    if n_whole <= limit or len(text.rows) < 2:
        return [_table_draft(path, whole, page_no, bbox, n_whole)]
    while head and token_count("\n".join(head)) > limit // 2:
        head = head[1:]  # the title's first lines go first, the columns stay longest
    n_head = token_count("\n".join(head))
    drafts: list[_Draft] = []
    group: list[str] = []
    group_tokens = 0
    for line in text.rows:
        n = token_count(line)
        if group and n_head + group_tokens + n > limit:
            drafts.append(
                _table_draft(path, "\n".join([*head, *group]), page_no, bbox, n_head + group_tokens)
            )
            group, group_tokens = [], 0
        group.append(line)
        group_tokens += n
    drafts.append(_table_draft(path, "\n".join([*head, *group]), page_no, bbox, n_head + group_tokens))
    return drafts


def _table_draft(
    path: tuple[str, ...], text: str, page_no: int, bbox: tuple | None, tokens: int | None = None
) -> _Draft:
    """A table chunk's draft: one piece, its tokens counted unless the caller has (lines joined by
    newlines add up, as no token spans a line break)."""
    return _Draft(
        "table", path, [_Piece(text, page_no, bbox)], token_count(text) if tokens is None else tokens
    )


def _bbox(page_no: int, block: Block) -> tuple[int, float, float, float, float] | None:
    if block.bbox is None:
        return None
    x0, y0, x1, y1 = block.bbox
    return (page_no, round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2))
