"""viz in presenter mode and high contrast: figures fit the screen, colour bars only where asked, bars that stand
out, and the cosmetic mends that can be measured without a browser (tests/browser/test_browser_presenter.py measures the
pixels)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.viz.test_viz_fast_build import _builders
from viz.architecture import architecture_figure
from viz.attention import heads_figure
from viz.decoding import candidates_figure, step_cross_attention_figure
from viz.head import head_pipeline_figures, probs_figure
from viz.heads import offset_pattern_figure, pruning_figure
from viz.layout import text_px
from viz.positional import pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure
from viz.tables import candidates_csv, heads_csv, matrix_csv
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, below_controls, presenter_height, theme, using_theme
from viz.training import entropy_figure, loss_figure, step_positions, toy_loss_figure

# A film's steps: log-spaced, then every epoch's end, which crowd the right end of a log axis.
FILM_STEPS = [0, 25, 50, 100, 200, 391, 400, 782, 800, 1174, 1565, 1600, 1956, 2348, 2739, 3131, 3200, 3522, 3908]
LONG = ["▁Ein", "▁Mann", "▁mit", "▁einem", "▁orangefarbenen", "▁Hut", ",", "▁der", "▁etwas", "▁anstarrt", "."]


def _more_builders():
    """Figures _builders leaves out: the ones built with style() or with a height of their own."""
    pe = sinusoidal_encoding(50, 64)
    steps = np.asarray(FILM_STEPS)
    loss = np.linspace(9, 1.5, len(steps))
    return {
        "waves": lambda: waves_figure(pe),
        "positional matrix": lambda: pe_heatmap(pe),
        "similarity": lambda: position_similarity_figure(pe, ref_position=10),
        "architecture": lambda: architecture_figure(3, 3, 256, 4),
        "loss": lambda: loss_figure(steps, loss, loss + 0.2, 5, val_on="val"),
        "entropy": lambda: entropy_figure(steps, np.stack([loss / 4] * 3, axis=1), 5, kind_name="cross-attention"),
        "toy loss": lambda: toy_loss_figure([(25, 2.0), (50, 1.0)], 900),
        "offsets": lambda: offset_pattern_figure([-1, 0, 1], [0.2, 0.5, 0.3], "enc_self"),
        "pruning": lambda: pruning_figure({"all": [(0, 40.0), (6, 39.0)]}, {"all": 36}, 40.0, 1.0, sentences=100),
        "all heads, long tokens": lambda: heads_figure(np.full((4, 11, 11), 1 / 11, np.float32), LONG, LONG,
                                                       "enc_self", 0, width_px=940),
    }


def _figures() -> dict:
    out = {}
    for name, build in {**_builders(), **_more_builders()}.items():
        fig = build()
        for part, f in (fig.items() if isinstance(fig, dict) else [("", fig)]):
            out[f"{name} {part}".strip()] = f
    return out


def _colorbars(fig) -> list[str]:
    """Where a figure's JSON has a colour bar: plotly.js draws one for every `colorbar` given (see floor_fonts)."""
    found = []
    for i, trace in enumerate(fig.to_plotly_json()["data"]):
        found += [f"trace {i} ({trace['type']})"] * ("colorbar" in trace)
        found += [f"trace {i} ({trace['type']}) marker"] * ("colorbar" in (trace.get("marker") or {}))
    return found


def test_presenter_mode_adds_no_colour_bar_the_figure_did_not_ask_for():
    plain = {name: _colorbars(f) for name, f in _figures().items()}
    with using_theme(PRESENTER_THEME):
        presenter = {name: _colorbars(f) for name, f in _figures().items()}
    assert presenter == plain
    assert any(plain.values())  # heatmaps keep theirs
    # no bar, box or scatter has one
    assert not [n for n, bars in presenter.items() if any("marker" in b for b in bars)]


@pytest.mark.parametrize("build", [lambda: candidates_figure(["a", "b", "c"], [0.9, 0.02, 0.002]),
                                   lambda: offset_pattern_figure([-1, 0, 1], [0.9, 0.02, 0.002], "enc_self"),
                                   lambda: step_cross_attention_figure(np.array([0.9, 0.02, 0.002, 0.078]),
                                                                       ["a", "b", "c", "d"])],
                         ids=["candidates", "offset pattern", "where a step looked"])
