"""The what-if lab's figures (viz/lab.py): shapes and labels checked, hovers name the head or position and value,
zero sits in the middle of every diverging scale, and each builds without validation to what plotly validates."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.hover_support import cell_hover
from viz.lab import (
    cell_text,
    contrast_figure,
    head_effect_grid,
    lens_figure,
    pair_difference_figure,
    position_effect_figure,
    symmetric_limit,
    token_bars_figure,
)
from viz.layout import validating
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme

SRC = ["Ein", "brauner", "Hund", "<b>", ".", "<eos>"]  # markup in a token is escaped, not drawn
TGT = ["A", "brown", "dog", ".", "<eos>"]


def _heads(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"enc_self": rng.normal(size=(3, 4)), "dec_self": rng.normal(size=(2, 4)), "cross": rng.normal(size=(2, 4))}


def _builders():
    rng = np.random.default_rng(3)
    diff = rng.normal(scale=0.1, size=(4, 5))
    mask = np.tril(np.ones((4, 5), bool))
    enc, dec = rng.normal(size=(3, len(SRC))), rng.normal(size=(2, len(TGT)))
    dec[1, 3] = np.nan
    return {
        "pair difference": lambda: pair_difference_figure(diff, ["A", "brown→black", "dog", "."], SRC[:5], "cross",
                                                          mask=mask, where=[["A 1, 2 · B 1, 2"] * 5] * 4,
                                                          title="B − A", width_px=900),
        "head grid": lambda: head_effect_grid(_heads(), "Δ log p (nats)", chosen=("cross", 1, 2), title="knockout"),
        "head grid, no values": lambda: head_effect_grid(_heads(), "x", cell_values=False),
        "token bars": lambda: token_bars_figure(rng.normal(size=len(TGT)), TGT, "Δ log p (nats)", highlight=2,
                                                title="one head", width_px=900),
        "positions": lambda: position_effect_figure(enc, dec, SRC, ["<bos>"] + TGT[:-1], "restored", title="p",
                                                    width_px=900),
        "lens": lambda: lens_figure([["dog", "cat", "<eos>"], ["dog", "cat", "a"]], np.array([[.5, .3, .1], [.9, .05,
                                    .01]]), np.array([.5, .9]), [1, 1], "dog", title="lens"),
        "contrast": lambda: contrast_figure(rng.normal(size=len(SRC)), np.full(len(SRC), 1 / len(SRC)), SRC,
                                            "brown", "black", title="why", width_px=900),
    }


def _sent(fig) -> list:
    return json.loads(fig.to_json())


@pytest.mark.parametrize("theme", [DEFAULT_THEME, PRESENTER_THEME], ids=["default", "presenter"])
@pytest.mark.parametrize("name", list(_builders()))
def test_unvalidated_build_sends_the_same_figure(name, theme):
    with using_theme(theme):
        with validating():
            checked = _sent(_builders()[name]())
        fast = _sent(_builders()[name]())
    assert fast == checked


@pytest.mark.parametrize("name", list(_builders()))
def test_presenter_mode_keeps_every_font_at_least_20_px(name):
    from tests.app_support import font_sizes

    with using_theme(PRESENTER_THEME):
        fig = _sent(_builders()[name]())
    assert min(font_sizes(fig)) >= 20


def test_a_pair_difference_is_centred_on_zero_and_its_hover_names_both_positions():
    diff = np.array([[0.2, -0.05], [0.0, 0.1]])
    fig = pair_difference_figure(diff, ["Hund", "brauner→schwarzer"], ["Ein", "<eos>"], "enc_self",
                                 where=[["A: query 2, key 0 · B: query 2, key 0"] * 2] * 2)
    trace = fig.data[0]
    assert trace.zmin == -0.2 and trace.zmax == 0.2  # symmetric: white is "unchanged"
    text = cell_hover(trace, 1, 1)
    assert "brauner→schwarzer (1)" in text and "&lt;eos&gt; (1)" in text and "+0.100" in text
    assert "A: query 2, key 0 · B: query 2, key 0" in text
    assert "aligned" in fig.layout.xaxis.title.text and "aligned" in fig.layout.yaxis.title.text


def test_a_pair_that_did_not_change_is_drawn_white_not_as_an_error():
    fig = pair_difference_figure(np.zeros((2, 2)), ["a", "b"], ["c", "d"], "cross")
    assert fig.data[0].zmax > 0 and fig.data[0].zmin == -fig.data[0].zmax


def test_head_grid_has_a_panel_per_kind_with_its_own_layers_and_hover_names_the_head():
    values = _heads()
    values["cross"][1, 2] = np.nan
    fig = head_effect_grid(values, "Δ log p (nats)", chosen=("cross", 1, 2))
    assert [t.name for t in fig.data] == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    assert np.asarray(fig.data[0].z).shape == (3, 4) and np.asarray(fig.data[2].z).shape == (2, 4)
    hover = fig.data[2].hovertemplate
    assert "cross-attention layer %{y}, head %{x}" in hover and "Δ log p (nats): %{z:+.3f}" in hover
    assert fig.data[2].text[1][2] == "n/a" and fig.data[0].text[0][0] == format(values["enc_self"][0, 0], "+.2f")
    lim = symmetric_limit(*[v for v in values.values()])
    assert fig.layout.coloraxis.cmin == -lim and fig.layout.coloraxis.cmax == lim
    assert [s.line.color for s in fig.layout.shapes] == ["#111827", "#ffffff"]  # the chosen head, outlined, not red


def test_token_bars_take_the_signed_colours_and_hover_gives_token_position_and_value():
    fig = token_bars_figure(np.array([-0.5, 0.25, 0.0]), ["A", "dog", "<eos>"], "Δ log p (nats)", highlight=1)
    bar = fig.data[0]
    assert bar.marker.color[0] != bar.marker.color[1]
    assert list(bar.customdata) == ["A (0)", "dog (1)", "&lt;eos&gt; (2)"]
    assert "output token: %{customdata}" in bar.hovertemplate and "%{y:+.3f}" in bar.hovertemplate
    with pytest.raises(ValueError, match="3 values but 2 tokens"):
        token_bars_figure(np.zeros(3), ["a", "b"], "x")


def test_position_grid_names_the_stream_layer_and_position():
    enc, dec = np.zeros((3, 2)), np.ones((2, 3))
    fig = position_effect_figure(enc, dec, ["Hund", "<eos>"], ["<bos>", "A", "dog"], "restored")
    assert list(fig.data[0].y) == ["Hund (0)", "&lt;eos&gt; (1)"] and list(fig.data[1].x) == [1, 2]
    assert np.asarray(fig.data[0].z).shape == (2, 3)  # positions down, layers across
    assert "encoder residual stream after layer %{x}, at %{y}" in fig.data[0].hovertemplate
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1
    with pytest.raises(ValueError, match="2 positions but 3 labels"):
        position_effect_figure(enc, dec, ["a", "b", "c"], ["<bos>", "A", "dog"], "restored")


def test_lens_writes_each_layers_candidates_and_the_chosen_tokens_probability_and_rank():
    fig = lens_figure([["dog", "cat"], ["<eos>", "dog"]], np.array([[0.6, 0.3], [0.7, 0.2]]), np.array([0.6, 0.2]),
                      [1, 2], "dog")
    cells, bars = fig.data
    assert cells.text[1][0] == "&lt;eos&gt;" and list(cells.y) == [1, 2]
    assert cell_hover(cells, 1, 0).startswith("layer 2, rank 1<br>token: &lt;eos&gt;<br>probability 0.700")
    assert list(bars.text) == ["0.600 · rank 1", "0.200 · rank 2"]
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1


def test_contrast_has_signed_and_relevance_panels_over_the_source():
    fig = contrast_figure(np.array([0.3, -0.2, 0.0]), np.array([0.7, 0.3, 0.0]), ["Ein", "Hund", "<eos>"],
                          "▁dog", "▁cat")
    ixg, rel = fig.data
    assert list(ixg.customdata) == ["Ein (0)", "Hund (1)", "&lt;eos&gt; (2)"]
    assert "log p(▁dog) − log p(▁cat)" in ixg.hovertemplate and "nats" in ixg.hovertemplate
    assert "relevance" in rel.hovertemplate
    with pytest.raises(ValueError, match="source tokens"):
        contrast_figure(np.zeros(2), np.zeros(3), ["a", "b", "c"], "x", "y")


def test_a_cell_that_rounds_to_zero_has_no_sign():
    assert cell_text(-1e-4, "+.2f") == "0.00" and cell_text(0.0, "+.2f") == "0.00"
    assert cell_text(-0.126, "+.2f") == "-0.13" and cell_text(float("nan"), "+.2f") == "n/a"


def test_a_share_of_a_gap_shows_the_nats_it_stands_for_and_the_gap_on_hover():
    values = _heads()
    values["cross"][0, 1] = np.nan
    fig = head_effect_grid(values, "share restored", zmin=-1.0, zmax=1.0, gap=-0.25)
    cross = fig.data[2]
    assert "of the gap of -0.250 nats" in cross.hovertemplate and "%{customdata:+.3f}" in cross.hovertemplate
    np.testing.assert_allclose(np.asarray(cross.customdata, dtype=float), values["cross"] * -0.25, equal_nan=True)
    assert cell_hover(cross, 1, 2).startswith(f"cross-attention layer 2, head 3<br>share restored: "
                                              f"{values['cross'][1, 2]:+.3f}<br>= ")
    enc, dec = np.full((3, 2), 0.5), np.ones((2, 3))
    pos = position_effect_figure(enc, dec, ["Hund", "<eos>"], ["<bos>", "A", "dog"], "share restored", gap=2.0)
    assert "of the gap of +2.000 nats" in pos.data[0].hovertemplate
    np.testing.assert_allclose(np.asarray(pos.data[0].customdata, dtype=float), enc.T * 2.0)  # (s, L), as z
    plain = head_effect_grid(values, "Δ log p (nats)")  # knockout: no gap, no extra line
    assert "gap" not in plain.data[0].hovertemplate and plain.data[0].customdata is None


# One colour language for effects on the translation (viz.scales.effect_scale): the warm end, red (orange in high
# contrast), is always "worse for the translation", whichever way the quantity drawn runs, and the legend says so.
RED, BLUE = "rgb(103,0,31)", "rgb(5,48,97)"  # RdBu_r's ends, the default theme's diverging scale
ORANGE = "rgb(127,59,8)"  # PuOr_r's warm end, the high-contrast theme's


def _colour(coloraxis, value: float) -> str:
    """The colour a cell of ``value`` is drawn in on a figure's colour axis."""
    from plotly.colors import sample_colorscale

    lo, hi = coloraxis.cmin, coloraxis.cmax
    return sample_colorscale([list(p) for p in coloraxis.colorscale], [(value - lo) / (hi - lo)])[0].replace(" ", "")


