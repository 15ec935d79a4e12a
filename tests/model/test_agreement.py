"""model.analysis.agreement: Spearman rank agreement between head measures, against pandas' ranks, and the
sentence that states it (its words follow the numbers)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from model.analysis import agreement
from model.analysis.agreement import (
    average_ranks,
    grid_values,
    per_layer_normalised,
    rank_agreement,
    spearman,
    strength,
)

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention", "cross": "cross-attention"}


def pandas_rho(a, b) -> float:
    """Spearman as a textbook computes it: the Pearson correlation of the average ranks."""
    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def report_of(grids: dict[str, dict[str, list]]) -> dict:
    """A report's kinds section: {kind: {measure: [layer][head]}}."""
    return {"kinds": {k: {"measures": m} for k, m in grids.items()}}


def test_average_ranks_share_ties_like_pandas():
    x = np.array([3.0, 1.0, 3.0, 2.0, 3.0, 0.5])
    np.testing.assert_allclose(average_ranks(x), pd.Series(x).rank().to_numpy())
    assert list(average_ranks(np.array([2.0, 2.0]))) == [1.5, 1.5]


def test_spearman_equals_pandas_with_ties_and_skips_missing_values():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 40).astype(float), rng.normal(size=40)
    rho, n, why = spearman(a, b)
    assert n == 40 and why == "" and rho == pytest.approx(pandas_rho(a, b))
    a[3], b[7] = np.nan, np.nan  # a head without a value is left out of both
    keep = np.isfinite(a) & np.isfinite(b)
    rho, n, _ = spearman(a, b)
    assert n == 38 and rho == pytest.approx(pandas_rho(a[keep], b[keep]))
    assert spearman([1, 2, 3], [3, 2, 1])[0] == pytest.approx(-1.0)


def test_spearman_is_undefined_for_fewer_than_three_heads_or_a_constant_measure():
    assert spearman([1.0, 2.0], [2.0, 1.0]) == (None, 2, "fewer than 3 heads")
    assert spearman([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0]) == (None, 4, "a measure is constant")


def test_rank_agreement_overall_and_per_kind():
    rng = np.random.default_rng(1)
    grids = {k: {"x": rng.normal(size=(2, 3)).tolist(), "ablation_loss_increase": rng.normal(size=(2, 3)).tolist()}
             for k in agreement.KINDS}
    grids["cross"]["x"] = [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]  # constant within cross-attention
    report = report_of(grids)
    values = {k: np.array(grids[k]["x"]) for k in agreement.KINDS}
    got = rank_agreement(report, values)
    flat = lambda m: np.concatenate([np.ravel(grids[k][m]) for k in agreement.KINDS])  # noqa: E731
    assert got["all"][0] == pytest.approx(pandas_rho(flat("x"), flat("ablation_loss_increase"))) and got["all"][1] == 18
    for k in ("enc_self", "dec_self"):
        assert got[k][0] == pytest.approx(pandas_rho(np.ravel(grids[k]["x"]),
                                                     np.ravel(grids[k]["ablation_loss_increase"])))
    assert got["cross"] == (None, 6, "a measure is constant")
    # a measure not defined for a kind (None) leaves that kind out of the overall number
    got = rank_agreement(report, {**values, "enc_self": None})
    assert got["enc_self"][0] is None and got["all"][1] == 12


def test_a_kind_with_fewer_than_three_heads_is_undefined():
    grids = {k: {"x": [[1.0, 2.0]], "ablation_loss_increase": [[0.1, 0.3]]} for k in agreement.KINDS}
    got = rank_agreement(report_of(grids), {k: np.array([[1.0, 2.0]]) for k in agreement.KINDS})
    assert all(got[k] == (None, 2, "fewer than 3 heads") for k in agreement.KINDS)
    assert got["all"][1] == 6 and got["all"][0] is not None
    sentence = agreement.agreement_sentence("x", "the loss", got, GROUPS)
    assert sentence.count("ρ is undefined (fewer than 3 heads)") == 3


def test_grid_values_raw_and_normalised_per_layer():
    grids = {k: {"importance": [[0.2, 1.0], [0.0, 0.5]], "importance_raw": [[0.02, 0.1], [0.001, 0.05]],
                 "confidence": [[3.0, 4.0], [0.0, 0.0]]} for k in agreement.KINDS}
    report = report_of(grids)
    # importance: raw = the raw gradient; per layer = the report's normalised importance
    np.testing.assert_allclose(grid_values(report, "cross", "importance", "raw"), grids["cross"]["importance_raw"])
    np.testing.assert_allclose(grid_values(report, "cross", "importance", "layer"), grids["cross"]["importance"])
    # another measure: each layer divided by its L2 norm; a layer of zeros stays as it is
    np.testing.assert_allclose(grid_values(report, "enc_self", "confidence", "layer"), [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(grid_values(report, "enc_self", "confidence", "raw"), grids["enc_self"]["confidence"])
    assert grid_values(report, "enc_self", "monotonicity") is None
    with pytest.raises(ValueError):
        grid_values(report, "enc_self", "confidence", "log")
    v = per_layer_normalised(np.array([[np.nan, 3.0, 4.0]]))
    assert np.isnan(v[0, 0]) and v[0, 1:] == pytest.approx([0.6, 0.8])


@pytest.mark.parametrize("rho, words", [(0.95, "agree closely"), (0.5, "agree moderately"), (0.2, "agree only weakly"),
                                        (0.0, "are unrelated"), (-0.2, "disagree weakly"), (-0.56, "disagree"),
                                        (0.398, "agree moderately")])  # judged on "0.40", the number shown
def test_strength_words_follow_the_number(rho, words):
    assert strength(rho) == words


def test_the_sentence_is_computed_from_the_numbers():
    result = {"all": (0.33, 36, ""), "enc_self": (0.81, 12, ""), "dec_self": (-0.004, 12, ""),
              "cross": (-0.5734, 12, "")}
    s = agreement.agreement_sentence("importance", "the loss increase", result, GROUPS)
    assert s.startswith("Importance and the loss increase agree only weakly across 36 heads (ρ = 0.33)")
    assert "within encoder self-attention they agree closely (ρ = 0.81, 12 heads)" in s
    assert "within decoder self-attention they are unrelated (ρ = 0.00, 12 heads)" in s  # never "−0.00"
    assert "within cross-attention they disagree (ρ = −0.57, 12 heads)" in s
    flipped = {g: (None if r is None else -r, n, why) for g, (r, n, why) in result.items()}
    s = agreement.agreement_sentence("importance", "the loss increase", flipped, GROUPS)
    assert "within cross-attention they agree moderately (ρ = 0.57, 12 heads)" in s
    assert "disagree weakly across 36 heads (ρ = −0.33)" in s


@pytest.mark.checkpoint
def test_the_shipped_reports_agreement_equals_pandas():
    report = json.loads((ROOT / "checkpoints" / "multi30k-de-en" / "head_report.json").read_text())
    for measure, scale in (("importance", "layer"), ("importance", "raw")):
        values = {k: grid_values(report, k, measure, scale) for k in agreement.KINDS}
        got = rank_agreement(report, values)
        for k in agreement.KINDS:
            effect = np.ravel(report["kinds"][k]["measures"]["ablation_loss_increase"])
            assert got[k][0] == pytest.approx(pandas_rho(values[k].ravel(), effect)) and got[k][1] == 12
