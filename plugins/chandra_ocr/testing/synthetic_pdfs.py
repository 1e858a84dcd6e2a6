"""Small born-digital PDFs with distinct bytes, for archives of many documents (tests and bench)."""

from __future__ import annotations

import pymupdf

_WORDS = ("river", "station", "sample", "nitrate", "phosphate", "flow", "survey", "report", "annual", "basin")


def pdf_bytes(n: int, pages: int = 1, note: str = "") -> bytes:
    """A ``pages``-page text PDF whose text (and so whose sha256) depends on ``n`` and ``note``."""
    doc = pymupdf.open()
    try:
        for p in range(pages):
            page = doc.new_page()
            page.insert_text((72, 72), f"Archive document {n} page {p + 1} {note}", fontsize=14)
            for line in range(12):  # enough text for a chunk of its own
                words = " ".join(_WORDS[(n + line + i) % len(_WORDS)] for i in range(12))
                page.insert_text((72, 100 + 16 * line), f"Station {n % 97}: {words}.", fontsize=11)
        return doc.tobytes()
    finally:
        doc.close()
