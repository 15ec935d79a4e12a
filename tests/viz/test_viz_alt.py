"""viz.alt: every figure's text alternative is read from the figure's own data. Change the data and the words change;
every builder's figure gets a summary, details and tables that agree with the arrays it was drawn from."""
from __future__ import annotations

import numpy as np
import pytest
from test_viz_fast_build import _builders

from viz.alt import Alt, describe, fmt_number, grid_alt, plain, with_alt
from viz.alt_series import wave_period
from viz.attention import attention_figure, heads_figure, overview_figure
from viz.decoding import candidates_figure, step_cross_attention_figure
from viz.masks import mask_figure
from viz.positional import sinusoidal_encoding, waves_figure

Q = ["the", "dog", "runs", "."]
K = ["Der", "Hund", "läuft", "."]


def _weights(peak_col: int) -> np.ndarray:
    """(i, j) rows summing to 1, each with its largest weight (0.7) in column ``peak_col``."""
    w = np.full((len(Q), len(K)), 0.1, dtype=np.float32)
    w[:, peak_col] = 0.7
    return w


def test_heatmap_names_each_query_strongest_keys_with_their_weights():
    alt = describe(attention_figure(_weights(1), Q, K, "cross"))
    assert "dog (1) → Hund (1) (0.700)" in alt.summary or "→ Hund (1) (0.700)" in alt.summary
    rows = [line for line in alt.details if line.startswith(("the (0):", "dog (1):", "runs (2):", ". (3):"))]
    assert len(rows) == 4 and all(line.split(": ")[1].startswith("Hund (1) 0.700") for line in rows)


def test_changing_the_weights_changes_the_text():
    one, other = describe(attention_figure(_weights(1), Q, K, "cross")), describe(
        attention_figure(_weights(3), Q, K, "cross"))
    assert one.summary != other.summary
    assert any(line.startswith("dog (1): . (3) 0.700") for line in other.details)
    assert not any(". (3) 0.700" in line for line in one.details)


def test_table_holds_every_number_and_marks_masked_cells():
    mask = np.tril(np.ones((4, 4), bool))
    w = _weights(0) * mask
    alt = describe(attention_figure(w, Q, K, "dec_self", mask=mask))
    frame = alt.tables[0].frame()
    assert list(frame.columns) == ["Der (0)", "Hund (1)", "läuft (2)", ". (3)"]
    assert list(frame.index) == ["the (0)", "dog (1)", "runs (2)", ". (3)"]
    assert frame.iloc[0, 0] == "0.700" and frame.iloc[0, 1] == "masked" and frame.iloc[3, 3] == "0.100"
    assert "6 cells are masked" in alt.summary


def test_every_head_of_a_layer_is_a_panel_of_its_own():
    probs = np.stack([_weights(0), _weights(2)])
    alt = describe(heads_figure(probs, Q, K, "cross", 0))
    assert "head 1:" in alt.summary and "head 2: largest" in alt.summary and "→ läuft (2) (0.700)" in alt.summary
    assert [t.caption.split(":")[0] for t in alt.tables] == ["head 1", "head 2"]


def test_candidate_bars_list_every_candidate_and_the_chosen_one():
    alt = describe(candidates_figure(["a", "the", "<eos>"], [0.6, 0.3, 0.1], chosen_index=1))
    assert "a 0.600, the 0.300 and <eos> 0.100" in alt.summary
    assert "Highlighted: the (0.300)" in alt.summary
    frame = alt.tables[0].frame()
    assert frame.loc["the", "highlighted"] == "yes" and frame.loc["a", "highlighted"] == ""
    other = describe(candidates_figure(["a", "the", "<eos>"], [0.2, 0.5, 0.3], chosen_index=0))
    assert "Highlighted: a (0.200)" in other.summary and "the 0.500" in other.summary


