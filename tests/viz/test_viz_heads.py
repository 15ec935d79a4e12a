"""Tests for viz.heads (the Heads page's figures) and viz.decoding.attribution_figure."""
import json

import numpy as np
import plotly.io
import pytest

from hover_support import cell_hover
from viz.decoding import attribution_figure
from viz.heads import (
    grid_layout,
    head_grid_figure,
    head_name,
    head_short,
    offset_pattern_figure,
    pruning_figure,
    short_role,
)

ROLES = {"enc_self": [[["positional -1"], ["mixed"]], [["sink", "diffuse"], ["diffuse"]]],
         "dec_self": [[["previous-token"], ["mixed"]], [["mixed"], ["sink"]]],
         "cross": [[["mixed"], ["aligner"]], [["aligner", "sink"], ["rare-word"]]]}


def test_grid_has_a_panel_per_kind_with_values_roles_and_exact_hover():
    values = {"enc_self": np.array([[0.1, 0.2], [0.3, 0.4]]), "dec_self": np.array([[0.5, np.nan], [0.7, 0.8]]),
              "cross": np.array([[0.9, 1.0], [0.05, 0.123456]])}
    fig = head_grid_figure(values, ROLES, "confidence", fmt=".4f")
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 3
    np.testing.assert_allclose(np.asarray(heat[2].z, dtype=float), values["cross"])
    assert np.isnan(np.asarray(heat[1].z, dtype=float)[0, 1])  # no value: left blank, not 0
    assert [list(r) for r in heat[0].text] == [["pos −1", "·"], ["sink", "diffuse"]]
    custom = np.asarray(heat[2].customdata, dtype=object)
    assert custom[1, 1, 1] == "0.1235" and custom[1, 0, 0] == "aligner, sink"  # hover: exact value, every label
    assert np.asarray(heat[1].customdata, dtype=object)[0, 1, 1] == "n/a"
    assert "layer %{y}, head %{x}" in heat[0].hovertemplate
    # one shared colour axis from the smallest to the largest value shown
    assert fig.layout.coloraxis.cmin == pytest.approx(0.05) and fig.layout.coloraxis.cmax == pytest.approx(1.0)
    assert all(t.coloraxis == "coloraxis" for t in heat)
    titles = [a.text for a in fig.layout.annotations]
    assert any("encoder self-attention" in t for t in titles) and any("cross-attention" in t for t in titles)
    plotly.io.to_json(fig)  # serialisable, as Streamlit will send it


def test_grid_says_when_a_measure_is_not_defined_for_a_kind_and_outlines_the_chosen_head():
    values = {"enc_self": np.array([[1.0, 2.0], [3.0, 4.0]]), "dec_self": np.array([[1.0, 1.5], [2.0, 2.5]]),
              "cross": None}
    fig = head_grid_figure(values, ROLES, "mean distance", chosen=("dec_self", 1, 0))
    assert sum(t.type == "heatmap" for t in fig.data) == 2
    assert any("not defined" in a.text for a in fig.layout.annotations)
    outer, inner = fig.layout.shapes
    for rect in (outer, inner):
        assert (rect.xref, rect.yref) == ("x2", "y2")  # the decoder panel
        assert (rect.x0, rect.x1, rect.y0, rect.y1) == (0.5, 1.5, 1.5, 2.5)  # head 1, layer 2 (1-based axes)
    # dark with a white line inside: never the red that means "worse" on the same grid
    assert (outer.line.color, inner.line.color) == ("#111827", "#ffffff") and outer.line.width > inner.line.width


def test_signed_measure_gets_a_symmetric_scale():
    values = {k: np.array([[-0.01, 0.03], [0.0, 0.02]]) for k in ROLES}
    fig = head_grid_figure(values, ROLES, "loss increase", signed=True)
    assert fig.layout.coloraxis.cmin == pytest.approx(-0.03) and fig.layout.coloraxis.cmax == pytest.approx(0.03)


def test_many_heads_stack_the_panels():
    assert grid_layout(3, 4) == (1, 3)
    assert grid_layout(3, 8) == (3, 1)  # an opus-mt model: 8 heads per layer need the page's width
    roles = {k: [[["mixed"]] * 8 for _ in range(6)] for k in ROLES}
    fig = head_grid_figure({k: np.random.default_rng(0).random((6, 8)) for k in ROLES}, roles, "confidence")
    doms = [fig.layout[f"yaxis{'' if p == 0 else p + 1}"].domain for p in range(3)]
    assert doms[0][0] > doms[1][1] > doms[1][0] > doms[2][1]  # one above the other


def test_a_head_has_one_name_in_words_and_one_short_form():
    assert head_name("cross", 1, 2) == "cross-attention layer 2, head 3"
    assert head_name("dec_self", 0, 0) == "decoder self-attention layer 1, head 1"
    assert head_short("cross", 1, 2) == "cross L2 H3" and head_short("enc_self", 2, 0) == "encoder self L3 H1"
    fig = head_grid_figure({k: np.zeros((2, 2)) for k in ROLES}, ROLES, "confidence")
    hovers = [t.hovertemplate for t in fig.data if t.type == "heatmap"]
    assert [h.split("<br>")[0] for h in hovers] == [
        head_name(k, 0, 0).replace("layer 1, head 1", "layer %{y}, head %{x}") for k in ROLES]


