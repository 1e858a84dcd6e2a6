"""Text-similarity measures for accuracy tests: model output against ground truth, word by word."""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")  # [text](url) and ![alt](url) → text / alt
_TAG = re.compile(r"<[^<>]+>")  # HTML tags, as in Markdown with embedded HTML
_WORD = re.compile(r"[^\W_]+")  # runs of letters/digits; punctuation, Markdown marks and _ split words


def normalise_words(text: str) -> list[str]:
    """The words of ``text`` for comparison: NFKC, lowercased, without punctuation or Markdown/HTML syntax.

    Link targets and tags are removed (their visible text is kept), HTML entities decoded, and
    every run of letters/digits is one word, so "weath-ered", "E-mail" and "12.5%" become
    several words on both sides of a comparison alike.
    """
    text = unicodedata.normalize("NFKC", text)
    text = html.unescape(_TAG.sub(" ", _LINK.sub(r" \1 ", text)))
    return _WORD.findall(text.casefold())


def word_f1(pred: str, truth: str) -> float:
    """Bag-of-words F1 of ``pred`` against ``truth`` (multisets of normalised words; order ignored).

    Precision = matched / words in pred, recall = matched / words in truth, where matched counts
    each word at most as often as it occurs in both. Two empty texts score 1.0; one empty, 0.0.
    """
    p, t = Counter(normalise_words(pred)), Counter(normalise_words(truth))
    if not p and not t:
        return 1.0
    matched = sum((p & t).values())
    if matched == 0:
        return 0.0
    precision, recall = matched / sum(p.values()), matched / sum(t.values())
    return 2 * precision * recall / (precision + recall)


def order_similarity(pred: str, truth: str) -> float:
    """Order-aware similarity: 1 − (word-level Levenshtein distance) / max(len(pred), len(truth)).

    Computed over the normalised word sequences, with insertions, deletions and substitutions of
    whole words each costing 1. Symmetric; 1.0 for equal sequences (two empty texts included),
    0.0 when no word lines up; a reading-order error (e.g. swapped columns) lowers it while
    `word_f1` stays the same.
    """
    a, b = normalise_words(pred), normalise_words(truth)
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - _edit_distance(a, b) / longest


def _edit_distance(a: list[str], b: list[str]) -> int:
    """Levenshtein distance between two word sequences (one row of the table kept at a time)."""
    if len(a) < len(b):
        a, b = b, a
    ids: dict[str, int] = {}
    a_ids = [ids.setdefault(w, len(ids)) for w in a]
    b_ids = [ids.setdefault(w, len(ids)) for w in b]
    previous = list(range(len(b_ids) + 1))
    for i, x in enumerate(a_ids, 1):
        current = [i]
        for j, y in enumerate(b_ids, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]
