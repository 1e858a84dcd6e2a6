"""The one data model: Document → Page → Block/Table → Chunk, all plain typed dataclasses.

Coordinates: every bbox is in PDF points of the page as displayed (rotation applied),
origin top-left, x to the right, y down — the space PyMuPDF reports for words and blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from PIL import Image

BBoxPt = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in PDF points, origin top-left, rotation applied."""

Route = Literal["text", "ocr"]
PageStatus = Literal["ok", "fallback", "failed"]
DocStatus = Literal["ingested", "partial", "quarantined"]
ChunkKind = Literal["text", "table"]

# The normalised block label set; parsers map their model's labels onto it.
LABELS = (
    "text",
    "title",
    "section_header",
    "list",
    "table",
    "figure",
    "caption",
    "footnote",
    "formula",
    "code",
    "page_header",
    "page_footer",
    "form",
    "other",
)


@dataclass(frozen=True)
class Block:
    """One layout block of a page."""

    block_no: int
    label: str
    bbox: BBoxPt | None
    text: str
    html: str | None = None
    level: int | None = None  # heading level for section_header/title blocks
    table_no: int | None = None  # a table block's ``Table`` on the same page (None: no grid was read)


@dataclass(frozen=True)
class TableCell:
    """One cell of a table grid; spanned cells appear once, at their top-left position.

    ``header_level``: for a header cell, the header row it starts in, from 1 at the top (a group
    label over its columns stands a level above their labels); None in the body.
    """

    row: int
    col: int
    text: str
    rowspan: int = 1
    colspan: int = 1
    is_header: bool = False
    header_level: int | None = None


@dataclass(frozen=True)
class Table:
    """A table found on a page, from the model's HTML, Markdown, or the native PDF structure.

    ``header``: one name per column, the column's header cells top to bottom joined ("Literacy
    Status / Read & Write"); ``header_rows``: how many leading rows are header rows (the body rows
    follow them); ``stub_head``: the header of the row-label column (the first column, holding
    row labels) — "" where that header is blank, None where the first column holds no row labels
    or the table has no header.
    """

    table_no: int
    bbox: BBoxPt | None
    n_rows: int
    n_cols: int
    header: tuple[str, ...]
    source: Literal["html", "native", "markdown"]
    cells: tuple[TableCell, ...]
    html: str | None = None
    caption: str | None = None
    header_rows: int = 0
    stub_head: str | None = None


@dataclass
class Page:
    """One page with its route, the engine's accounting, and its extracted content."""

    page_no: int  # 1-based
    width_pt: float
    height_pt: float
    route: Route
    engine: str
    route_reason: str | None = None
    model: str | None = None
    status: PageStatus = "ok"
    attempts: int = 1
    finish_reason: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    error: str | None = None
    fallback_reason: str | None = None
    raw: str | None = None
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    @classmethod
    def from_triage(cls, pt: PageTriage, engine: str, model: str | None = None, **content: Any) -> Page:
        """The page as triage routed it, read by ``engine``; ``content`` fills in any other field."""
        return cls(
            pt.page_no, pt.width_pt, pt.height_pt, pt.route, engine, pt.reason, model, **content
        )  # fmt: skip

    @classmethod
    def read(
        cls,
        pt: PageTriage,
        result: PageResult,
        status: PageStatus = "ok",
        fallback_reason: str | None = None,
        accounting: PageResult | None = None,
    ) -> Page:
        """The page an engine read: its content from ``result``, its attempts, finish reason and tokens
        from ``accounting`` (the primary engine's result of a page a fallback read), else ``result``."""
        spent = accounting or result
        return cls.from_triage(
            pt,
            result.engine,
            result.model,
            status=status,
            attempts=spent.attempts,
            finish_reason=spent.finish_reason,
            prompt_tokens=spent.prompt_tokens,
            output_tokens=spent.output_tokens,
            latency_ms=result.latency_ms,
            fallback_reason=fallback_reason,
            raw=result.text or None,
            blocks=result.blocks,
            tables=result.tables,
        )

    @classmethod
    def failed(
        cls, pt: PageTriage, engine: str, model: str | None, error: str, result: PageResult | None
    ) -> Page:
        """A page nothing could read: ``error`` says why; ``result`` is the engine's last (None: none)."""
        return cls.from_triage(
            pt,
            engine,
            model,
            status="failed",
            error=error,
            attempts=result.attempts if result else 0,
            finish_reason=result.finish_reason if result else None,
        )

    def to_dict(self) -> dict:
        """The page as JSON-ready dicts (``asdict`` without its deep copies: blocks and cells are flat)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("blocks", "tables")}
        data["blocks"] = [dict(vars(b)) for b in self.blocks]
        data["tables"] = [{**vars(t), "cells": [dict(vars(c)) for c in t.cells]} for t in self.tables]
        return data

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Page:
        """Inverse of ``to_dict`` (a checkpoint's page)."""
        value = dict(value)
        value["blocks"] = [Block(**{**b, "bbox": _tuple(b["bbox"])}) for b in value.get("blocks", [])]
        value["tables"] = [
            Table(
                **{
                    **t,
                    "bbox": _tuple(t["bbox"]),
                    "header": tuple(t["header"]),
                    "cells": tuple(TableCell(**c) for c in t["cells"]),
                }
            )
            for t in value.get("tables", [])
        ]
        return cls(**value)


def _tuple(v: list | None) -> tuple | None:
    return tuple(v) if v is not None else None


@dataclass
class Document:
    """A source PDF and everything extracted from it."""

    doc_id: str  # sha256 of the original bytes
    source_uri: str
    file_name: str
    bytes: int
    status: DocStatus = "ingested"
    error: str | None = None
    compressed_bytes: int | None = None
    compress_method: str | None = None
    n_pages: int = 0
    pipeline_version: str = ""
    engine: str | None = None
    model: str | None = None
    pages: list[Page] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The document as JSON-ready dicts (the JSON export of the model)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "pages"}
        data["pages"] = [p.to_dict() for p in self.pages]
        return data


