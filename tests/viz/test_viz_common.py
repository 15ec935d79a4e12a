"""Tests for the shared figure modules (viz.heatmap, viz.token_axes, viz.layout, viz.kinds) and viz.text: argument
order, token axes, number formats, titles."""

import inspect
import re

import numpy as np
import plotly.graph_objects as go
import pytest

import viz.architecture
import viz.attention
import viz.decoding
import viz.embeddings
import viz.head
import viz.heatmap
import viz.kinds
import viz.layout
import viz.masks
import viz.positional
import viz.scales
import viz.text
import viz.token_axes
import viz.transport
from hover_support import cell_hover
from viz.attention import attention_figure, heads_figure, overview_figure
from viz.heatmap import MASK_TRACE_NAME, heatmap
from viz.kinds import axis_titles, kind_sides
from viz.layout import style
from viz.text import PROB_D3, TITLE_WRAP_CHARS, fmt_prob, fmt_share, visible_len, wrap_title
from viz.token_axes import (
    FACET_ROW_PX,
    MAX_HEIGHT,
    MAX_PANEL_PX,
    MIN_HEIGHT,
    MIN_TICK_FONT,
    MIN_TICK_PX,
    ROW_PX,
    heatmap_height,
    plot_rows_px,
    plot_width_px,
    tick_step,
)

MODULES = [viz.heatmap, viz.token_axes, viz.layout, viz.kinds, viz.scales, viz.transport, viz.text, viz.attention,
           viz.embeddings, viz.positional, viz.head, viz.masks, viz.decoding, viz.architecture]


