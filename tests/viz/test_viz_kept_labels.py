"""The labels that matter survive thinning: patching's changed position and measured token, the highlighted bar,
the most-attended key of a step, a minimal pair's replaced tokens, the largest bars of "why A and not B"; and the
"why A and not B" figure leaves room for every text in presenter mode's short figure."""
from __future__ import annotations

import numpy as np
import pytest

from viz.decoding import step_cross_attention_figure
from viz.lab import contrast_figure, pair_difference_figure, position_effect_figure, token_bars_figure
from viz.layout import text_px
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme
from viz.token_axes import tick_step

N = 40  # more tokens than a narrow figure labels


def words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def dropped_by_the_step(n: int, step: int) -> int:
    """A position a plain step of ``step`` leaves unlabelled."""
    assert step > 1
    return next(i for i in range(n) if i % step)


def test_the_highlighted_bar_keeps_its_label():
    toks = words(N)
    plain = token_bars_figure(np.linspace(-1, 1, N), toks, "Δ", width_px=300).layout.xaxis
    step = plain.tickvals[1] - plain.tickvals[0]
    chosen = dropped_by_the_step(N, step) + step  # not the first: a neighbour on each side
    assert chosen not in plain.tickvals
    axis = token_bars_figure(np.linspace(-1, 1, N), toks, "Δ", highlight=chosen, width_px=300).layout.xaxis
    assert chosen in axis.tickvals and toks[chosen] in axis.ticktext
    assert list(axis.ticktext) == [toks[i] for i in axis.tickvals]


def test_the_most_attended_key_of_a_step_keeps_its_label():
    toks = words(N, "k")
    step = tick_step(N, 200, -45)
    top = dropped_by_the_step(N, step)
    w = np.full(N, 0.5 / (N - 1), np.float32)
    w[top] = 0.5
    axis = step_cross_attention_figure(w, toks, width_px=300).layout.xaxis
    assert top in axis.tickvals and toks[top] in axis.ticktext


def test_patching_keeps_the_changed_source_position_and_the_measured_tokens_decoder_position():
    src, dec = words(N, "s"), words(N, "d")
    enc, de = np.zeros((3, N)), np.zeros((3, N))
    with using_theme(PRESENTER_THEME):  # a short figure: its rows are thinned
        plain = position_effect_figure(enc, de, src, dec, "restored", width_px=600)
        step = plain.layout.yaxis.tickvals[1] - plain.layout.yaxis.tickvals[0]
        changed = dropped_by_the_step(N, step)
        measured = changed + step
        src[changed] = "Hund→Hunde"
        assert measured not in plain.layout.yaxis2.tickvals
        fig = position_effect_figure(enc, de, src, dec, "restored", width_px=600, keep_src=[changed],
                                     keep_dec=[measured])
    assert changed in fig.layout.yaxis.tickvals and "Hund→Hunde" in fig.layout.yaxis.ticktext
    assert measured in fig.layout.yaxis2.tickvals and f"d{measured}" in fig.layout.yaxis2.ticktext


def test_a_minimal_pairs_replaced_tokens_keep_their_labels():
    n = 90  # more rows than the tallest heatmap labels
    rows, cols = words(n, "q"), words(n, "k")
    plain = pair_difference_figure(np.zeros((n, n)), rows, cols, "enc_self", width_px=400)
    r_step = plain.layout.yaxis.tickvals[1] - plain.layout.yaxis.tickvals[0]
    c_step = plain.layout.xaxis.tickvals[1] - plain.layout.xaxis.tickvals[0]
    r, c = dropped_by_the_step(n, r_step), dropped_by_the_step(n, c_step)
    rows[r], cols[c] = "Hund→Hunde", "läuft→laufen"
    fig = pair_difference_figure(np.zeros((n, n)), rows, cols, "enc_self", width_px=400)
    assert r in fig.layout.yaxis.tickvals and "Hund→Hunde" in fig.layout.yaxis.ticktext
    assert c in fig.layout.xaxis.tickvals and "läuft→laufen" in fig.layout.xaxis.ticktext