def test_high_contrast_bars_stand_out_against_the_white_plot(build):
    """A weight of 0.002 is a sliver of a bar: in high contrast its colour must stand out (WCAG's 3:1 for graphics)."""
    plain = build()
    with using_theme(DEFAULT_THEME.high_contrast()):
        strong = build()
    plain_colours, strong_colours = (list(f.data[0].marker.color) for f in (plain, strong))
    assert strong_colours != plain_colours
    assert min(_contrast(c) for c in strong_colours) >= 3.0, strong_colours
    assert min(_contrast(c) for c in plain_colours) < 3.0  # the light blue this mends
    assert len(set(strong_colours)) == 2  # the highlighted bar still differs from the others


def test_high_contrast_row_sums_follow_the_theme():
    p = np.full((3, 3), 1 / 3, np.float32)
    with using_theme(DEFAULT_THEME.high_contrast()):
        fig = probs_figure(p, list("abc"), list("abc"), "enc_self")
    bars = [d for d in fig.data if d.type == "bar"]
    assert bars and bars[0].marker.color == DEFAULT_THEME.high_contrast().highlight_colour


def _contrast(colour: str) -> float:
    """WCAG contrast ratio of a #rrggbb colour against white."""
    rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return 1.05 / (lum + 0.05)


def test_every_presenter_figure_fits_below_the_headers_two_lines():
    with using_theme(PRESENTER_THEME):
        heights = {name: f.layout.height for name, f in _figures().items()}
    too_tall = {name: h for name, h in heights.items() if h and h > PRESENTER_THEME.height_px}
    assert too_tall == {}
    assert PRESENTER_THEME.height_px == presenter_height()  # the pickers are in the header's Choose
    assert heights["scaling"] and heights["all heads, long tokens"]  # sized, not left to plotly's 450 px default


def test_below_controls_shortens_presenter_figures_only():
    p = np.full((4, 11, 11), 1 / 11, np.float32)
    with using_theme(PRESENTER_THEME):
        with below_controls(rows=3, labelled=1):
            short = heads_figure(p, LONG, LONG, "enc_self", 0, width_px=940).layout.height
            inner = theme().height_px
        assert theme() is PRESENTER_THEME
    with below_controls(rows=3, labelled=1):
        assert theme() is DEFAULT_THEME
    assert short <= inner == presenter_height(rows=3, labelled=1) < PRESENTER_THEME.height_px


def test_presenter_token_labels_are_cut_and_hover_names_them_whole():
    p = np.full((11, 11), 1 / 11, np.float32)
    with using_theme(PRESENTER_THEME):
        fig = probs_figure(p, LONG, LONG, "enc_self", show_row_sums=False, width_px=940)
    ticks = list(fig.layout.xaxis.ticktext)
    assert max(len(t) for t in ticks) <= PRESENTER_THEME.max_label_chars
    assert any(t.endswith("…") for t in ticks + list(fig.layout.yaxis.ticktext))
    assert all(any(tok in name for name in fig.data[0].x) for tok in LONG)  # hover: the category names


def test_training_step_labels_do_not_touch_on_a_log_axis():
    """Epoch ends crowd the right end of the log axis: '1,174 1,565 2,348 3,908' ran together."""
    for t in (DEFAULT_THEME, PRESENTER_THEME):
        with using_theme(t):
            axis_px = 370.0  # the axis of a figure half the page wide, which step_positions assumes
            _, axis = step_positions(FILM_STEPS)
            ticks, labels = axis["tickvals"], axis["ticktext"]
            logs = np.log10(ticks)
            per_decade = axis_px / ((logs[-1] - logs[0]) * 1.15)
            for a, b in zip(range(len(ticks)), range(1, len(ticks))):
                gap = (logs[b] - logs[a]) * per_decade - (text_px(labels[a], t.tick) + text_px(labels[b], t.tick)) / 2
                assert gap >= t.min_tick_px, (labels[a], labels[b], gap)
            assert labels[0] == "0" and labels[-1] == "3,908" and len(labels) >= 4