def test_step_bars_name_the_source_tokens_even_when_the_axis_thins_its_labels():
    w = np.linspace(0.01, 0.1, 40).astype(np.float32)
    tokens = [f"w{i}" for i in range(40)]
    alt = describe(step_cross_attention_figure(w / w.sum(), tokens, width_px=300))
    assert "w39 (39)" in alt.summary  # the largest, named although the axis labels only some bars
    assert len(alt.tables[0].rows) == 40


def test_waves_say_which_dimensions_and_their_periods():
    pe = sinusoidal_encoding(100, 32)
    alt = describe(waves_figure(pe, [0, 1, 4]))
    assert "dim 0 (sin)" in alt.summary and "dim 1 (cos)" in alt.summary and "dim 4 (sin)" in alt.summary
    period = 2 * np.pi * 10000 ** (4 / 32)  # dimension 4's wavelength, in positions
    said = float(alt.summary.split("dim 4 (sin)")[1].split("repeating every ")[1].split()[0])
    assert abs(said - period) < 0.5
    assert alt.tables[0].columns == ("dim 0 (sin)", "dim 1 (cos)", "dim 4 (sin)")  # one table, one column per wave


def test_wave_period_of_a_sine_and_of_a_line_that_is_not_a_wave():
    x = np.arange(200, dtype=np.float64)
    assert abs(wave_period(x, np.sin(2 * np.pi * x / 25)) - 25) < 0.5
    assert wave_period(x, x ** 2) is None


def test_a_mask_says_per_query_which_keys_it_may_attend_to():
    mask = np.tril(np.ones((4, 4), bool))
    alt = describe(mask_figure(mask, Q, K, title="causal mask"))
    assert "may attend 10 cells" in alt.summary and "masked 6 cells" in alt.summary
    assert any(line.startswith("the (0): may attend 1 (Der (0)); masked 3") for line in alt.details)


def test_the_grid_of_every_layer_and_head_describes_each_thumbnail():
    probs = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)
    probs[1, 2] = np.eye(4)  # layer 2, head 3 looks at one key per query
    alt = describe(overview_figure(probs, "enc_self"))
    assert "Most focused: layer 2 head 3" in alt.summary and "(its rows' largest weights average 1.000)" in alt.summary
    assert len(alt.tables[0].rows) == 6


def test_an_attached_alt_wins_and_grid_alt_counts_from_the_data():
    fig = with_alt(attention_figure(_weights(0), Q, K, "cross"), Alt("mine"))
    assert describe(fig).summary == "mine"
    alt = grid_alt(np.stack([np.stack([_weights(0), _weights(2)])]), "t")
    assert "key position 0" in alt.details[1] and "key position 2" in alt.details[2]


@pytest.mark.parametrize("name", list(_builders()))
def test_every_figure_of_viz_has_a_text_alternative(name):
    built = _builders()[name]()
    for fig in built.values() if isinstance(built, dict) else [built]:
        alt = describe(fig)
        assert alt.summary and len(alt.summary) <= 620, alt.summary
        # plain text: the title without its markup, tokens unescaped ("<b>" is one of the tokens here)
        assert alt.summary.startswith(plain(fig.layout.title.text) or "Figure") and "&lt;" not in alt.summary
        assert "<br>" not in alt.summary
        for table in alt.tables:
            frame = table.frame()
            assert frame.shape == (len(table.rows), len(table.columns))


def test_tokens_with_markup_are_plain_text():
    alt = describe(attention_figure(_weights(0), ["<b>x</b>", "&", "a", "b"], K, "cross"))
    assert "<b>x</b> (0)" in " ".join(alt.details) and "&amp;" not in " ".join(alt.details)


def test_numbers_are_written_as_in_the_figures():
    assert fmt_number(0.5) == "0.500" and fmt_number(0.0002) == "<0.001" and fmt_number(3, whole=True) == "3"
    assert fmt_number(float("nan")) == "" and fmt_number(12345.6) == "12,346"
