"""Tests for viz.common and viz.attention: axes, tokens, colour range, masks, escaping."""

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.attention import (attention_figure, heads_figure, overview_figure, robust_zmax,
                           row_sums, rows_sum_to_one, sink_key)
from viz.common import MASK_TRACE_NAME, as_mask, axis_titles, escape_token, heatmap

EN = ["the", "dog", "sees", "the", "cat", "."]
DE = ["der", "Hund", "sieht", "die", "Katze", ".", "</s>"]


def probs(*shape, seed=0):
    """Random softmax rows of the given shape (..., q, k)."""
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
    assert list(trace.x) == list(range(6)) and list(trace.y) == list(range(6))


def test_probability_colour_range_fixed_and_overridable():
    fig = attention_figure(probs(6, 6) * 0.3, EN, EN, "enc_self")
    assert value_trace(fig).zmin == 0 and value_trace(fig).zmax == 1
    fig = attention_figure(probs(6, 6), EN, EN, "enc_self", zmax=0.25)
    assert value_trace(fig).zmax == 0.25
    assert "clipped" in value_trace(fig).colorbar.title.text


def test_hover_shows_query_key_with_positions_and_three_decimals():
    fig = attention_figure(probs(6, 7), EN, DE, "cross")
    trace = value_trace(fig)
    assert "%{z:.3f}" in trace.hovertemplate
    cd = np.asarray(trace.customdata)
    assert cd.shape == (6, 7, 2)
    assert cd[3, 1, 0] == "the (3)" and cd[0, 1, 0] == "the (0)"
    assert cd[3, 1, 1] == "Hund (1)"


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
    marked = set(zip(np.asarray(markers.y).tolist(), np.asarray(markers.x).tolist()))
    assert marked == set(zip(*np.nonzero(~mask)))


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
    cd = np.asarray(value_trace(fig).customdata)
    assert cd[0, 0, 0] == "&lt;script&gt; (0)"
    assert escape_token('say "hi"') == 'say "hi"'


def test_wrong_shapes_raise_clear_errors():
    with pytest.raises(ValueError, match="query"):
        attention_figure(probs(5, 7), EN, DE, "cross")
    with pytest.raises(ValueError, match="kind must be one of"):
        attention_figure(probs(6, 7), EN, DE, "decoder")
    with pytest.raises(ValueError, match="2-D"):
        heatmap(np.zeros(3), None, None, "x", "y")


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
    assert "layer 1" in fig.layout.title.text
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
    fig = overview_figure(probs(3, 4, 6, 7), "cross")
    assert len(fig.data) == 12
    assert "layer 2, head 3" in fig.data[6].hovertemplate
    assert fig.layout.xaxis.showticklabels is False
    assert fig.layout.coloraxis.cmax == 1


def test_row_sums_and_sink_helpers():
    p = probs(2, 6, 7)
    assert row_sums(p).shape == (2, 6)
    assert rows_sum_to_one(p) and not rows_sum_to_one(p * 0.5)
    sink = np.full((6, 7), 0.02, dtype=np.float32)
    sink[:, 0] = 0.88
    assert sink_key(sink) == 0
    assert robust_zmax(sink, ignore_key=0) == pytest.approx(0.05)
    sink[2, 3] = 0.3
    assert robust_zmax(sink, ignore_key=0) == pytest.approx(0.3)
    assert robust_zmax(sink) == pytest.approx(0.88)


def test_axis_titles_helper():
    assert axis_titles("cross") == ("query (EN, decoder input) ↓", "key (DE, source) →")