def test_similarity_colour_bar_sits_in_the_gap_with_its_title_along_it():
    fig = position_similarity_figure(sinusoidal_encoding(50, 64), ref_position=10)
    bar = fig.data[0].colorbar
    assert bar.title.side == "right"  # along the bar: no wider than its tick labels
    assert fig.layout.xaxis.domain[1] < bar.x < fig.layout.xaxis2.domain[0]
    assert fig.layout.xaxis2.domain[0] - bar.x >= 0.2  # the bar, its labels and the curve's axis fit between


def test_csv_numbers_are_written_in_one_notation():
    m = np.array([[1.2e-5, 0.5], [-3e-9, 2.0]])
    texts = [matrix_csv(m, ["a", "b"], ["x", "y"]), heads_csv(m[None], ["a", "b"], ["x", "y"]),
             candidates_csv(["a", "b"], [0.99, 1.2e-5], 0)]
    numbers = [cell for text in texts for line in text.splitlines()[1:] for cell in line.split(",")
               if re.fullmatch(r"[-+0-9.eE]+", cell) and "." in cell]
    assert numbers and all(re.fullmatch(r"\d+\.\d{6}", n) for n in numbers), numbers
    assert "0.000012" in texts[0] and "0.000000" in texts[0]  # no "1.2e-05", no "-0.000000"


def test_a_figure_says_which_token_axes_label_only_some_tokens():
    """viz.token_axes.thinned_labels, the note under a chart, counts the labels the figure draws; hover names every
    cell, labelled or not."""
    from viz import plotly_internals
    from viz.token_axes import thinned_labels

    keys = [f"wort{i}" for i in range(31)]
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((31, 8)).astype(np.float32)
    probs = np.full((5, 31), 1 / 31, np.float32)
    scores = head_pipeline_figures(q, k, k, None, None, probs, probs @ k, keys[:5], keys, "cross")["scores"]
    labelled = len(scores.layout.xaxis.tickvals)
    assert labelled < 31  # a third of the page cannot hold 31 labels
    assert thinned_labels(plotly_internals.layout(scores)) == (f"Only some labels fit: key {labelled} of 31. "
                                                               "Hover a cell for its tokens.")
    assert [name.split(" (")[0] for name in scores.data[0].x] == keys  # every key is a cell hover names
    assert "%{x}" in scores.data[0].hovertemplate
    whole = head_pipeline_figures(q[:3], k[:4], k[:4], None, None, probs[:3, :4], probs[:3, :4] @ k[:4], keys[:3],
                                  keys[:4], "cross")["scores"]
    assert thinned_labels(plotly_internals.layout(whole)) is None


def test_the_inside_one_head_page_says_which_axes_label_only_some_tokens(tmp_path_factory):
    """Under a figure whose token axes label only some tokens, the page says how many (counted from the figure it
    drew); under one that labels them all, nothing. The figures come from the figure cache, which keeps the count
    (it keeps no layout to read it from later)."""
    from tests.app_support import demo_checkpoints, run_app, visible_text
    from tests.tiny_checkpoint import GERMAN

    long = " ".join([GERMAN[2].rstrip(" .")] * 4) + "."
    with demo_checkpoints(tmp_path_factory, "ckpts_keys_note"):
        short_page = visible_text(run_app(view="Inside one head", text=GERMAN[2], kind="enc_self"))
        at = run_app(view="Inside one head", text=long, kind="enc_self")
    assert not at.exception
    assert "Only some labels fit" not in short_page  # 12 tokens: every key and query labelled
    notes = re.findall(r"Only some labels fit: ([^.]*)\.", visible_text(at))
    assert notes, visible_text(at)[-800:]
    n = len(long.split()) + 2  # the words, the full stop split off, <eos>
    for note in notes:
        for shown, total in re.findall(r"(\d+) of (\d+)", note):
            assert 0 < int(shown) < int(total) == n, note