def test_knockout_draws_a_head_whose_loss_makes_the_translation_less_probable_red_and_says_so():
    values = {k: np.zeros((2, 4)) for k in ("enc_self", "dec_self", "cross")}
    values["cross"][1, 2], values["enc_self"][0, 0] = -0.8, 0.8  # without it: less probable / more probable
    fig = head_effect_grid(values, "Δ log p (nats)")
    axis = fig.layout.coloraxis
    assert _colour(axis, -0.8) == RED and _colour(axis, 0.8) == BLUE
    assert axis.colorbar.title.text == "Δ log p (nats)<br>red: worse for the translation"
    with using_theme(DEFAULT_THEME.high_contrast()):
        axis = head_effect_grid(values, "Δ log p (nats)").layout.coloraxis
    assert _colour(axis, -0.8) == ORANGE and "orange: worse for the translation" in axis.colorbar.title.text
    with using_theme(PRESENTER_THEME):  # large type along a short colour bar: the short form
        assert head_effect_grid(values, "Δ").layout.coloraxis.colorbar.title.text == "Δ<br>red: worse"
    why = head_effect_grid(values, "Δ (log p(A) − log p(B))", worse="worse for A")  # the Decoding page's A vs B
    assert _colour(why.layout.coloraxis, -0.8) == RED and "red: worse for A" in why.layout.coloraxis.colorbar.title.text