def test_why_a_not_b_keeps_the_labels_of_its_largest_bars():
    toks = words(N, "t")
    ixg, rel = np.zeros(N), np.full(N, 1 / N)
    plain = contrast_figure(ixg, rel, toks, "a", "b", width_px=300).layout.xaxis2
    step = plain.tickvals[1] - plain.tickvals[0]
    top = dropped_by_the_step(N, step)
    ixg[top] = -2.0
    axis = contrast_figure(ixg, rel, toks, "a", "b", width_px=300).layout.xaxis2
    assert top in axis.tickvals and toks[top] in axis.ticktext


# ----------------------------------------------------------------------------- why A and not B, presenter mode

SRC = ["▁Eine", "▁Gruppe", "▁von", "▁Männern", "▁lädt", "▁Baum", "woll", "e", "▁auf", "▁einen", "▁Last", "wagen", "."]
TITLES = ["step 2: source words for A, not B",  # the page's, in presenter mode
          "step 2: which source words push towards “▁brown” rather than “▁black”"]


def panels_px(fig) -> tuple[float, float, float]:
    """(upper panel, lower panel, gap between them) in pixels, from the figure's height, margins and domains."""
    lay = fig.layout
    plots = lay.height - lay.margin.t - lay.margin.b
    up, low = lay.yaxis.domain, lay.yaxis2.domain
    return plots * (up[1] - up[0]), plots * (low[1] - low[0]), plots * (up[0] - low[1])


@pytest.mark.parametrize("theme", [PRESENTER_THEME, DEFAULT_THEME], ids=["presenter", "default"])
@pytest.mark.parametrize("title", TITLES, ids=["short title", "long title"])
@pytest.mark.parametrize("scale", [0.004, 0.4, 40.0])
def test_why_a_not_b_y_ticks_stand_a_line_apart_at_the_height_each_panel_gets(theme, title, scale):
    rng = np.random.default_rng(1)
    ixg = rng.normal(scale=scale, size=len(SRC))
    rel = np.abs(rng.normal(size=len(SRC)))
    rel /= rel.sum()
    with using_theme(theme):
        fig = contrast_figure(ixg, rel, SRC, "▁brown", "▁black", title=title, width_px=470)
    upper, lower, gap = panels_px(fig)
    for axis, px in ((fig.layout.yaxis, upper), (fig.layout.yaxis2, lower)):
        ticks, (lo, hi) = list(axis.tickvals), axis.range
        assert ticks and all(lo <= t <= hi for t in ticks)
        apart = [(b - a) / (hi - lo) * px for a, b in zip(ticks, ticks[1:])]
        assert not apart or min(apart) >= max(theme.min_tick_px, theme.tick), (title, scale, ticks, px)
    # The lower panel's title stands in the gap between the panels, clear of the upper panel's lowest tick label
    # (half a line below that panel) and of the lower panel.
    lower_title = next(a for a in fig.layout.annotations if a.text.startswith("relevance"))
    assert gap >= 1.3 * lower_title.font.size + theme.tick / 2


def test_in_presenter_mode_the_axis_titles_give_their_room_to_the_plots_and_the_page_title_fits_one_line():
    from viz.layout import title_wrap_chars
    from viz.text import title_lines

    rel = np.full(len(SRC), 1 / len(SRC))
    with using_theme(PRESENTER_THEME):
        fig = contrast_figure(np.linspace(-1, 1, len(SRC)), rel, SRC, "▁brown", "▁black", title=TITLES[0],
                              width_px=470)
        assert title_lines(TITLES[0].replace("2", "99"), title_wrap_chars(TITLES[0], 470)) == 1
    for axis in (fig.layout.yaxis, fig.layout.yaxis2, fig.layout.xaxis2):
        assert not (axis.title.text or "")  # no y title beside the ticks, no x title under the rotated labels
    assert [a.text for a in fig.layout.annotations] == ["input × gradient (nats)", "relevance (share)"]
    upper, lower, _ = panels_px(fig)
    assert min(upper, lower) >= 2 * 1.2 * PRESENTER_THEME.tick  # room for three labels on the signed axis
    assert len(fig.layout.yaxis.tickvals) >= 3 and len(fig.layout.yaxis2.tickvals) >= 2
    with using_theme(DEFAULT_THEME):
        wide = contrast_figure(np.linspace(-1, 1, len(SRC)), rel, SRC, "▁brown", "▁black", title="t", width_px=940)
    assert wide.layout.yaxis.title.text == "nats" and "source token" in wide.layout.xaxis2.title.text
    assert text_px("relevance (share)", 22) < 470  # the lower title is centred inside the plot, not over the ticks
