"""The colours of the figures read with the common colour-vision deficiencies, and colour never carries a meaning
alone.

Each colour is passed through the full-severity simulation of protanopia, deuteranopia and tritanopia of Machado,
Oliveira and Fernandes (2009, "A physiologically-based model for simulation of color vision deficiency", IEEE
TVCG 15(6)): a 3 × 3 matrix applied to linear RGB. Then CIELAB (D65) says how light each colour is (L*) and how far
apart two colours are (ΔE*ab, CIE 1976; about 2 is just noticeable, above 20 two colours are not confused):

- a sequential scale (probabilities, the high-contrast Viridis) keeps its lightness monotonic, so more weight is
  darker (or lighter) for everyone, and its ends stay far apart;
- a diverging scale (signed values) keeps its middle the lightest, each half monotonic in lightness, and its two
  ends apart, so the sign stays readable;
- the highlighted bar and the others, may-attend and masked, stay apart; besides, the highlighted bar is hatched,
  masked cells carry an "x", and the lines of one figure differ by dash.

The text inside the charts (SVG, which axe-core leaves undecided) is checked here too: every font colour the app's
chart look writes reaches WCAG AA's 4.5:1 on the chart's background.
"""
from __future__ import annotations

import numpy as np
import pytest
from plotly.colors import hex_to_rgb, sample_colorscale

from viz.decoding import bar_marker, candidates_figure
from viz.heads import pruning_figure
from viz.heatmap import MASK_COLOUR
from viz.look import baked_look
from viz.masks import ALLOWED_COLOUR, MASKED_COLOUR, mask_figure
from viz.positional import sinusoidal_encoding, waves_figure
from viz.scales import resolve_scale
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme
from viz.training import entropy_figure, loss_figure

MACHADO = {  # severity 1.0, rows: simulated R, G, B from linear R, G, B
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                     [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}
VISIONS = ["typical", *MACHADO]
THEMES = {"default": DEFAULT_THEME, "high contrast": DEFAULT_THEME.high_contrast(),
          "presenter, high contrast": PRESENTER_THEME.high_contrast()}


def _rgb(colour: str) -> tuple[float, float, float]:
    colour = colour.strip()
    if colour.startswith("#"):
        return tuple(float(v) for v in hex_to_rgb(colour))
    return tuple(float(v) for v in colour[colour.index("(") + 1:-1].split(",")[:3])


def lab(colours, vision: str = "typical") -> np.ndarray:
    """CIELAB (D65) of sRGB colours ("#rrggbb" or "rgb(r, g, b)") as seen with ``vision``; (n, 3)."""
    c = np.asarray([_rgb(x) for x in colours], dtype=np.float64) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    if vision != "typical":
        linear = np.clip(linear @ np.asarray(MACHADO[vision]).T, 0.0, 1.0)
    to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = linear @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=-1)


def delta_e(a: str, b: str, vision: str) -> float:
    la, lb = lab([a, b], vision)
    return float(np.linalg.norm(la - lb))


def scale_colours(scale, n: int = 41) -> list[str]:
    return sample_colorscale(resolve_scale(scale), list(np.linspace(0.0, 1.0, n)))


def test_the_simulation_keeps_grey_grey_and_confuses_red_and_green_for_deuteranopes():
    assert delta_e("#808080", "#808080", "deuteranopia") == 0
    grey = lab(["#777777"], "protanopia")[0]
    assert abs(grey[1]) < 1 and abs(grey[2]) < 1  # the matrices keep neutral colours neutral
    assert delta_e("#d62728", "#2ca02c", "typical") > 60 > 3 * delta_e("#d62728", "#2ca02c", "deuteranopia") / 2


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("theme_name", list(THEMES))
def test_sequential_scales_stay_monotonic_in_lightness(theme_name, vision):
    with using_theme(THEMES[theme_name]):
        scales = {"probabilities": resolve_scale("prob"), "similarity": resolve_scale("Viridis")}
    for name, scale in scales.items():
        light = lab(scale_colours(scale), vision)
        steps = np.diff(light[:, 0])
        assert (steps > 0).all() or (steps < 0).all(), f"{name} ({theme_name}) is not monotonic for {vision}"
        assert np.linalg.norm(light[0] - light[-1]) > 60, f"{name}: ends too close for {vision}"


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("theme_name", list(THEMES))
def test_diverging_scales_keep_their_sign_readable(theme_name, vision):
    with using_theme(THEMES[theme_name]):
        light = lab(scale_colours(resolve_scale("signed")), vision)  # 41 colours, the middle at 20
    assert np.argmax(light[:, 0]) in (19, 20, 21), "the middle (0) is not the lightest"
    assert (np.diff(light[:21, 0]) > 0).all() and (np.diff(light[20:, 0]) < 0).all()
    assert np.linalg.norm(light[0] - light[-1]) > 30, f"negative and positive ends look alike for {vision}"


