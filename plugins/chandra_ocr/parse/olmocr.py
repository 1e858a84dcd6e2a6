"""olmOCR-2 page output: a front matter of five page facts, then the page as Markdown.

The format the ``olmocr`` package documents (``olmocr.train.front_matter`` and the guided-decoding
pattern of ``olmocr.pipeline``)::

    ---
    primary_language: en        # two-letter code, or null for a page without text
    is_rotation_valid: True     # True / False (either case)
    rotation_correction: 0      # 0, 90, 180 or 270
    is_table: False
    is_diagram: False
    ---
    Markdown text (tables as HTML, equations as LaTeX)

The text goes through the Markdown parser (``chandra_ocr.parse.markdown``). Output without the
front matter, or with a field missing or out of range, is not a page olmOCR would accept: it
raises ParseError, which makes the engine retry the page at its next temperature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chandra_ocr.document import ParsedPage
from chandra_ocr.errors import ParseError
from chandra_ocr.parse.markdown import parse_markdown

_FIELD = re.compile(r"([a-z_]+):[ \t]*(.*?)[ \t]*")
_BOOLS = {"true": True, "false": False}
_ROTATIONS = (0, 90, 180, 270)
_FIELDS = ("primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram")


@dataclass(frozen=True)
class OlmocrFacts:
    """The page facts of olmOCR's front matter."""

    primary_language: str | None
    is_rotation_valid: bool
    rotation_correction: int
    is_table: bool
    is_diagram: bool


def split_front_matter(raw: str) -> tuple[OlmocrFacts, str]:
    """(facts, Markdown text) of one olmOCR answer; raises ParseError without a valid front matter."""
    if not raw.startswith("---\n"):
        raise ParseError("olmOCR output does not start with its '---' front matter")
    end = raw.find("\n---", 3)
    if end < 0:
        raise ParseError("olmOCR front matter is not closed by '---'")
    values: dict[str, str] = {}
    for line in raw[4:end].splitlines():
        match = _FIELD.fullmatch(line.strip())
        if match is None:
            raise ParseError(f"olmOCR front matter line is not 'key: value': {line[:80]!r}")
        values[match.group(1)] = match.group(2)
    missing = [f for f in _FIELDS if f not in values]
    if missing:
        raise ParseError(f"olmOCR front matter lacks {', '.join(missing)}")
    return _facts(values), raw[end + 4 :].strip()


def _facts(values: dict[str, str]) -> OlmocrFacts:
    flags = {}
    for name in ("is_rotation_valid", "is_table", "is_diagram"):
        flag = _BOOLS.get(values[name].lower())
        if flag is None:
            raise ParseError(f"olmOCR {name} must be True or False, got {values[name][:20]!r}")
        flags[name] = flag
    try:
        rotation = int(values["rotation_correction"])
    except ValueError:
        rotation = -1
    if rotation not in _ROTATIONS:
        raise ParseError(
            f"olmOCR rotation_correction must be 0/90/180/270, got {values['rotation_correction']!r}"
        )
    language = values["primary_language"].strip("'\"")
    return OlmocrFacts(
        primary_language=None if language.lower() in ("null", "none", "~", "") else language,
        rotation_correction=rotation,
        **flags,
    )


def parse_olmocr(raw: str, width_pt: float, height_pt: float) -> ParsedPage:
    """Parse one olmOCR-2 answer into blocks and tables (no bboxes); raises ParseError (see module)."""
    _, text = split_front_matter(raw)
    return parse_markdown(text, width_pt, height_pt)
