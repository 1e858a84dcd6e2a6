"""Fusing rankings: reciprocal rank fusion of lexical and dense results, then pages scored by their chunks.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) scores an item ``Σ 1 / (RRF_K + rank)``
over the rankings it appears in: it needs no score calibration between BM25 and cosine similarity,
and an item near the top of both beats one at the top of only one. A question is answered by a
page, so ``by_page`` then ranks pages: a page scores ``1 / (PAGE_K + rank)`` for its best chunk in
the fused ranking and half that for each other chunk of it there (a statement's title, its table
and the note beside it, each found, outrank one stray sentence), and each page is listed once, by
its best chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

RRF_K = 60
PAGE_K = 10
OTHER_CHUNKS = 0.5  # weight of a page's chunks after its best one


def fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Items of ``rankings`` (each best first) by fused score, best first: ``[(item, score), ...]``."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def by_page(
    ranked: Sequence[str], page: Callable[[str], Hashable], k: int = PAGE_K
) -> list[tuple[str, float]]:
    """The best item of each ``page(item)`` of ``ranked`` (best first), ordered by its page's score."""
    best: dict[Hashable, str] = {}
    scores: dict[Hashable, float] = {}
    for rank, item in enumerate(ranked, start=1):
        key = page(item)
        weight = 1.0 if key not in best else OTHER_CHUNKS
        best.setdefault(key, item)
        scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    order = sorted(best, key=lambda key: -scores[key])  # stable: ties keep the better best chunk first
    return [(best[key], scores[key]) for key in order]
