"""How many tokens two sentences share (model/analysis/pairs.py `shared_tokens`): the What if page calls a pair
sharing less than half of them no minimal pair."""
from __future__ import annotations

from model.analysis.pairs import shared_tokens


def test_a_one_word_swap_shares_all_but_that_token_over_the_longer_sentence():
    a = ["▁Ein", "▁brauner", "▁Hund", ".", "</s>"]
    assert shared_tokens(a, ["▁Ein", "▁schwarzer", "▁Hund", ".", "</s>"]) == (4, 5)
    assert shared_tokens(a, ["▁Ein", "▁Hund", "▁läuft", "▁nicht", ".", "</s>"]) == (4, 6)  # over the longer one
    assert shared_tokens(a, a) == (5, 5)


def test_reordered_words_are_shared_and_a_repeated_token_counts_as_often_as_both_hold_it():
    a = ["Der", "Mann", "hält", "das", "Kind", "."]
    b = ["Das", "Kind", "hält", "den", "Mann", "."]  # the roles swapped: the same words, another order
    assert shared_tokens(a, b) == (4, 6)
    assert shared_tokens(["einem", "Hund", "einem"], ["einem", "Sofa", "Sofa"]) == (1, 3)


def test_unrelated_sentences_share_less_than_half_and_empty_ones_share_nothing():
    shared, longer = shared_tokens(["Ein", "Hund", "läuft", "im", "Schnee", "."], ["Der", "Mann", "hält", "das", "."])
    assert (shared, longer) == (1, 6) and 2 * shared < longer
    assert shared_tokens([], []) == (0, 0) and shared_tokens(["a"], []) == (0, 1)