def probs(*shape, seed=0):
    """Random softmax rows of the given shape (..., i, j)."""
    x = np.random.default_rng(seed).normal(size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def words(n):
    return [f"w{k}" for k in range(n)]


def value_trace(fig):
    return next(t for t in fig.data if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME)


def public_functions():
    for mod in MODULES:
        for name, f in inspect.getmembers(mod, inspect.isfunction):
            if f.__module__ == mod.__name__ and not name.startswith("_"):
                yield f"{mod.__name__}.{name}", f


# --- 1. argument order: (z, query/row tokens, key/column tokens) everywhere ---------------

def test_every_function_takes_query_or_row_tokens_before_key_or_column_tokens():
    pairs = [("query_tokens", "key_tokens"), ("row_tokens", "col_tokens"),
             ("row_title", "col_title"), ("row_name", "col_name"), ("row_hover", "col_hover"),
             ("n_rows", "n_cols")]
    checked = 0
    for name, f in public_functions():
        params = list(inspect.signature(f).parameters)
        old = {"x_tokens", "y_tokens", "x_title", "y_title", "x_name", "y_name"} & set(params)
        assert not old, f"{name} still takes {old}"
        for first, second in pairs:
            if first in params and second in params:
                checked += 1
                assert params.index(first) < params.index(second), f"{name}: {params}"
    assert checked >= 12


def test_heatmap_rows_first_and_old_positional_calls_fail_loudly():
    z = np.arange(6, dtype=np.float32).reshape(2, 3)  # (i, j) = (2 queries, 3 keys)
    fig = heatmap(z, ["q0", "q1"], ["k0", "k1", "k2"], row_title="rows", col_title="cols")
    assert list(fig.layout.yaxis.ticktext) == ["q0", "q1"]
    assert list(fig.layout.xaxis.ticktext) == ["k0", "k1", "k2"]
    assert fig.layout.yaxis.title.text == "rows" and fig.layout.xaxis.title.text == "cols"
    assert cell_hover(value_trace(fig), 1, 2) == "query: q1 (1)<br>key: k2 (2)<br>weight: 5.000"
    with pytest.raises(ValueError, match="query \\(row\\) tokens"):
        heatmap(z, ["k0", "k1", "k2"], ["q0", "q1"], row_title="r", col_title="c")
    with pytest.raises(TypeError):  # the old order (z, x_tokens, y_tokens, x_title, y_title)
        heatmap(z, ["k0", "k1", "k2"], ["q0", "q1"], "x", "y")
    with pytest.raises(TypeError):
        viz.heatmap.facet_heatmaps(z[None], ["p"], None, None, "x", "y")


# --- 3. token axes: height grows with the rows, crowded labels are thinned ---------------

def test_height_rule_is_monotone_and_clamped():
    toks = words(100)
    heights = [heatmap_height(n, toks) for n in range(1, 101)]  # same key labels
    assert heights == sorted(heights)
    assert min(heights) == MIN_HEIGHT and max(heights) == MAX_HEIGHT
    grow = [b - a for a, b in zip(heights, heights[1:]) if MIN_HEIGHT < a and b < MAX_HEIGHT]
    assert grow and set(grow) == {ROW_PX}


def test_thirteen_tokens_every_label_at_full_size():
    toks = words(13)
    fig = attention_figure(probs(13, 13), toks, toks, "enc_self")
    assert fig.layout.height == heatmap_height(13, toks, 1) > MIN_HEIGHT
    assert plot_rows_px(fig.layout.height, toks, 1) == 13 * ROW_PX
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert list(axis.tickvals) == list(range(13)) and list(axis.ticktext) == toks
        assert axis.tickfont.size >= 13


def test_sixty_tokens_are_all_labelled_while_the_labels_fit():
    """More than the 40 labels a count once allowed: every row labelled where the rows are tall enough for them."""
    toks = words(60)
    fig = attention_figure(probs(60, 60), toks, toks, "enc_self")
    assert fig.layout.height == MAX_HEIGHT
    rows_px = plot_rows_px(MAX_HEIGHT, toks, 1)
    assert rows_px / 60 >= MIN_TICK_PX  # room for every row's label
    y = fig.layout.yaxis
    assert list(y.tickvals) == list(range(60)) and list(y.ticktext) == toks
    assert MIN_TICK_FONT == 10 and y.tickfont.size >= MIN_TICK_FONT


def test_a_hundred_and_twenty_tokens_thinned_labels_full_hover():
    toks = words(120)
    fig = attention_figure(probs(120, 120), toks, toks, "enc_self")
    rows_px = plot_rows_px(MAX_HEIGHT, toks, 1)
    for axis in (fig.layout.yaxis, fig.layout.xaxis):
        vals = list(axis.tickvals)
        step = vals[1] - vals[0]
        assert step >= 2 and vals == list(range(0, 120, step))
        assert list(axis.ticktext) == toks[::step]
        assert axis.tickfont.size >= MIN_TICK_FONT
    y_step = fig.layout.yaxis.tickvals[1]
    assert rows_px / 120 * y_step >= MIN_TICK_PX > rows_px / 120 * (y_step - 1)
    trace = value_trace(fig)  # every row and column named on hover, though only some are labelled
    assert len(trace.x) == len(trace.y) == 120
    assert cell_hover(trace, 63, 0).startswith("query: w63 (63)<br>key: w0 (0)<br>")
    assert cell_hover(trace, 0, 63).startswith("query: w0 (0)<br>key: w63 (63)<br>")


def test_tick_step_rule():
    assert tick_step(13) == 1 and tick_step(41) == 2 and tick_step(100) == 3  # no length known: the count rule
    assert tick_step(65, axis_px=65 * MIN_TICK_PX) == 1  # a known length: every label that fits
    assert tick_step(20, axis_px=20 * MIN_TICK_PX) == 1
    assert tick_step(20, axis_px=10 * MIN_TICK_PX) == 2


def test_width_hint_decides_how_many_key_labels_fit():
    toks = words(30)
    wide = attention_figure(probs(30, 30), toks, toks, "cross", width_px=1050).layout.xaxis
    narrow = attention_figure(probs(30, 30), toks, toks, "cross", width_px=330).layout.xaxis
    assert list(wide.tickvals) == list(range(30)) and wide.tickangle == -45
    assert len(narrow.tickvals) < 30 and narrow.tickangle == -90  # upright labels fit more
    px = plot_width_px(330, toks) / 30 * (narrow.tickvals[1] - narrow.tickvals[0])
    assert px >= MIN_TICK_PX and narrow.tickfont.size >= MIN_TICK_FONT


def test_facet_panels_grow_then_thin():
    small, big = words(13), words(65)
    fig = heads_figure(probs(4, 13, 13), small, small, "enc_self", layer=0)
    assert list(fig.layout.yaxis.tickvals) == list(range(13))
    fig = heads_figure(probs(4, 65, 65), big, big, "enc_self", layer=0)
    assert FACET_ROW_PX * 65 > MAX_PANEL_PX  # the panel is clamped, so labels thin out
    for axis in (fig.layout.yaxis, fig.layout.xaxis4):
        vals = list(axis.tickvals)
        assert vals[1] - vals[0] >= 2 and axis.tickfont.size >= MIN_TICK_FONT


def test_no_font_below_minimum_in_crowded_figures():
    toks = words(100)
    figs = [attention_figure(probs(100, 100), toks, toks, "cross", mask=np.ones(100, bool)),
            heads_figure(probs(4, 100, 100), toks, toks, "cross", layer=0),
            viz.masks.mask_figure(np.tril(np.ones((100, 100), bool)), toks, toks),
            viz.decoding.step_cross_attention_figure(probs(1, 100)[0], toks)]
    for fig in figs:
        sizes = [a.tickfont.size for name in fig.layout if name.startswith(("xaxis", "yaxis"))
                 for a in [fig.layout[name]] if a.tickfont.size is not None]
        sizes += [a.font.size for a in fig.layout.annotations if a.font.size is not None]
        assert sizes and min(sizes) >= MIN_TICK_FONT


# --- 6. one probability format ------------------------------------------------------------

def test_fmt_prob_three_decimals():
    assert fmt_prob(0.5) == "0.500" and fmt_prob(1) == "1.000" and fmt_prob(0.12345) == "0.123"
    assert fmt_prob(0.0) == "0.000" and fmt_prob(0.0002) == "<0.001"
    assert fmt_prob(np.float32(0.25)) == "0.250" and fmt_prob(float("nan")) == "–"
    assert format(0.123456, PROB_D3) == fmt_prob(0.123456)  # the browser's twin


def test_probability_hovers_use_three_decimals():
    toks = words(5)
    figs = [attention_figure(probs(5, 5), toks, toks, "enc_self"),
            heads_figure(probs(2, 5, 5), toks, toks, "enc_self", layer=0),
            overview_figure(probs(2, 2, 5, 5), "enc_self")]
    for fig in figs:
        for t in fig.data:
            if isinstance(t, go.Heatmap) and t.name != MASK_TRACE_NAME:
                assert f"%{{z:{PROB_D3}}}" in t.hovertemplate


def test_fmt_share_never_rounds_to_zero():
    assert fmt_share(300, 1000) == "30.0 %" and fmt_share(0, 1000) == "0 %"
    assert fmt_share(6, 10_000) == "0.060 %"
    assert fmt_share(512, 9_172_526) == "0.0056 %"
    assert fmt_share(1, 10**9) == "0.00000010 %"


# --- 8. language names --------------------------------------------------------------------

def test_language_names_are_arguments_with_the_old_defaults():
    assert axis_titles("cross") == ("query (EN, decoder input) ↓", "key (DE, source) →")
    assert kind_sides("enc_self", src_lang="FR") == ("FR, source", "FR, source")
    assert axis_titles("dec_self", "FR", "IT")[0] == "query (IT, decoder input) ↓"
    fig = attention_figure(probs(3, 4), words(3), words(4), "cross", src_lang="French",
                           tgt_lang="Italian")
    assert "French" in fig.layout.xaxis.title.text and "Italian" in fig.layout.yaxis.title.text
    fig = viz.decoding.step_cross_attention_figure(probs(1, 4)[0], words(4), src_lang="French")
    assert "French" in fig.layout.xaxis.title.text
    fig = viz.masks.mask_figure(np.ones((3, 3), bool), words(3), words(3), kind="enc_self",
                                src_lang="<b>")
    assert "&lt;b&gt;" in fig.layout.xaxis.title.text


# --- 9. titles that fit a third of the page -----------------------------------------------

def test_wrap_title_lines_fit_and_markup_survives():
    text = "cross-attention (decoder → encoder): layer 3, all heads of the &lt;pad&gt; batch"
    wrapped = wrap_title(text, 30)
    lines = wrapped.split("<br>")
    assert len(lines) >= 2 and all(visible_len(line) <= 30 for line in lines)
    assert wrapped.replace("<br>", " ") == text
    assert "&lt;pad&gt;" in wrapped  # entities are never split
    sup = wrap_title("title<br><sup>a long subtitle that has to be wrapped somewhere</sup>", 20)
    for line in sup.split("<br>")[1:]:
        assert line.startswith("<sup>") and line.endswith("</sup>")
    assert wrap_title("short", 30) == "short" and wrap_title(None) is None
    assert wrap_title("a<br>b", 30) == "a<br>b"
    assert wrap_title("x" * 50, 30) == "x" * 50  # one word longer than the width keeps its line


def test_style_wraps_and_makes_room():
    one = style(go.Figure(), "short title")
    two = style(go.Figure(), "a title that is far too long for one third of the page")
    assert "<br>" in two.layout.title.text and "<br>" not in one.layout.title.text
    assert two.layout.margin.t > one.layout.margin.t
    assert "<br>" not in style(go.Figure(), "x " * 40, wrap_chars=None).layout.title.text


def every_figure():
    """One call of every public figure function with realistic inputs and default titles."""
    de, en = ["der", "Hund", "sieht", "die", "Katze", "."], ["the", "dog", "sees", "the", "cat"]
    pe = viz.positional.sinusoidal_encoding(20, 16)
    emb = np.random.default_rng(0).normal(size=(6, 16))
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(5, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    p = probs(5, 6)
    yield attention_figure(p, en, de, "cross")
    yield heads_figure(probs(4, 5, 5), en, en, "dec_self", layer=2)
    yield overview_figure(probs(3, 4, 5, 6), "cross")
    yield viz.masks.mask_figure(np.tril(np.ones((5, 5), bool)), en, en, kind="dec_self")
    yield from viz.head.head_pipeline_figures(q, k, v, None, np.ones((5, 6), bool), p, p @ v, en,
                                              de, "cross", dropout_probs=p * 1.1).values()
    yield viz.decoding.candidates_figure(en, [0.5, 0.2, 0.1, 0.1, 0.1])
    yield viz.decoding.step_cross_attention_figure(p[0], de)
    yield viz.architecture.architecture_figure(3, 3, 256, 4)
    yield viz.embeddings.embedding_heatmap(emb, de)
    yield viz.embeddings.scaling_figure(emb, emb * 16, 256, de)
    yield viz.embeddings.embedding_stages_figure(emb, emb, emb, emb, de)
    yield viz.embeddings.vocab_map_figure(emb[:, :2], de, [1])
    yield viz.positional.waves_figure(pe, [0, 1])
    yield viz.positional.pe_heatmap(pe)
    yield viz.positional.position_similarity_figure(pe)
    yield viz.positional.position_similarity_figure(pe, ref_position=10)


def test_every_default_title_fits_a_third_of_the_page():
    n = 0
    for fig in every_figure():
        title = fig.layout.title.text
        assert title, fig
        for line in re.split("<br>", title):
            assert visible_len(line) <= TITLE_WRAP_CHARS, title
        n += 1
    assert n >= 20