def test_short_roles():
    assert short_role([]) == "·" and short_role(["mixed"]) == "·"
    assert short_role(["positional +1", "sink"]) == "pos +1" and short_role(["unheard-of"]) == "unheard-of"


def test_offset_pattern_bars_mark_missing_offsets_and_the_peak():
    fig = offset_pattern_figure([-2, -1, 0, 1, 2], [0.1, 0.6, 0.2, None, 0.1], "enc_self")
    bar = fig.data[0]
    assert list(bar.x) == [-2, -1, 0, 1, 2] and list(bar.y) == [0.1, 0.6, 0.2, 0.0, 0.1]
    assert bar.customdata[3] == "no query had a key there" and bar.customdata[1] == "0.600"
    assert len(set(bar.marker.color)) == 2 and bar.marker.color[1] != bar.marker.color[0]
    assert "query position" in fig.layout.xaxis.title.text
    assert "diagonal" in offset_pattern_figure([0], [1.0], "cross").layout.xaxis.title.text
    with pytest.raises(ValueError):
        offset_pattern_figure([0, 1], [1.0], "cross")


def test_pruning_curve_in_percent_of_each_group_with_the_drop_line():
    curves = {"enc_self": [(0, 40.0), (6, 39.5), (12, 30.0)], "all": [(0, 40.0), (9, 39.1), (36, 0.5)]}
    fig = pruning_figure(curves, {"enc_self": 12, "all": 36}, 40.0, 1.0, sentences=500)
    enc, every = fig.data
    assert list(enc.x) == [0.0, 50.0, 100.0] and list(every.x) == [0.0, 25.0, 100.0]
    assert list(every.y) == [40.0, 39.1, 0.5] and every.customdata[1] == "9 of 36"
    (line,) = fig.layout.shapes
    assert line.y0 == line.y1 == 39.0
    assert fig.layout.yaxis.title.text == "greedy BLEU (first 500 val sentences)"  # the set and its size
    fig = pruning_figure(curves, {"enc_self": 12, "all": 36}, 40.0, 1.0, sentences=1200, split="test_2016_flickr")
    assert fig.layout.yaxis.title.text == "greedy BLEU (first 1,200 test_2016_flickr sentences)"


def test_attribution_figure_rows_are_methods_and_hover_keeps_the_signed_value():
    shares = np.array([[0.7, 0.2, 0.1], [0.3, 0.3, 0.4]])
    notes = [["", "", ""], ["signed: +0.500", "signed: -0.100", "signed: +0.200"]]
    fig = attribution_figure(shares, ["rollout", "input × gradient"], ["Ein", "Hund", "<eos>"], "step 1",
                             hover_notes=notes)
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float), shares, rtol=1e-6)
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    assert cell_hover(heat, 1, 1) == ("method: input × gradient (1)<br>source token: Hund (1)<br>share: 0.300"
                                      "<br>signed: -0.100")
    assert list(fig.layout.xaxis.ticktext) == ["Ein", "Hund", "&lt;eos&gt;"]
    assert json.loads(plotly.io.to_json(fig))["data"][0]["type"] == "heatmap"
    with pytest.raises(ValueError):
        attribution_figure(shares, ["one"], ["Ein", "Hund", "<eos>"], "x")


def test_the_loss_increase_is_drawn_red_where_switching_a_head_off_made_the_translation_worse_and_says_so():
    from plotly.colors import sample_colorscale

    from viz.theme import PRESENTER_THEME, using_theme

    values = {k: np.array([[-0.01, 0.03], [0.0, 0.02]]) for k in ROLES}
    axis = head_grid_figure(values, ROLES, "loss increase", signed=True).layout.coloraxis
    top = sample_colorscale([list(p) for p in axis.colorscale], [1.0])[0]  # the highest loss increase
    assert top.replace(" ", "") == "rgb(103,0,31)"  # RdBu_r's red
    assert axis.colorbar.title.text == "loss increase<br>red: worse for the translation"
    with using_theme(PRESENTER_THEME):  # the measure's box names it; what red means is still said, short
        assert head_grid_figure(values, ROLES, "loss increase", signed=True).layout.coloraxis.colorbar.title.text \
            == "red: worse"
        # a bar two layers short: its ends and 0 written (Plotly's own ticks left a lone "0"), and a title
        bar = head_grid_figure(values, ROLES, "confidence").layout.coloraxis.colorbar
        assert bar.title.text == "value" and list(bar.ticktext) == ["−0.01", "0", "0.03"]
    plain = head_grid_figure(values, ROLES, "confidence").layout.coloraxis.colorbar.title.text
    assert plain == "confidence"  # not an effect: no words of worse