@dataclass(frozen=True)
class Chunk:
    """A retrieval unit with its provenance. ``text`` is what a reader is shown; ``context`` (the
    document's identity and the section path) is prepended to it for indexing and embedding."""

    chunk_id: str
    doc_id: str
    chunk_no: int
    kind: ChunkKind
    text: str
    n_tokens: int
    header_path: tuple[str, ...]
    page_start: int
    page_end: int
    bboxes: tuple[tuple[int, float, float, float, float], ...]  # (page_no, x0, y0, x1, y1)
    context: str = ""

    @property
    def indexed_text(self) -> str:
        """What search indexes and embeds: the context, then the text."""
        return indexed_text(self.context, self.text)


def indexed_text(context: str | None, text: str) -> str:
    """A chunk's context and text as one text for search (the one place that joins them)."""
    return f"{context}\n{text}" if context else text


# -- what travels between the stages besides the document itself ---------------------------------


@dataclass(frozen=True)
class RenderSpec:
    """Render budget for one model (or the CPU engine).

    The page is rendered at ``dpi``, then scaled so that the short side is at least
    ``min_short_side`` px, the longest side at most ``longest_edge`` px and the area at most
    ``max_pixels``; finally both sides are rounded down to a multiple of ``multiple_of``.
    """

    dpi: int = 200
    max_pixels: int = 6_291_456
    min_short_side: int = 0
    longest_edge: int | None = None
    multiple_of: int = 1


@dataclass
class PageRequest:
    """One page to read. ``image`` is the rendered page (OCR engines); the text engine reads the PDF."""

    doc_id: str
    page_no: int  # 1-based
    pdf_path: str
    width_pt: float  # displayed page size (rotation applied)
    height_pt: float
    image: Image.Image | None = None


@dataclass
class PageResult:
    """What an engine made of one page, with its accounting.

    ``status`` is ``ok`` only for a valid result (finished with ``stop`` and parsed);
    ``failed`` results carry ``error`` and are handed to the fallback chain by the caller.
    """

    doc_id: str
    page_no: int
    engine: str
    model: str | None
    status: Literal["ok", "failed"]
    text: str = ""
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None

    @classmethod
    def of(
        cls,
        request: PageRequest,
        engine: str,
        model: str | None,
        *,
        error: str | None = None,
        text: str = "",
        blocks: list[Block] | tuple[Block, ...] = (),
        tables: list[Table] | tuple[Table, ...] = (),
        finish_reason: str | None = None,
        prompt_tokens: int = 0,
        output_tokens: int = 0,
        latency_ms: float = 0.0,
        attempts: int = 1,
    ) -> PageResult:
        """The result of reading ``request``: ``ok`` without ``error``, else ``failed`` with it (the one
        way engines make their results)."""
        status: Literal["ok", "failed"] = "ok" if error is None else "failed"
        return cls(
            request.doc_id, request.page_no, engine, model, status, text, list(blocks), list(tables),
            finish_reason, prompt_tokens, output_tokens, latency_ms, attempts, error,
        )  # fmt: skip


@dataclass(frozen=True)
class ParsedPage:
    """Blocks and tables parsed from one page of model output, bboxes in PDF points."""

    blocks: list[Block]
    tables: list[Table]


@dataclass(frozen=True)
class PageTriage:
    """The route chosen for one page, and why. Sizes are of the displayed page (rotation applied)."""

    page_no: int  # 1-based
    width_pt: float
    height_pt: float
    rotation: int
    route: Route
    reason: str
    n_chars: int
