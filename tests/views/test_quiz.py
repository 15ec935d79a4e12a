"""The quiz's questions come from the step's numbers: change the numbers and the answer follows; the shuffle is a
permutation fixed by its seed; the options always hold the answer."""
from __future__ import annotations

import numpy as np
import pytest

from viz.quiz import TIE_RATIO, distinct, looks_at, nearly_tied, next_word, shuffled

TOKENS = ["dog", "cat", "man", "woman", "child"]
PROBS = [0.6, 0.2, 0.1, 0.06, 0.04]


@pytest.mark.parametrize("n", [1, 2, 5, 11])
def test_the_shuffle_is_a_permutation_and_the_same_for_the_same_seed(n):
    for seed in range(20):
        order = shuffled(n, seed, 3)
        assert sorted(order) == list(range(n))
        assert shuffled(n, seed, 3) == order


def test_another_seed_or_step_gives_another_order():
    orders = {tuple(shuffled(5, seed, 1)) for seed in range(30)}
    assert len(orders) > 10
    assert any(shuffled(5, 7, step) != shuffled(5, 7, 1) for step in range(2, 10))


def test_next_word_lists_every_candidate_once_and_the_answer_is_the_chosen_one():
    for seed in range(10):
        q = next_word(TOKENS, PROBS, 0, seed, step=2)
        assert sorted(q.options) == sorted(TOKENS)
        assert q.options[q.answer] == "dog" and q.value == pytest.approx(0.6)
        assert [q.values[q.options.index(t)] for t in TOKENS] == pytest.approx(PROBS)  # each keeps its probability
        assert q.top == q.answer and q.tie_sentence() == ""


def test_next_word_answer_follows_the_data():
    probs = [0.1, 0.2, 0.5, 0.15, 0.05]  # another distribution; beam search (or a forced token) took "woman"
    q = next_word(TOKENS, probs, 3, seed=1, step=2)
    assert q.options[q.answer] == "woman" and q.value == pytest.approx(0.15)
    assert q.options[q.top] == "man"  # the most probable one is still named


def test_a_near_tie_is_said_with_both_values():
    q = next_word(["a", "the", "one"], [0.41, 0.39, 0.2], 0, seed=0, step=1)
    said = q.tie_sentence()
    assert "a (0.410)" in said and "the (0.390)" in said and "one" not in said
    assert looks_at(np.array([0.5, 0.3, 0.2]), ["x", "y", "z"]).tie_sentence() == ""


def test_many_tied_options_are_counted_not_all_named():
    q = looks_at(np.full(7, 1 / 7), [str(i) for i in range(7)])
    assert len(q.tied) == 7 and "and 4 more" in q.tie_sentence()


def test_looks_at_answers_the_most_attended_source_token_and_follows_the_data():
    src = ["Ein", "Hund", "läuft", ".", "<eos>"]
    w = np.array([0.1, 0.7, 0.1, 0.05, 0.05])
    q = looks_at(w, src)
    assert q.options == src and q.options[q.answer] == "Hund" and q.value == pytest.approx(0.7)
    q2 = looks_at(w[[2, 0, 1, 3, 4]], src)  # the weight moves to "läuft"
    assert q2.options[q2.answer] == "läuft"


def test_repeated_tokens_stay_apart():
    src = ["Ein", "Hund", "jagt", "den", "Hund", "<eos>"]
    q = looks_at(np.array([0.05, 0.1, 0.05, 0.1, 0.6, 0.1]), src)
    assert q.options == ["Ein", "Hund (2)", "jagt", "den", "Hund (5)", "<eos>"]
    assert q.options[q.answer] == "Hund (5)"
    assert distinct(["a", "b"]) == ["a", "b"]


def test_nearly_tied_uses_the_ratio():
    assert nearly_tied([1.0, TIE_RATIO, TIE_RATIO - 0.01]) == [0, 1]
    assert nearly_tied([0.2, 0.8]) == [1]


def test_bad_input_says_what_to_pass():
    with pytest.raises(ValueError, match="top-k"):
        next_word(["a"], [0.5, 0.5], 0, 0, 1)
    with pytest.raises(ValueError, match="chosen index"):
        next_word(["a", "b"], [0.5, 0.5], 2, 0, 1)
    with pytest.raises(ValueError, match=r"\(s,\) row"):
        looks_at(np.ones(3) / 3, ["a", "b"])
