"""Tests for viz.head: the per-step figures of one attention head."""

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.head import dropout_figure, head_pipeline_figures, matrix_figure, probs_figure, with_row_sums
from viz.heatmap import MASK_TRACE_NAME
from viz.text import fmt_prob

EN = ["<s>", "the", "dog", "the", "."]
DE = ["der", "Hund", "<b>", "."]


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def head():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, 8)).astype(np.float32) for n in (5, 4, 4))
    mask = np.ones((5, 4), dtype=bool)
    mask[:, 3] = False  # last source key is padding
    scores = q @ k.T / np.sqrt(8)
    probs = softmax(np.where(mask, scores, -np.inf))
    return dict(q=q, k=k, v=v, mask=mask, probs=probs, out=probs @ v)


def values(fig):
    return next(t for t in fig.data if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME)


def test_pipeline_order_and_shapes(head):
    drop = head["probs"] * (np.arange(20).reshape(5, 4) % 3 != 0) / 0.9
    figs = head_pipeline_figures(head["q"], head["k"], head["v"], None, head["mask"],
                                 head["probs"], head["out"], EN, DE, "cross",
                                 dropout_probs=drop)
    assert list(figs) == ["Q", "K", "V", "scores", "scaled", "masked", "softmax", "dropout",
                          "output"]
    shapes = {name: np.asarray(values(f).z).shape for name, f in figs.items()}
    assert shapes["Q"] == (5, 8) and shapes["K"] == (4, 8) and shapes["V"] == (4, 8)
    assert shapes["scores"] == shapes["softmax"] == shapes["dropout"] == (5, 4)
    assert shapes["output"] == (5, 8)
    assert "EN" in figs["Q"].layout.yaxis.title.text
    assert "DE" in figs["K"].layout.yaxis.title.text
    assert list(figs["K"].layout.yaxis.ticktext) == ["der", "Hund", "&lt;b&gt;", "."]


def test_scores_scaled_by_sqrt_dk(head):
    figs = head_pipeline_figures(head["q"], head["k"], head["v"], None, None, head["probs"],
                                 head["out"], EN, DE, "cross")
    raw = np.asarray(values(figs["scores"]).z)
    np.testing.assert_allclose(raw, head["q"] @ head["k"].T, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(values(figs["scaled"]).z), raw / np.sqrt(8), rtol=1e-5)
    assert "masked" not in figs and "dropout" not in figs
    trace = values(figs["scores"])
    assert trace.zmin == -trace.zmax and trace.zmax == pytest.approx(np.abs(raw).max())


def test_recorded_scaled_scores_are_drawn_as_they_are(head):
    recorded = (head["q"] @ head["k"].T / np.sqrt(8)).astype(np.float32) + 0.5  # differs from a recomputation
    figs = head_pipeline_figures(head["q"], head["k"], head["v"], None, head["mask"], head["probs"],
                                 head["out"], EN, DE, "cross", scaled_scores=recorded)
    np.testing.assert_array_equal(np.asarray(values(figs["scaled"]).z), recorded)
    np.testing.assert_allclose(np.asarray(values(figs["scores"]).z), recorded * np.sqrt(8), rtol=1e-6)


def test_masked_fill_values_are_not_data(head):
    raw = head["q"] @ head["k"].T
    raw[:, 3] = -1e9
    figs = head_pipeline_figures(head["q"], head["k"], head["v"], raw, head["mask"],
                                 head["probs"], head["out"], EN, DE, "cross")
    z = np.asarray(values(figs["scores"]).z, dtype=float)
    assert np.isnan(z[:, 3]).all() and np.isfinite(z[:, :3]).all()
    masked = figs["masked"]
    assert np.isnan(np.asarray(values(masked).z, dtype=float)[:, 3]).all()
    overlay = next(t for t in masked.data if t.name == MASK_TRACE_NAME)
    assert np.array_equal(~np.isnan(np.asarray(overlay.z, dtype=float)), ~head["mask"])


def test_softmax_figure_fixed_range_and_row_sums(head):
    fig = probs_figure(head["probs"], EN, DE, "cross", mask=head["mask"])
    assert values(fig).zmin == 0 and values(fig).zmax == 1
    bars = next(t for t in fig.data if isinstance(t, go.Bar))
    np.testing.assert_allclose(np.asarray(bars.x), 1.0, atol=1e-5)
    assert bars.yaxis == "y" and bars.xaxis == "x2"
    assert "sums to 1" in fig.layout.title.text


