"""What a document says it is: its issuer, its form or title, and the period it covers.

Read from the first pages' blocks, where documents state these: a filing's cover ("FORM 10-K",
"For the fiscal year ended February 2, 2019", "BEST BUY CO., INC. (Exact name of registrant as
specified in its charter)"), a report's title and date line, the running header or footer that
repeats the organisation's name on every page. Nothing is guessed from the file name. Every chunk
carries the result (``DocIdentity.line``) in its context, so a question that names the company,
the form or the year finds chunks deep inside the document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from chandra_ocr.document import Document

FIRST_PAGES = 3
RUNNING_SHARE = 0.25  # a running line naming the document is on at least this share of its pages
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE = rf"{_MONTH}\s+\d{{1,2}}\s*,?\s*\d{{4}}"
_PERIOD = re.compile(
    rf"\bfor\s+the\s+(?P<what>(?:fiscal\s+)?(?:year|quarter(?:ly\s+period)?|(?:three|six|nine|twelve)\s+months"
    rf"|period|fiscal\s+quarter))\s+ended\s*:?\s*(?P<date>{_DATE})",
    re.IGNORECASE,
)
_REPORT_DATE = re.compile(rf"\bdate\s+of\s+report\b[^:]{{0,60}}:\s*(?P<date>{_DATE})", re.IGNORECASE)
_FORM = re.compile(
    r"\bform\s+(?P<form>\d{1,2}-[a-z]{1,2}(?:/a)?|[a-z]-\d{1,2}|def\s*14a|20-f|40-f)\b", re.IGNORECASE
)
_KIND = re.compile(r"\b(?P<kind>annual|quarterly|current|transition)\s+report\b", re.IGNORECASE)
_REGISTRANT = re.compile(r"\(\s*exact\s+name\s+of\s+(?:the\s+)?registrant", re.IGNORECASE)
_RULE = re.compile(r"\||_{3,}|\.{4,}|\bcommission\s+file\s+(?:number|no\.?)\s*:?\s*[\d-]+", re.IGNORECASE)
_YEAR = re.compile(r"\d{4}$")
_FILE_NUMBER = re.compile(r"\bcommission\s+file\s+(?:number|no\.?)\s*:?\s*[\d-]+", re.IGNORECASE)
_NOT_A_NAME = re.compile(r"(?:part|item|section|chapter|page|table\s+of\s+contents|index)\b", re.IGNORECASE)


@dataclass(frozen=True)
class DocIdentity:
    """A document's issuer, form or title and period as the document states them (None: not stated)."""

    issuer: str | None = None
    title: str | None = None
    period: str | None = None

    @property
    def line(self) -> str:
        """One line for a chunk's context, e.g. "Best Buy Co., Inc. · Form 10-K annual report · for the
        fiscal year ended February 2, 2019 (FY2019)"."""
        return " · ".join(p for p in (self.issuer, self.title, self.period) if p)


def identify(doc: Document) -> DocIdentity:
    """The identity ``doc`` states on its first pages and in its running lines."""
    lines = _first_lines(doc)
    text = "\n".join(lines)
    form = _FORM.search(text)
    title = None
    if form:
        kind = _KIND.search(text)
        title = f"Form {form.group('form').upper()}" + (
            f" {kind.group('kind').lower()} report" if kind else ""
        )
    else:
        title = _first_heading(doc)
    return DocIdentity(_registrant(lines) or _running_name(doc), title, _period(text))


def _first_lines(doc: Document) -> list[str]:
    lines: list[str] = []
    for page in doc.pages[:FIRST_PAGES]:
        for block in page.blocks:
            lines.extend(" ".join(s.split()) for s in block.text.splitlines() if s.strip())
    return lines


def _registrant(lines: list[str]) -> str | None:
    """A filing's registrant: the text before "(Exact name of registrant …)" on its line, else the line
    before; on a cover without that phrase, the name after the commission file number."""
    for i, line in enumerate(lines):
        m = _REGISTRANT.search(line)
        if not m:
            continue
        before = _name(line[: m.start()])
        if not before and i > 0:
            before = _name(lines[i - 1])
        if before:
            return before
    for i, line in enumerate(lines):
        m = _FILE_NUMBER.search(line)
        if m:
            return _name(line[m.end() :]) or (_name(lines[i + 1]) if i + 1 < len(lines) else None)
    return None


def _name(text: str) -> str | None:
    """The last part of ``text`` between rules, separators and file numbers, if it reads as a name."""
    name = _RULE.split(text)[-1].strip(" ,:")
    letters = sum(ch.isalpha() for ch in name)
    return name if 2 <= len(name) <= 100 and letters * 2 > len(name.replace(" ", "")) else None


def _running_name(doc: Document) -> str | None:
    """The commonest running header or footer that is a name (letters, not a page number or date)."""
    counts: Counter[str] = Counter()
    for page in doc.pages:
        for block in page.blocks:
            if block.label in ("page_header", "page_footer"):
                text = " ".join(block.text.split())
                if 3 <= len(text) <= 80 and sum(ch.isalpha() for ch in text) >= 0.6 * len(
                    text.replace(" ", "")
                ):
                    counts[text] += 1
    need = max(2, RUNNING_SHARE * len(doc.pages))
    common = [t for t, n in counts.most_common() if n >= need and not _NOT_A_NAME.match(t)]
    return common[0] if common else None


def _first_heading(doc: Document) -> str | None:
    """A title block of the first page, else its first top-level heading."""
    if not doc.pages:
        return None
    blocks = doc.pages[0].blocks
    for block in blocks:
        if block.label == "title" and block.text.strip():
            return " ".join(block.text.split())[:200]
    headings = [b for b in blocks if b.label == "section_header" and b.text.strip()]
    if headings:
        top = min(b.level or 9 for b in headings)
        return " ".join(next(b for b in headings if (b.level or 9) == top).text.split())[:200]
    return None


def _period(text: str) -> str | None:
    m = _PERIOD.search(text)
    if m:
        what = " ".join(m.group("what").lower().split())
        date = " ".join(m.group("date").split())
        label = f"for the {what} ended {date}"
        year = _YEAR.search(date)
        if year and "year" in what:
            label += f" (FY{year.group()})"
        return label
    m = _REPORT_DATE.search(text)
    return f"report dated {' '.join(m.group('date').split())}" if m else None
