"""Tesseract's TSV output → words → one text Block per paragraph, boxes in PDF points."""

from __future__ import annotations

from dataclasses import dataclass

from chandra_ocr.document import BBoxPt, Block


@dataclass(frozen=True)
class Word:
    """One word of Tesseract's TSV output; ``box`` is (x0, y0, x1, y1) in image pixels."""

    paragraph: tuple[str, str, str]  # Tesseract's (page, block, paragraph) numbers
    line: str
    box: tuple[float, float, float, float]
    confidence: float
    text: str


def parse_tsv(tsv: str) -> list[Word]:
    """The non-empty words of Tesseract's TSV output, in its reading order."""
    words = []
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) == 12 and cols[0] == "5" and cols[11].strip():
            left, top, width, height = (float(v) for v in cols[6:10])
            box = (left, top, left + width, top + height)
            words.append(Word((cols[1], cols[2], cols[3]), cols[4], box, float(cols[10]), cols[11].strip()))
    return words


def mean_confidence(words: list[Word]) -> float | None:
    """Mean confidence (0–100) of the words that contain a letter or digit; None if there are none."""
    scores = [w.confidence for w in words if any(ch.isalnum() for ch in w.text)]
    return sum(scores) / len(scores) if scores else None


def words_to_blocks(
    words: list[Word], scale: tuple[float, float], page_size: tuple[float, float], min_confidence: float
) -> list[Block]:
    """One ``text`` Block per Tesseract paragraph: lines joined by newlines, words by spaces.

    ``scale`` is points per pixel (x, y); bboxes are clipped to ``page_size`` (points). Words
    without a letter or digit below ``min_confidence`` are dropped as noise (rules, specks).
    """
    paragraphs: dict[tuple[str, str, str], list[Word]] = {}
    for word in words:
        if word.confidence >= min_confidence or any(ch.isalnum() for ch in word.text):
            paragraphs.setdefault(word.paragraph, []).append(word)
    blocks: list[Block] = []
    (sx, sy), (width, height) = scale, page_size
    for members in paragraphs.values():
        lines: dict[str, list[str]] = {}
        for word in members:
            lines.setdefault(word.line, []).append(word.text)
        x0, y0 = min(w.box[0] for w in members) * sx, min(w.box[1] for w in members) * sy
        x1, y1 = max(w.box[2] for w in members) * sx, max(w.box[3] for w in members) * sy
        bbox: BBoxPt = (_clip(x0, width), _clip(y0, height), _clip(x1, width), _clip(y1, height))
        text = "\n".join(" ".join(line) for line in lines.values())
        blocks.append(Block(block_no=len(blocks), label="text", bbox=bbox, text=text))
    return blocks


def _clip(value: float, limit: float) -> float:
    return round(min(max(value, 0.0), limit), 2)