def test_dropout_rows_no_longer_sum_to_one(head):
    keep = np.ones((5, 4), dtype=bool)
    keep[1, 0] = keep[2, 1] = False
    drop = head["probs"] * keep / 0.9
    fig = dropout_figure(drop, EN, DE, "cross", p_drop=0.1)
    sums = np.asarray(next(t for t in fig.data if isinstance(t, go.Bar)).x)
    np.testing.assert_allclose(sums, drop.sum(-1), rtol=1e-5)
    assert not np.allclose(sums, 1.0)
    assert values(fig).zmax >= drop.max()
    assert "p = 0.1" in fig.layout.title.text


def test_matrix_figure_diverging_centred_at_zero():
    m = np.array([[-2.0, 1.0], [0.5, 0.0]])
    fig = matrix_figure(m, ["a", "b"], ["c", "d"], "t", "rows ↓", "cols →")
    t = values(fig)
    assert t.zmin == -2.0 and t.zmax == 2.0 and t.colorscale[0][1] != t.colorscale[-1][1]
    fig = matrix_figure(np.abs(m), ["a", "b"], None, "t", "rows ↓", "dims →", signed=False)
    assert values(fig).zmin == 0 and values(fig).zmax == 2.0


def test_shape_mismatch_is_explained(head):
    with pytest.raises(ValueError, match="expected Q"):
        head_pipeline_figures(head["q"], head["k"][:, :4], head["v"], None, None,
                              head["probs"], head["out"], EN, DE, "cross")


def row_sum_parts(fig):
    """(bars, label trace, x of the reference line or None) of a figure with a row-sum panel."""
    bars = next(t for t in fig.data if isinstance(t, go.Bar))
    labels = next(t for t in fig.data if t.name == "row sum labels")
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.xref == "x2"]
    return bars, labels, (lines[0].x0 if lines else None)


@pytest.mark.parametrize("sums", [[1.0, 1.0, 0.999], [0.9, 1.3, 0.0, 1.0], [0.2, 0.4]])
def test_row_sum_labels_never_overlap_the_reference_line(sums):
    fig = with_row_sums(go.Figure(go.Heatmap(z=np.zeros((len(sums), 2)))), np.array(sums))
    bars, labels, line_x = row_sum_parts(fig)
    assert line_x == 1.0
    assert bars.text is None  # no text on the bars, where the line runs
    assert labels.mode == "text" and labels.textposition == "middle right"
    assert labels.xaxis == "x2" and labels.yaxis == bars.yaxis == "y"
    start = min(labels.x)  # the labels grow rightwards from here
    assert start > line_x and start > max(bars.x)
    assert fig.layout.xaxis2.range[1] > max(labels.x)
    assert list(labels.text) == [fmt_prob(v) for v in sums]
    assert list(labels.y) == list(range(len(sums)))
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]


def test_dropout_figure_row_sum_labels_beside_the_line(head):
    drop = head["probs"] * 1.4  # survivors scaled up: sums above the line at 1
    bars, labels, line_x = row_sum_parts(dropout_figure(drop, EN, DE, "cross"))
    assert min(labels.x) > max(max(bars.x), line_x)
    bars, labels, line_x = row_sum_parts(probs_figure(head["probs"], EN, DE, "cross"))
    assert min(labels.x) > line_x >= max(bars.x) - 1e-6


@pytest.mark.parametrize("masked", [False, True])
def test_scaled_scores_get_a_colour_range_of_their_own_in_the_page_row(head, masked):
    """The raw scores are √d_k times the scaled ones (8 times with d_k = 64, as in the shipped model); on the raw
    scores' range the scaled panel was nearly white. In the page's row of scores, the scaled (and masked) panels
    are coloured on their own values' range, the raw scores on theirs, each with a colour bar."""
    from viz.head import head_pipeline_rows

    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(n, 64)).astype(np.float32) * 2 for n in (5, 4, 4))
    mask = head["mask"] if masked else None
    scaled = np.where(mask if masked else True, q @ k.T / 8, -np.inf).astype(np.float32)
    probs = softmax(scaled)
    rows = head_pipeline_rows(q, k, v, None, mask, probs, probs @ v, EN, DE, "cross", scaled_scores=scaled)
    steps = ("scores", "scaled", "masked") if masked else ("scores", "scaled")
    row = rows[steps]
    panels = dict(zip(steps, [t for t in row.data if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME]))
    own = float(np.abs(scaled[np.isfinite(scaled)]).max())
    assert own * 8 > 5 * own  # raw ≫ scaled
    for name in steps[1:]:
        assert own <= panels[name].zmax <= 1.01 * own and panels[name].zmin == -panels[name].zmax, name
    assert panels["scores"].zmax == pytest.approx(8 * own, rel=1e-5)
    shown = [name for name in steps if panels[name].showscale is not False]
    assert shown == ["scores", steps[-1]]  # the raw scores' bar, and one for the scaled (and masked) scores
