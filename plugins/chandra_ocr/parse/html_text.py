"""A linear-time HTML tag scanner and HTML → plain text, safe on arbitrary model output.

Model output is untrusted: it may be truncated, garbage, or hostile (deep nesting, unclosed
comments). Everything here is a single left-to-right pass with no recursion and no tree, so
time is linear in the input and memory is bounded by the input size.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)([^<>]*)>")
_ATTR = re.compile(r"""([^\s"'=<>/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Tags that start and end a line of text.
_BLOCK_TAGS = frozenset(
    {"p", "div", "li", "tr", "table", "thead", "tbody", "tfoot", "ul", "ol", "pre", "caption"}
    | {"blockquote", "section", "article", "dl", "dt", "dd", "figure", "figcaption", "hr", "br"}
    | _HEADINGS
)
_SKIP_CONTENT = frozenset({"script", "style", "head", "title"})
_MAX_DEPTH = 32  # list / math nesting tracked (deeper levels are flattened)


@dataclass(frozen=True, slots=True)
class Tag:
    """One start or end tag; ``start``/``end`` are its offsets in the source."""

    name: str  # lower case
    closing: bool
    self_closing: bool
    attrs: dict[str, str]
    start: int
    end: int


def parse_attrs(raw: str) -> dict[str, str]:
    """Attributes of a tag's attribute string; names lower-cased, values unescaped, first one wins."""
    attrs: dict[str, str] = {}
    for m in _ATTR.finditer(raw):
        name = m.group(1).lower()
        if name not in attrs:
            value = m.group(2) if m.group(2) is not None else m.group(3) or m.group(4) or ""
            attrs[name] = html_lib.unescape(value)
    return attrs


def iter_tokens(source: str) -> Iterator[Tag | str]:
    """Tags and raw (still escaped) text runs of ``source``, in order; comments are dropped.

    Anything that is not a well-formed tag (``a < b``, ``<3``, a truncated ``<td``) is text.
    """
    pos = 0
    n = len(source)
    while pos < n:
        lt = source.find("<", pos)
        if lt < 0:
            yield source[pos:]
            return
        if source.startswith("<!--", lt):
            if lt > pos:
                yield source[pos:lt]
            close = source.find("-->", lt + 4)
            pos = n if close < 0 else close + 3
            continue
        m = _TAG.match(source, lt)
        if m is None:
            # not a tag: emit up to and including the '<' as text
            yield source[pos : lt + 1]
            pos = lt + 1
            continue
        if lt > pos:
            yield source[pos:lt]
        raw = m.group(3)
        yield Tag(
            name=m.group(2).lower(),
            closing=m.group(1) == "/",
            self_closing=raw.rstrip().endswith("/"),
            attrs=parse_attrs(raw) if raw.strip() else {},
            start=lt,
            end=m.end(),
        )
        pos = m.end()


def first_heading_level(source: str) -> int | None:
    """Level (1–6) of the first ``<hN>`` tag in ``source``, or None."""
    for tok in iter_tokens(source):
        if isinstance(tok, Tag) and not tok.closing and tok.name in _HEADINGS:
            return int(tok.name[1])
    return None


class _TextBuilder:
    """Accumulates lines of text; whitespace collapses except on lines from ``<pre>``."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.parts: list[str] = []
        self.raw_line = False

    def add(self, text: str, *, raw: bool = False) -> None:
        if not raw:
            self.parts.append(_SPACES.sub(" ", text))
            return
        chunks = text.split("\n")
        self.parts.append(chunks[0])
        for chunk in chunks[1:]:
            self.raw_line = True
            self.newline()
            self.parts.append(chunk)
        self.raw_line = True

    def newline(self) -> None:
        line = "".join(self.parts)
        self.lines.append(line.rstrip() if self.raw_line else " ".join(line.split()))
        self.parts = []
        self.raw_line = False

    def text(self) -> str:
        self.newline()
        return "\n".join(line for line in self.lines if line.strip())


@dataclass
class _State:
    pre: int = 0  # open <pre> elements
    skip: int = 0  # open <script>/<style> elements
    tables: int = 0  # open <table> elements
    cells: int = 0  # open cells of the outermost table
    cell_in_row: int = 0
    lists: list[list[int]] = field(default_factory=list)  # per open list: [is_ordered, counter]
    maths: list[bool] = field(default_factory=list)  # per open <math>: display math?
    alts: list[str] = field(default_factory=list)


def html_to_text(source: str, *, alt_fallback: bool = True) -> str:
    """Readable text of an HTML fragment.

    Block elements become lines; cells of a table row are joined with `` | `` (nested tables and
    block elements inside cells are flattened into the cell); list items get ``- `` / ``1. ``
    markers; ``<math>`` becomes ``$…$`` (``$$…$$`` with ``display="block"``); checkboxes become
    ``[x]`` / ``[ ]``. With ``alt_fallback``, when the fragment has no text at all, the ``alt``
    texts of its images are returned instead (Chandra describes figures there).
    """
    out = _TextBuilder()
    st = _State()
    for tok in iter_tokens(source):
        if isinstance(tok, str):
            if not st.skip:
                out.add(html_lib.unescape(tok), raw=st.pre > 0)
        elif tok.closing:
            _close(tok.name, st, out)
        else:
            _open(tok, st, out)
    text = out.text()
    if not text and alt_fallback and st.alts:
        return "\n".join(st.alts)
    return text


def _break(name: str, st: _State, out: _TextBuilder) -> None:
    """A line break for block elements, a space inside table cells."""
    if name in _BLOCK_TAGS:
        if st.cells:
            out.add(" ")
        else:
            out.newline()


def _open(tok: Tag, st: _State, out: _TextBuilder) -> None:
    name = tok.name
    if name in _SKIP_CONTENT:
        st.skip += 1
        return
    if name == "pre":
        st.pre += 1
    if name == "tr" and st.tables == 1:
        st.cells = st.cell_in_row = 0
    _break(name, st, out)
    if name == "table":
        st.tables += 1
    elif name in ("td", "th") and st.tables == 1:
        if st.cell_in_row:
            out.add(" | ")
        st.cell_in_row += 1
        st.cells = 1
    elif name in ("td", "th"):
        out.add(" ")
    elif name in ("ul", "ol") and len(st.lists) < _MAX_DEPTH:
        st.lists.append([int(name == "ol"), 0])
    elif name == "li" and st.lists:
        st.lists[-1][1] += 1
        out.add(f"{st.lists[-1][1]}. " if st.lists[-1][0] else "- ")
    elif name == "math" and len(st.maths) < _MAX_DEPTH:
        st.maths.append(tok.attrs.get("display") == "block")
        out.add("$$ " if st.maths[-1] else " $")
    elif name == "input" and tok.attrs.get("type", "").lower() in ("checkbox", "radio"):
        out.add("[x] " if "checked" in tok.attrs else "[ ] ")
    elif name == "img" and tok.attrs.get("alt", "").strip():
        st.alts.append(tok.attrs["alt"].strip())


def _close(name: str, st: _State, out: _TextBuilder) -> None:
    if name in _SKIP_CONTENT:
        st.skip = max(0, st.skip - 1)
        return
    if name == "pre":
        st.pre = max(0, st.pre - 1)
    elif name == "table":
        st.tables = max(0, st.tables - 1)
        if st.tables == 0:
            st.cells = 0
    elif name in ("td", "th") and st.tables == 1:
        st.cells = 0
    elif name in ("ul", "ol") and st.lists:
        st.lists.pop()
    elif name == "math" and st.maths:
        out.add(" $$" if st.maths.pop() else "$")
    _break(name, st, out)