def test_one_head_off_draws_the_tokens_it_made_less_probable_red_and_says_so():
    fig = token_bars_figure(np.array([-0.5, 0.25, 0.0]), ["A", "dog", "<eos>"], "Δ log p (nats)", highlight=1)
    assert list(fig.data[0].marker.color[:2]) == [RED, BLUE]
    assert "red: worse" in fig.layout.xaxis.title.text


@pytest.mark.parametrize("gap", [2.0, -2.0])
def test_patching_draws_a_copy_that_lowered_log_p_red_whichever_the_sign_of_the_gap(gap):
    values = {k: np.zeros((2, 4)) for k in ("enc_self", "dec_self", "cross")}
    lowered = -0.5 if gap > 0 else 0.5  # a share × the gap: the nats the copy moved log p by, here −1
    values["cross"][0, 0], values["cross"][1, 1] = lowered, -lowered
    fig = head_effect_grid(values, "share restored", zmin=-1.0, zmax=1.0, gap=gap)
    axis = fig.layout.coloraxis
    assert _colour(axis, -1.0 if gap > 0 else 1.0) == RED and _colour(axis, 1.0 if gap > 0 else -1.0) == BLUE
    assert "red: worse for the translation" in axis.colorbar.title.text
    enc, dec = np.full((3, 2), lowered), np.full((2, 3), -lowered)
    pos = position_effect_figure(enc, dec, ["Hund", "<eos>"], ["<bos>", "A", "dog"], "share restored", gap=gap)
    axis = pos.layout.coloraxis
    assert _colour(axis, lowered) == _colour(fig.layout.coloraxis, lowered) and _colour(axis, 2 * lowered) == RED
    assert "red: worse for the translation" in axis.colorbar.title.text


def test_switching_a_head_off_reads_alike_on_the_heads_grid_and_on_what_if():
    """One lecture shows both: a head without which the loss rose (Heads) and one without which log p fell (What
    if) are the same news, drawn in the same red; the head that hurt is blue on both."""
    from viz.heads import head_grid_figure

    roles = {k: [[["mixed"]] * 2] * 2 for k in ("enc_self", "dec_self", "cross")}
    heads = head_grid_figure({k: np.array([[0.3, -0.3], [0.0, 0.1]]) for k in roles}, roles, "loss increase",
                             signed=True).layout.coloraxis
    knockout = head_effect_grid({k: np.array([[-0.3, 0.3], [0.0, 0.1]]) for k in roles},
                                "Δ log p (nats)").layout.coloraxis
    assert _colour(heads, 0.3) == _colour(knockout, -0.3) == RED
    assert _colour(heads, -0.3) == _colour(knockout, 0.3) == BLUE
    assert "red: worse for the translation" in heads.colorbar.title.text
