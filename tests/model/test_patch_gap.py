"""Activation patching's noise floor: a share divides by the clean − corrupt gap, so a gap float32 cannot carry
leaves it undefined (NaN) instead of a large, unstable number; a gap above the threshold gives the share."""
from __future__ import annotations

import numpy as np

from model.analysis.pairs import normalised_effect, patch_effect, patch_gap
from model.analysis.patch import patching
from model.records import MIN_GAP, Patching


def test_the_threshold_is_one_float32_can_carry():
    # Two correct computations of log p differ by up to ~1e-5 nats: a share of ±1 must move by less than the 0.005
    # its two decimals show, and 1e-4 (the earlier floor) let it move by 0.16.
    noise = 8e-6
    assert noise * 2 / MIN_GAP < 0.005
    assert MIN_GAP >= 1e-2


def test_a_tiny_gap_gives_no_share_and_a_real_one_gives_it():
    clean = np.array([-1.0, -1.0, -1.0])
    corrupt = clean - np.array([5e-4, 0.05, -0.02])  # 5e-4: above the old floor of 1e-4, below the threshold
    patched = corrupt + np.array([-1.5e-4, 0.04, -0.01])
    share = normalised_effect(patched, clean, corrupt)
    assert np.isnan(share[0])  # not -0.3 of a gap that is noise (nor -11 for a gap of -1.5e-4)
    np.testing.assert_allclose(share[1:], [0.8, 0.5])
    assert not np.isnan(normalised_effect(patched, clean, corrupt, min_gap=1e-4)[0])  # what the old floor let through


def _record(gaps, patched_share) -> Patching:
    """A patching record of two tokens whose heads restore `patched_share` of each token's gap."""
    clean = np.array([-0.5, -2.0])
    corrupt = clean - np.asarray(gaps)
    lp = corrupt + np.asarray(patched_share) * np.asarray(gaps)  # (P,)
    grid = np.broadcast_to(lp, (2, 3, 2)).copy()  # (L, h, P)
    effect = normalised_effect(grid, clean, corrupt)
    return Patching(["a", "</s>"], ["b", "</s>"], ["x", "y"], [0, 1], clean, corrupt, {"cross": grid},
                    {"cross": effect})


def test_the_gap_of_a_token_and_of_the_whole_translation():
    p = _record([0.003, 1.5], [0.4, -0.2])
    np.testing.assert_allclose(patch_gap(p, 0), (-0.5, -0.503, 0.003))
    clean, corrupt, gap = patch_gap(p)
    assert np.isclose(clean, -2.5) and np.isclose(gap, 1.503)
    assert np.isnan(patch_effect(p, 0)["cross"]).all()  # 0.003 nats: below the threshold
    np.testing.assert_allclose(patch_effect(p, 1)["cross"], -0.2)  # a negative share: pushed away from clean
    whole = patch_effect(p)["cross"]
    np.testing.assert_allclose(whole, (0.4 * 0.003 - 0.2 * 1.5) / 1.503)


def test_on_a_model_every_token_below_the_threshold_is_undefined_and_every_one_above_is_a_share(translator):
    from test_patch import CLEAN, CORRUPT, forced

    _, _, _, tgt = forced(translator)
    pa = patching(translator, CLEAN, CORRUPT, tgt)
    gap = pa.clean_log_probs - pa.corrupt_log_probs
    assert pa.min_gap == MIN_GAP
    assert (np.abs(gap) < MIN_GAP).any() and (np.abs(gap) >= MIN_GAP).any(), gap  # both kinds of token
    for comp, effect in pa.effect.items():
        below = np.abs(gap) < MIN_GAP
        assert np.isnan(effect[..., below]).all(), comp
        assert np.isfinite(effect[..., ~below]).all(), comp
        expect = (pa.log_probs[comp][..., ~below] - pa.corrupt_log_probs[~below]) / gap[~below]
        np.testing.assert_allclose(effect[..., ~below], expect, atol=1e-9)