@pytest.mark.parametrize("vision", VISIONS)
@pytest.mark.parametrize("theme_name", list(THEMES))
def test_two_colour_meanings_stay_apart(theme_name, vision):
    t = THEMES[theme_name]
    assert delta_e(t.bar_colour, t.highlight_colour, vision) > 40  # the chosen / most-attended bar
    assert delta_e(ALLOWED_COLOUR, MASKED_COLOUR, vision) > 40  # may attend / masked
    assert abs(np.diff(lab([ALLOWED_COLOUR, MASKED_COLOUR], vision)[:, 0])[0]) > 25  # apart in greyscale too
    with using_theme(t):
        weights = lab(scale_colours(resolve_scale("prob"), 101), vision)
    closest = np.linalg.norm(weights - lab([MASK_COLOUR], vision)[0], axis=1).min()
    assert closest > 10, "a masked cell's grey looks like a weight (the 'x' on it still tells them apart)"


def test_the_highlighted_bar_is_hatched_as_well_as_coloured():
    marker = bar_marker(4, 2)
    assert marker["pattern"]["shape"] == ["", "", "/", ""]
    bars = candidates_figure(["a", "b", "c"], [0.5, 0.3, 0.2], chosen_index=1).data[0]
    assert list(bars.marker.pattern.shape) == ["", "/", ""]


def test_masked_cells_carry_a_cross_as_well_as_grey():
    fig = mask_figure(np.tril(np.ones((4, 4), bool)), list("abcd"), list("abcd"))
    assert fig.data[1].mode == "markers" and len(fig.data[1].x) == 6


def _dashes(fig) -> list[str]:
    return [t.line.dash or "solid" for t in fig.data if t.type == "scatter" and "lines" in (t.mode or "")]


def test_lines_of_one_figure_differ_by_dash():
    figs = [waves_figure(sinusoidal_encoding(50, 32), [0, 1, 4, 5, 16, 17]),
            entropy_figure([10, 20, 30], np.random.default_rng(0).random((3, 3)), 1, kind_name="cross"),
            loss_figure([10, 20, 30], np.array([3.0, 2.0, 1.0]), np.array([3.5, 2.5, 1.5]), 2),
            pruning_figure({"enc_self": [(0, 30.0), (2, 25.0)], "cross": [(0, 30.0), (2, 10.0)],
                            "all": [(0, 30.0), (4, 5.0)]}, {"enc_self": 4, "cross": 4, "all": 8}, 30.0, 1.0,
                           sentences=10)]
    for fig in figs:
        dashes = _dashes(fig)
        assert len(dashes) > 1 and len(set(dashes)) == len(dashes), (fig.layout.title.text, dashes)


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    def luminance(colour: str) -> float:
        c = np.asarray(_rgb(colour)) / 255.0
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _font_colours(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "color" and path.endswith("font") and isinstance(v, str):
                yield path, v
            else:
                yield from _font_colours(v, f"{path}.{k}" if path else k)


def test_chart_text_reaches_aa_contrast():
    layout = baked_look()["layout"]
    colours = dict(_font_colours(layout))
    assert "font" in colours and "xaxis.tickfont" in colours and "hoverlabel.font" in colours
    for path, colour in colours.items():
        background = layout["hoverlabel"]["bgcolor"] if path.startswith("hoverlabel") else layout["paper_bgcolor"]
        assert contrast(colour, background) >= 4.5, f"{path}: {colour} on {background}"
    assert contrast("#808495", "#ffffff") < 4.5  # Streamlit's own chart grey, which the look darkens
