"""The text-similarity helpers that the accuracy tests rely on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from metrics import normalise_words, order_similarity, word_f1

TEXT = "The quick brown dog jumped over the lazy fox."
words = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "x", "42"]), max_size=30)


def test_normalise_drops_case_punctuation_and_markdown():
    md = "## The *Quick* [brown](http://x.org/a) `dog`\n| jumped | over |\n|---|---|\n> the **lazy** _fox_."
    assert normalise_words(md) == ["the", "quick", "brown", "dog", "jumped", "over", "the", "lazy", "fox"]


def test_normalise_applies_nfkc_html_and_splits_on_punctuation():
    assert normalise_words("ﬁne Ｆｕｌｌ <b>bold</b> &amp; E-mail 12.5%") == [
        "fine", "full", "bold", "e", "mail", "12", "5",
    ]  # fmt: skip
    assert normalise_words("Der „schnelle” Fuchs — über") == ["der", "schnelle", "fuchs", "über"]
    assert normalise_words("  \n*** --- |") == []


def test_identical_texts_score_one():
    assert word_f1(TEXT, TEXT) == 1.0
    assert order_similarity(TEXT, TEXT) == 1.0
    assert word_f1("", "") == order_similarity("", "") == 1.0


def test_formatting_differences_do_not_count():
    assert word_f1("# THE quick, brown\n\ndog jumped over the lazy fox", TEXT) == 1.0
    assert order_similarity("**The** quick brown dog jumped over the lazy fox!", TEXT) == 1.0


def test_disjoint_or_empty_texts_score_zero():
    assert word_f1("alpha beta", "gamma delta") == 0.0
    assert order_similarity("alpha beta", "gamma delta") == 0.0
    assert word_f1("", TEXT) == word_f1(TEXT, "") == 0.0
    assert order_similarity("", TEXT) == 0.0


def test_reordering_lowers_order_similarity_only():
    reordered = "the lazy fox. The quick brown dog jumped over"
    assert word_f1(reordered, TEXT) == 1.0
    assert order_similarity(reordered, TEXT) < 0.7


def test_partial_overlap_values():
    # pred 4 words, truth 2 words, 2 shared: precision 1/2, recall 1 → F1 2/3
    assert word_f1("a b c d", "a b") == pytest.approx(2 / 3)
    # multiset: a repeated word counts only as often as it is in both
    assert word_f1("a a a", "a") == pytest.approx(0.5)
    # one substitution out of four words
    assert order_similarity("a b x d", "a b c d") == pytest.approx(0.75)
    # two insertions into two words: distance 2 over the longer length 4
    assert order_similarity("a q b r", "a b") == pytest.approx(0.5)


@given(words, words)
def test_scores_are_symmetric_and_bounded(a, b):
    pred, truth = " ".join(a), " ".join(b)
    for metric in (word_f1, order_similarity):
        score = metric(pred, truth)
        assert 0.0 <= score <= 1.0
        assert score == pytest.approx(metric(truth, pred))
    # an alignment matches at most the shared multiset, and m / max(len) ≤ 2m / (len + len)
    assert order_similarity(pred, truth) <= word_f1(pred, truth) + 1e-9


@given(words)
def test_reversal_keeps_f1_but_not_order(a):
    text, reverse = " ".join(a), " ".join(reversed(a))
    assert word_f1(reverse, text) == 1.0
    if a != a[::-1]:
        assert order_similarity(reverse, text) < 1.0
