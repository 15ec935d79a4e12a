"""Minimal pairs and the lab's summaries (model/analysis/pairs.py): alignment, aligned differences, patching and
knockout effects on the whole translation, the layer the logit lens commits in. NumPy only."""
from __future__ import annotations

import numpy as np
import pytest

from model.analysis.pairs import (
    align,
    aligned_difference,
    commit_layer,
    knockout_effect,
    normalised_effect,
    pair_labels,
    patch_effect,
    same_length,
    strongest,
)
from model.records import Knockout, Patching


def test_a_one_word_swap_is_aligned_position_by_position_and_marked():
    a = ["▁Ein", "▁brauner", "▁Hund", ".", "<eos>"]
    b = ["▁Ein", "▁schwarzer", "▁Hund", ".", "<eos>"]
    al = align(a, b)
    assert al.pairs == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]
    assert al.changed_a == al.changed_b == [False, True, False, False, False]
    assert not al.same
    assert pair_labels(a, b, al.pairs)[1] == "▁brauner→▁schwarzer"


def test_an_insertion_leaves_its_token_without_a_partner():
    a = ["Ein", "Hund", "läuft", "."]
    b = ["Ein", "Hund", "läuft", "nicht", "."]
    al = align(a, b)
    assert al.pairs == [(0, 0), (1, 1), (2, 2), (3, 4)]
    assert al.changed_b == [False, False, False, True, False] and not any(al.changed_a)
    assert not same_length(a, b)


def test_a_replacement_of_another_length_is_not_aligned():
    al = align(["Der", "Hund", "."], ["▁D", "en", "Hund", "."])
    assert al.pairs == [(1, 2), (2, 3)]
    assert al.changed_a == [True, False, False] and al.changed_b == [True, True, False, False]


def test_identical_lists_are_the_same():
    al = align(["a", "b"], ["a", "b"])
    assert al.same and al.pairs == [(0, 0), (1, 1)]
    assert align([], []).same


def test_aligned_difference_is_b_minus_a_on_matching_cells_and_masks_either_side():
    za = np.arange(9, dtype=float).reshape(3, 3)
    zb = np.arange(16, dtype=float).reshape(4, 4) * 10
    rows = align(["x", "y", "z"], ["x", "new", "y", "z"])  # (0,0), (1,2), (2,3)
    diff, mask = aligned_difference(za, zb, rows, rows)
    assert diff.shape == (3, 3)
    assert diff[1, 2] == zb[2, 3] - za[1, 2]
    assert mask is None
    causal_a, causal_b = np.tril(np.ones((3, 3), bool)), np.tril(np.ones((4, 4), bool))
    _, mask = aligned_difference(za, zb, rows, rows, causal_a, causal_b)
    assert (mask == np.tril(np.ones((3, 3), bool))).all()


def _patching() -> Patching:
    clean, corrupt = np.array([-0.1, -0.2]), np.array([-2.1, -0.2])  # the second token did not change
    heads = np.array([[[-1.1, -0.2], [-2.1, -0.2]]])  # (L=1, h=2, P=2)
    return Patching(src_tokens=["a", "<eos>"], corrupt_tokens=["b", "<eos>"], tgt_tokens=["x", "<eos>"],
                    positions=[0, 1], clean_log_probs=clean, corrupt_log_probs=corrupt,
                    log_probs={"cross": heads}, effect={"cross": normalised_effect(heads, clean, corrupt)})


def test_patch_effect_on_one_token_and_on_the_whole_translation():
    p = _patching()
    one = patch_effect(p, 0)["cross"]
    assert one.shape == (1, 2) and np.allclose(one, [[0.5, 0.0]])
    assert np.isnan(patch_effect(p, 1)["cross"]).all()  # the corruption did not change that token
    whole = patch_effect(p)["cross"]  # (Σ patched − Σ corrupt) / (Σ clean − Σ corrupt)
    assert np.allclose(whole, [[(-1.3 + 2.3) / (-0.3 + 2.3), 0.0]])


def test_normalised_effect_is_nan_below_the_gap():
    assert np.isnan(normalised_effect(np.array([1.0]), 0.0, 0.0)).all()
    assert normalised_effect(np.array([-1.0]), 0.0, -2.0)[0] == 0.5


def test_knockout_effect_sums_the_tokens_or_picks_one():
    k = Knockout(src_tokens=["a"], tgt_tokens=["x", "y"], positions=[0, 1], log_probs=np.array([-1.0, -2.0]),
                 delta={"cross": np.array([[[-0.5, 0.25]]])})
    assert knockout_effect(k)["cross"].tolist() == [[-0.25]]
    assert knockout_effect(k, 1)["cross"].tolist() == [[0.25]]


def test_strongest_ranks_by_size_and_skips_undefined_cells():
    values = {"cross": np.array([[0.1, -0.9]]), "enc_self": np.array([[np.nan, 0.5]]), "enc_resid": np.array([[2.0]])}
    assert strongest(values, 2) == [("enc_resid", 0, 0, 2.0), ("cross", 0, 1, -0.9)]
    assert ("enc_self", 0, 1, 0.5) in strongest(values, 5) and len(strongest(values, 5)) == 4


@pytest.mark.parametrize("ranks, layer", [([3, 1, 1], 1), ([1, 2, 1], 2), ([1, 1, 1], 0), ([1, 1, 2], None),
                                          ([], None)])
def test_commit_layer_is_where_the_chosen_token_stays_on_top(ranks, layer):
    assert commit_layer(ranks) == layer
