"""Fusing rankings: reciprocal rank fusion of lexical and dense results, and one result per page.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) scores an item ``Σ 1 / (RRF_K + rank)``
over the rankings it appears in: it needs no score calibration between BM25 and cosine similarity,
and an item near the top of both beats one at the top of only one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

RRF_K = 60


def fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Items of ``rankings`` (each best first) by fused score, best first: ``[(item, score), ...]``."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def one_per_page(ranked: Sequence[tuple[str, float]], page: Callable[[str], Hashable]) -> list[str]:
    """The items of ``ranked`` with only the best of each ``page(item)`` kept, in order."""
    seen: set[Hashable] = set()
    out = []
    for item, _ in ranked:
        key = page(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
