"""Tests for viz.heatmap and viz.attention: axes, tokens, colour range, masks, escaping."""

import numpy as np
import plotly.graph_objects as go
import pytest

from hover_support import cell_hover
from viz.attention import (
    attention_figure,
    heads_figure,
    overview_figure,
    rescale_note,
    robust_zmax,
    row_sums,
    rows_sum_to_one,
    saturated_share,
    sink_key,
)
from viz.heatmap import MASK_TRACE_NAME, as_mask, heatmap
from viz.kinds import axis_titles
from viz.text import escape_token

EN = ["the", "dog", "sees", "the", "cat", "."]
DE = ["der", "Hund", "sieht", "die", "Katze", ".", "</s>"]


def probs(*shape, seed=0):
    """Random softmax rows of the given shape (..., i, j)."""
    x = np.random.default_rng(seed).normal(size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def value_trace(fig):
    return next(t for t in fig.data if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME)


def mask_trace(fig):
    return next(t for t in fig.data if t.name == MASK_TRACE_NAME)


@pytest.mark.parametrize("kind,q_lang,k_lang", [("enc_self", "DE", "DE"),
                                                ("dec_self", "EN", "EN"),
                                                ("cross", "EN", "DE")])
def test_axis_titles_say_query_key_and_language(kind, q_lang, k_lang):
    q_tokens = DE if q_lang == "DE" else EN
    k_tokens = DE if k_lang == "DE" else EN
    fig = attention_figure(probs(len(q_tokens), len(k_tokens)), q_tokens, k_tokens, kind)
    y_title, x_title = fig.layout.yaxis.title.text, fig.layout.xaxis.title.text
    assert "query" in y_title and q_lang in y_title
    assert "key" in x_title and k_lang in x_title
    assert fig.layout.yaxis.autorange == "reversed"


def test_cross_attention_orientation_and_shape():
    p = probs(len(EN), len(DE))
    fig = attention_figure(p, EN, DE, "cross")
    z = np.asarray(value_trace(fig).z)
    assert z.shape == (6, 7)
    np.testing.assert_allclose(z, p, rtol=1e-6)
    assert list(fig.layout.yaxis.ticktext) == EN
    assert list(fig.layout.xaxis.ticktext) == DE[:-1] + ["&lt;/s&gt;"]


def test_integer_axes_keep_repeated_tokens():
    fig = attention_figure(probs(6, 6), EN, EN, "dec_self")
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.tickmode == "array"
        assert list(axis.tickvals) == list(range(6))
        assert all(isinstance(v, int) for v in axis.tickvals)
        assert list(axis.ticktext) == EN
        assert list(axis.ticktext).count("the") == 2
    trace = value_trace(fig)
    # one category per position, each named with its position: the two "the" stay two columns and two rows
    assert list(trace.x) == list(trace.y) == [f"{t} ({i})" for i, t in enumerate(EN)]
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "category"


def test_probability_colour_range_fixed_and_overridable():
    fig = attention_figure(probs(6, 6) * 0.3, EN, EN, "enc_self")
    assert value_trace(fig).zmin == 0 and value_trace(fig).zmax == 1
    fig = attention_figure(probs(6, 6), EN, EN, "enc_self", zmax=0.25)
    bar = value_trace(fig).colorbar
    assert value_trace(fig).zmax == 0.25
    assert "saturate<br>at 0.250" in bar.title.text and "drawn<br>as 0.250" in bar.title.text
    assert bar.ticktext[-1] == "≥ 0.250" and bar.tickvals[-1] == pytest.approx(0.25)
    fig = overview_figure(probs(2, 2, 6, 6), "enc_self", zmax=0.25)
    assert "saturate" in fig.layout.coloraxis.colorbar.title.text


def test_hover_shows_query_key_with_positions_and_three_decimals():
    fig = attention_figure(probs(6, 7), EN, DE, "cross")
    trace = value_trace(fig)
    assert "%{z:.3f}" in trace.hovertemplate
    z = np.asarray(trace.z, dtype=float)
    assert cell_hover(trace, 3, 1) == f"query: the (3)<br>key: Hund (1)<br>weight: {z[3, 1]:.3f}"
    assert cell_hover(trace, 0, 1).startswith("query: the (0)<br>")  # the two "the" keep their positions
    assert trace.customdata is None  # the axes name the cell: no label per cell


def test_masked_cells_are_nan_and_marked():
    mask = np.tril(np.ones((6, 6), dtype=bool))
    p = probs(6, 6)
    fig = attention_figure(p, EN, EN, "dec_self", mask=mask)
    z = np.asarray(value_trace(fig).z, dtype=float)
    assert np.isnan(z[~mask]).all() and not np.isnan(z[mask]).any()
    overlay = np.asarray(mask_trace(fig).z, dtype=float)
    assert np.array_equal(~np.isnan(overlay), ~mask)
    assert "masked" in mask_trace(fig).hovertemplate
    markers = next(t for t in fig.data if isinstance(t, go.Scatter))
    marked = set(zip(markers.y, markers.x))  # category names: a number would add a category to the axis
    names = [f"{t} ({i})" for i, t in enumerate(EN)]
    assert marked == {(names[i], names[j]) for i, j in zip(*np.nonzero(~mask))}
    assert cell_hover(mask_trace(fig), 0, 1) == "query: the (0)<br>key: dog (1)<br>masked"


def test_no_mask_means_no_overlay():
    fig = attention_figure(probs(6, 6), EN, EN, "enc_self")
    assert [t.name for t in fig.data] == ["weight"]


def test_key_padding_mask_broadcasts():
    keep = np.array([1, 1, 1, 1, 1, 0, 0], dtype=bool)
    m = as_mask(keep[None, None, None, :], 6, 7)
    assert m.shape == (6, 7) and not m[:, 5:].any() and m[:, :5].all()
    with pytest.raises(ValueError, match="does not broadcast"):
        as_mask(np.ones((3, 3), bool), 6, 7)


def test_markup_tokens_are_escaped():
    toks = ["<script>", "a&b", "<b>x</b>"]
    fig = attention_figure(probs(3, 3), toks, toks, "enc_self")
    assert list(fig.layout.xaxis.ticktext) == ["&lt;script&gt;", "a&amp;b", "&lt;b&gt;x&lt;/b&gt;"]
    assert cell_hover(value_trace(fig), 0, 1).startswith("query: &lt;script&gt; (0)<br>key: a&amp;b (1)")
    assert escape_token('say "hi"') == 'say "hi"'


def test_wrong_shapes_raise_clear_errors():
    with pytest.raises(ValueError, match="query"):
        attention_figure(probs(5, 7), EN, DE, "cross")
    with pytest.raises(ValueError, match="kind must be one of"):
        attention_figure(probs(6, 7), EN, DE, "decoder")
    with pytest.raises(ValueError, match="2-D"):
        heatmap(np.zeros(3), None, None, row_title="y", col_title="x")


def test_heads_figure_has_one_panel_per_head_and_shared_colour_axis():
    mask = np.tril(np.ones((6, 6), dtype=bool))
    fig = heads_figure(probs(4, 6, 6), EN, EN, "dec_self", layer=0, mask=mask)
    values = [t for t in fig.data if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME]
    assert len(values) == 4
    assert len({t.xaxis for t in values}) == 4
    assert all(t.coloraxis == "coloraxis" for t in values)
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["head 1", "head 2", "head 3", "head 4"]
    assert "<br>layer 1, all heads" in fig.layout.title.text
    for t in values:
        assert np.isnan(np.asarray(t.z, dtype=float)[~mask]).all()
    assert sum(t.name == MASK_TRACE_NAME for t in fig.data) == 4
    assert list(fig.layout.xaxis4.ticktext) == EN
    assert fig.layout.yaxis4.autorange == "reversed"


def test_heads_figure_wraps_at_four_columns():
    fig = heads_figure(probs(8, 6, 7), EN, DE, "cross", layer=2)
    values = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(values) == 8
    assert fig.layout.xaxis5.domain == fig.layout.xaxis.domain
    assert fig.layout.yaxis5.domain[1] < fig.layout.yaxis.domain[0]
    assert "layer 3" in fig.layout.title.text


def test_overview_is_one_figure_with_every_layer_and_head():
    p = np.stack([probs(4, 6, 7, seed=s) for s in range(3)])  # (L=3, h=4, i=6, j=7)
    fig = overview_figure(p, "cross")
    (trace,) = fig.data  # one heatmap: thumbnails side by side, empty cells between them
    z = np.asarray(trace.z, dtype=np.float32)
    rows, cols = list(trace.y), list(trace.x)
    assert z.shape == (len(rows), len(cols))
    assert len(set(rows)) == len(rows) and len(set(cols)) == len(cols)  # no two rows or columns merge
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "category"
    # every weight of every layer and head sits under the labels that name it, and nothing else is drawn
    shown = 0
    for r, row in enumerate(rows):
        for c, col in enumerate(cols):
            if row.startswith("gap") or col.startswith("gap"):
                assert np.isnan(z[r, c]), (row, col)
                continue
            layer, query = (int(v.split()[-1]) for v in row.split(", "))
            head, key = (int(v.split()[-1]) for v in col.split(", "))
            assert row == f"layer {layer}, query {query}" and col == f"head {head}, key {key}"
            assert z[r, c] == p[layer - 1, head - 1, query, key]
            shown += 1
    assert shown == p.size
    assert trace.hoverongaps is False and "%{y}<br>%{x}" in trace.hovertemplate
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # layer 1, query 0 at the top
    titles = {a.text for a in fig.layout.annotations}
    assert {f"head {h}" for h in range(1, 5)} | {f"layer {i}" for i in range(1, 4)} <= titles
    assert fig.layout.xaxis.showticklabels is False
    assert fig.layout.coloraxis.cmax == 1


def test_row_sums_and_sink_helpers():
    p = probs(2, 6, 7)
    assert row_sums(p).shape == (2, 6)
    assert rows_sum_to_one(p) and not rows_sum_to_one(p * 0.5)
    sink = np.full((6, 7), 0.02, dtype=np.float32)
    sink[:, 0] = 0.88
    assert sink_key(sink) == 0
    assert robust_zmax(sink, ignore_key=0) == pytest.approx(0.05)  # the floor
    sink[:, 3] = 0.3  # a strong second key in every row now sets the maximum
    assert robust_zmax(sink, ignore_key=0) == pytest.approx(0.3)
    assert robust_zmax(np.eye(4)) == 1.0  # nothing but peaks: nothing to rescale


def test_axis_titles_helper():
    assert axis_titles("cross") == ("query (EN, decoder input) ↓", "key (DE, source) →")


def sharp_cross(n_q=8, n_k=9, peak=0.93, seed=0):
    """Near one-hot rows (i, j) as in cross-attention: each query aligned to one source key."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(n_k - 1), size=n_q) * (1 - peak)  # (i, j-1) the rest
    align = np.arange(n_q) % n_k
    out = np.empty((n_q, n_k), dtype=np.float32)
    for row, col in enumerate(align):
        out[row] = np.insert(p[row], col, peak)
    return out


def test_rescale_has_a_visible_effect_on_sharp_cross_attention():
    p = sharp_cross()
    layer = np.stack([p, sharp_cross(seed=1), sharp_cross(seed=2)])  # (h, i, j)
    sink = sink_key(layer)
    others = np.delete(layer, sink, axis=-1)
    assert others.max() > 0.9  # the old rule (max of the other keys) gave ~1: no visible change
    zmax = robust_zmax(layer, ignore_key=sink)
    assert 0.05 <= zmax < 0.5
    assert robust_zmax(layer, ignore_key=sink, floor=0.2) == pytest.approx(0.2)
    above, n = saturated_share(layer, zmax)
    assert n == layer.size and above >= 3 * 8  # at least every peak saturates
    note = rescale_note(layer, zmax)
    assert f"saturate at {zmax:.3f}" in note and f"{above:,} of {n:,}" in note
    assert rescale_note(layer, None).startswith("Colours span the full range")


def test_rescale_quantile_of_secondary_weights():
    p = np.full((4, 5), 0.025, dtype=np.float32)
    p[:, 0] = 0.6  # the peaks
    p[:, 1] = 0.3  # a clear second key
    zmax = robust_zmax(p)
    assert zmax == pytest.approx(0.3)  # the peaks are left out, the second keys set the scale
    assert saturated_share(p, zmax) == (4, 20)
    assert robust_zmax(p, quantile=0.5) == pytest.approx(0.05)  # median 0.025, floor 0.05


def test_rescale_ignores_masked_cells():
    causal = np.tril(np.ones((6, 6), dtype=bool))
    p = np.where(causal, probs(6, 6), 0.0)
    p /= p.sum(-1, keepdims=True)
    assert saturated_share(p, 0.5)[1] == causal.sum()  # zeros of the mask are not weights
    assert saturated_share(probs(6, 6), 0.5, mask=causal)[1] == causal.sum()
    assert robust_zmax(p) == robust_zmax(p, mask=causal)
