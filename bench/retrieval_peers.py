"""The peers of bench.retrieval: how others chunk the same PDFs, each chunk with its page span.

- ``naive``: PyMuPDF text of each page, joined, split by LangChain's RecursiveCharacterTextSplitter
  into 1,000 characters with 200 overlap (the LangChain tutorial's splitting);
- ``page``: one chunk per page (PyMuPDF text);
- ``md4llm``: pymupdf4llm Markdown of the document split by its headers (MarkdownHeaderTextSplitter),
  sections longer than 1,000 characters split further as ``naive`` does, the header path prepended.

pymupdf4llm's Markdown is slow to make (its table search); it is cached per PDF under the work folder.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter


@dataclass(frozen=True)
class Unit:
    """One retrievable chunk of one document: the text that is indexed and the pages it spans."""

    chunk_id: str
    doc: str  # the PDF's name without .pdf
    page_start: int
    page_end: int
    text: str


def _split(doc: str, pages: list[str], prefix: str) -> list[Unit]:
    """``pages`` joined and split 1,000/200 with page spans from character offsets."""
    starts, parts, at = [], [], 0
    for text in pages:
        starts.append(at)
        parts.append(text)
        at += len(text) + 1
    whole = "\n".join(parts)
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200, add_start_index=True)
    units = []
    for i, piece in enumerate(splitter.create_documents([whole])):
        start = piece.metadata["start_index"]
        end = start + max(len(piece.page_content) - 1, 0)
        first = bisect.bisect_right(starts, start)
        last = bisect.bisect_right(starts, end)
        units.append(Unit(f"{prefix}:{doc}:{i}", doc, first, last, piece.page_content))
    return units


def naive(pdf: Path) -> list[Unit]:
    with pymupdf.open(pdf) as d:
        pages = [page.get_text() for page in d]
    return _split(pdf.stem, pages, "naive")


def per_page(pdf: Path) -> list[Unit]:
    with pymupdf.open(pdf) as d:
        return [
            Unit(f"page:{pdf.stem}:{i + 1}", pdf.stem, i + 1, i + 1, page.get_text())
            for i, page in enumerate(d)
        ]


def _md4llm_pages(pdf: Path, cache: Path) -> list[str]:
    """pymupdf4llm's Markdown of each page, made in a child process (importing pymupdf4llm switches
    PyMuPDF features on for the whole process) and cached by the file's hash."""
    digest = hashlib.sha256(pdf.read_bytes()).hexdigest()[:16]
    path = cache / f"md4llm-{pdf.stem}-{digest}.json"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        script = (
            "import json, sys, pymupdf4llm\n"
            "pages = pymupdf4llm.to_markdown(sys.argv[1], page_chunks=True, show_progress=False)\n"
            "json.dump([p['text'] for p in pages], open(sys.argv[2], 'w'))\n"
        )
        subprocess.run([sys.executable, "-c", script, str(pdf), str(path)], check=True, timeout=3600)
    return json.loads(path.read_text())


def md4llm(pdf: Path, cache: Path) -> list[Unit]:
    """Each page's Markdown split by its headers, the header path carried over from earlier pages."""
    levels = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]
    by_headers = MarkdownHeaderTextSplitter(levels, strip_headers=False)
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    units: list[Unit] = []
    path: dict[str, str] = {}
    for page_no, markdown in enumerate(_md4llm_pages(pdf, cache), start=1):
        for section in by_headers.split_text(markdown):
            found = {k: section.metadata[k] for _, k in levels if k in section.metadata}
            if found:
                top = min(int(k[1]) for k in found)
                path = {k: v for k, v in path.items() if int(k[1]) < top} | found
            heading = " > ".join(path[k] for _, k in levels if k in path)
            for piece in splitter.split_text(section.page_content):
                text = f"{heading}\n{piece}" if heading else piece
                units.append(Unit(f"md4llm:{pdf.stem}:{len(units)}", pdf.stem, page_no, page_no, text))
    return units
