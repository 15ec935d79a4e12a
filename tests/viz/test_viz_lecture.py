"""viz for the lecture kit: the presenter theme, high contrast, and the side-by-side figure."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.app_support import font_sizes
from viz.attention import attention_figure, heads_figure, overview_figure
from viz.compare import Side, side_by_side_figure
from viz.decoding import candidates_figure, step_cross_attention_figure
from viz.head import probs_figure
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, theme, using_theme

TOKENS = [f"wort{i}" for i in range(30)]


def probs(h: int, i: int, j: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).random((h, i, j)).astype(np.float32)
    return x / x.sum(-1, keepdims=True)


def figures():
    p = probs(4, 12, 14)
    return [
        attention_figure(p[0], TOKENS[:12], TOKENS[:14], "cross"),
        heads_figure(p, TOKENS[:12], TOKENS[:14], "cross", 0),
        overview_figure(p[None], "cross"),
        probs_figure(p[0], TOKENS[:12], TOKENS[:14], "cross"),
        candidates_figure(["a", "b", "c"], [0.7, 0.2, 0.1]),
        step_cross_attention_figure(p[0, 0], TOKENS[:14]),
        side_by_side_figure(Side("A", p, TOKENS[:12], TOKENS[:14]), Side("B", probs(4, 9, 11), TOKENS[:9],
                                                                             TOKENS[:11]), "cross", 0),
    ]


def test_presenter_theme_sets_every_font_to_at_least_20px_and_restores_the_default():
    with using_theme(PRESENTER_THEME):
        for fig in figures():
            sizes = list(font_sizes(fig.to_plotly_json()))
            assert sizes and min(sizes) >= 20, (fig.layout.title.text, min(sizes))
    assert theme() is DEFAULT_THEME
    assert min(font_sizes(figures()[0].to_plotly_json())) < 20  # the laptop view stays as it was


def test_presenter_labels_are_thinned_for_their_size():
    p = probs(1, 30, 30)[0]
    with using_theme(PRESENTER_THEME):
        big = attention_figure(p, TOKENS, TOKENS, "enc_self", width_px=900)
    small = attention_figure(p, TOKENS, TOKENS, "enc_self", width_px=900)
    assert len(big.layout.yaxis.tickvals) < len(small.layout.yaxis.tickvals)
    rows_px = big.layout.height - 200  # at most the plot's share of the height
    shown = big.layout.yaxis.range[0] + 0.5  # 30 rows do not fit at a readable height: a window of them
    assert big.layout.yaxis.autorange is False and shown < 30 and big.layout.dragmode == "pan"
    step = big.layout.yaxis.tickvals[1] - big.layout.yaxis.tickvals[0]
    assert rows_px / shown * step >= PRESENTER_THEME.tick  # labels at least a font size apart


def test_presenter_rows_are_a_window_at_a_readable_height_never_squeezed():
    """Rows that would be shorter than MIN_ROW_PX show as a window from the first row (the title says which and how
    to reach the rest); rows that fit are all shown, as on a laptop, where a figure grows with its rows."""
    from viz.heatmap import facet_heatmaps
    from viz.rows import MIN_ROW_PX
    from viz.token_axes import plot_rows_px

    for n in (6, 24, 100):
        p = probs(1, n, n)[0]
        tokens = [f"t{i}" for i in range(n)]
        with using_theme(PRESENTER_THEME):
            fig = attention_figure(p, tokens, tokens, "enc_self", width_px=900)
            rows_px = plot_rows_px(fig.layout.height, tokens, 2)
            grid = facet_heatmaps(probs(4, n, n), [f"head {h}" for h in range(4)], tokens, tokens, row_title="q",
                                  col_title="k", width_px=900)
        lo, hi = sorted(fig.layout.yaxis.range) if fig.layout.yaxis.range else (-0.5, n - 0.5)
        shown = hi - lo
        assert rows_px / shown >= MIN_ROW_PX - 1 and lo == -0.5  # readable rows, from the first
        assert ("rows 1–" in fig.layout.title.text) == (shown < n) and (shown < n) == (n * MIN_ROW_PX > rows_px)
        assert np.asarray(fig.data[0].z).shape[0] == n  # every row is in the figure, a drag away
        y_axes = [v for k, v in grid.layout.to_plotly_json().items() if k.startswith("yaxis")]
        assert len({tuple(a.get("range", ())) for a in y_axes}) == 1  # the heads show the same rows
        lo, hi = sorted(y_axes[0].get("range") or (-0.5, n - 0.5))
        assert all(a.get("matches") == "y" for a in y_axes[1:]) == (hi - lo < n)  # a window: they pan together
        assert (hi - lo < n) == (n == 100)  # 24 rows fit a 720 px screen at a readable height, 100 do not
    laptop = attention_figure(probs(1, 100, 100)[0], [f"t{i}" for i in range(100)], [f"t{i}" for i in range(100)],
                              "enc_self", width_px=900)
    assert laptop.layout.yaxis.autorange == "reversed" and "rows 1–" not in (laptop.layout.title.text or "")


def test_high_contrast_resolves_the_probability_scale():
    p = probs(1, 5, 5)[0]
    with using_theme(DEFAULT_THEME.high_contrast()):
        fig = attention_figure(p, TOKENS[:5], TOKENS[:5], "enc_self")
    plain = attention_figure(p, TOKENS[:5], TOKENS[:5], "enc_self")
    text = json.dumps(fig.to_plotly_json(), default=str)
    assert fig.data[0].colorscale != plain.data[0].colorscale
    assert '"prob"' not in text and '"signed"' not in text  # roles never reach plotly


def test_side_by_side_rows_are_heads_and_each_side_keeps_its_axes():
    a, b = probs(4, 6, 7, seed=1), probs(4, 3, 5, seed=2)
    fig = side_by_side_figure(Side("A · eins", a, TOKENS[:6], TOKENS[:7]), Side("B · zwei", b, TOKENS[10:13],
                                                                                 TOKENS[10:15]), "cross", 1)
    values = [d for d in fig.data if d.type == "heatmap"]
    assert len(values) == 8
    for h in range(4):  # row h: A's head h (column 1), B's head h (column 2), on the same row of subplots
        np.testing.assert_allclose(values[h].z, a[h])
        np.testing.assert_allclose(values[4 + h].z, b[h])
        ya, yb = (fig.layout[v.yaxis.replace("y", "yaxis")].domain for v in (values[h], values[4 + h]))
        assert ya == yb
    assert list(fig.layout.xaxis.ticktext) == TOKENS[:7] and list(fig.layout.xaxis2.ticktext) == TOKENS[10:15]
    assert list(fig.layout.yaxis2.ticktext) == TOKENS[10:13]
    notes = [an.text for an in fig.layout.annotations]
    assert "A · eins" in notes and "B · zwei" in notes and "head 4" in notes
    assert "layer 2" in fig.layout.title.text
    one = side_by_side_figure(Side("A", a, TOKENS[:6], TOKENS[:7]), Side("B", b, TOKENS[:3], TOKENS[:5]), "cross", 0,
                              heads=[2])
    np.testing.assert_allclose([d for d in one.data if d.type == "heatmap"][1].z, b[2])


def test_side_by_side_refuses_models_with_different_heads():
    with pytest.raises(ValueError, match="heads"):
        side_by_side_figure(Side("A", probs(4, 3, 3), TOKENS[:3], TOKENS[:3]),
                            Side("B", probs(8, 3, 3), TOKENS[:3], TOKENS[:3]), "cross", 0)
