"""Real-browser tests: presenter mode fits the screen, and the figures' cosmetic mends, measured in Chromium.

Presenter mode on every part of every page at 1280×720: tests/browser/test_browser_tour.py; at 1920×1080 and for
long sentences: test_browser_presenter_fit.py. A page of figures (written to a temporary script, run by its own
server) measures what the app's own pages might not show with the tiny test models: bar values clear of tick
labels and grid lines, training-step labels apart, the similarity figure's colour bar clear of the curve's axis,
no colour bar beside bars, bars that stand out in high contrast.
"""
from __future__ import annotations

import textwrap

import pytest

from browser_js import LAID_OUT_JS
from browser_support import ROOT, new_page, open_app, start_server, stop_server
from page_checks import MAIN_CHART, cut_text
from test_model_data import synthetic_corpus
from tiny_checkpoint import GERMAN

SENTENCE = GERMAN[2]  # long enough to take two lines of the presenter header at 1280 px
FILM_SENTENCE = synthetic_corpus()[-1][0]  # every word known to the model with a film (no "unknown" line)
SETTLED_JS = """() => document.querySelectorAll("[data-testid='stSkeleton']").length === 0
  && document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']") !== null"""


def settle(pg) -> None:
    """Wait until the page has drawn what its run sent: no placeholders, every chart laid out, two quiet frames."""
    pg.wait_for_function(SETTLED_JS, timeout=60_000, polling="raf")
    pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=60_000, polling="raf")


def model_for(view: str) -> dict:
    """The tiny model with a training film for Training, else the one with a head report."""
    return dict(ckpt="filmed", text=FILM_SENTENCE) if view == "Training" else dict(ckpt="demo", text=SENTENCE)


# ----------------------------------------------------------------------------- the app around the figures

def test_buttons_and_toggles_are_not_cut_side_by_side_at_1280px(chromium, app_server):
    """Two sentences side by side halve the columns (every view alone at 1280 px: the high-contrast tour)."""
    pg = new_page(chromium, width=1280, height=900)
    try:
        open_app(pg, app_server.link(view="Attention", text=SENTENCE, compare="sentence", text2=GERMAN[0]))
        settle(pg)
        assert pg.locator("[data-testid='stMain'] button").count() + pg.locator("[data-testid='stMain'] label").count()
        assert cut_text(pg) == []
    finally:
        pg.context.close()


def test_the_toolbar_offers_no_deploy_button(page, app_server):
    open_app(page, app_server.link(view="Attention", text=SENTENCE))
    settle(page)
    assert page.locator("[data-testid='stAppDeployButton']").count() == 0
    assert "Deploy" not in page.locator("[data-testid='stHeader']").inner_text()


# ----------------------------------------------------------------------------- a page of figures

FIGURES_APP = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})

    import numpy as np
    import streamlit as st

    from viz.decoding import candidates_figure, step_cross_attention_figure
    from viz.embeddings import scaling_figure
    from viz.positional import position_similarity_figure, sinusoidal_encoding
    from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme
    from viz.training import entropy_figure, loss_figure
    from views.plumbing.streamlit_internals import PAGE_CSS, style
    from views.parts.widgets import chart

    st.set_page_config(layout="wide")
    st.markdown(style(PAGE_CSS), unsafe_allow_html=True)
    theme = PRESENTER_THEME if st.query_params.get("present") else DEFAULT_THEME
    theme = theme.high_contrast() if st.query_params.get("contrast") else theme
    steps = np.array({steps})
    loss = np.linspace(9.6, 1.5, len(steps))
    tokens = ["▁Ein", "▁Mann", "▁mit", "▁eine", "m", "▁orangefarbenen", "▁Hut", ",", "▁der", "<eos>"]
    weights = np.array([0.473, 0.38, 0.01, 0.02, 0.002, 0.07, 0.01, 0.005, 0.02, 0.01], np.float32)
    emb = np.random.default_rng(0).normal(size=(len(tokens), 32)).astype(np.float32) / 10
    with using_theme(theme):
        left, right = st.columns(2)
        chart(left, candidates_figure(["▁A", "▁Man", "▁On", "▁The", "▁There"], [0.921, 0.064, 0.007, 0.003, 0.002]),
              key="candidates")
        chart(right, step_cross_attention_figure(weights, tokens, title="cross-attention, layer 3, mean of heads",
                                                 width_px=470), key="cross")
        left, right = st.columns(2)
        chart(left, loss_figure(steps, loss, loss + 0.3, len(steps) - 1, val_on="val"), key="loss")
        chart(right, entropy_figure(steps, np.stack([loss / 4, loss / 5], axis=1), len(steps) - 1,
                                    kind_name="cross-attention"), key="entropy")
        chart(st, position_similarity_figure(sinusoidal_encoding(50, 64), ref_position=10), key="similarity")
        chart(st, scaling_figure(emb, emb * 16, 256, tokens), key="scaling")
''')
FILM_STEPS = [0, 25, 50, 100, 200, 391, 400, 782, 800, 1174, 1565, 1600, 1956, 2348, 2739, 3131, 3200, 3522, 3908]


@pytest.fixture(scope="module")
def figures_server(atlas_checkpoints, tmp_path_factory):
    script = tmp_path_factory.mktemp("figures") / "figures_app.py"
    script.write_text(FIGURES_APP.format(root=str(ROOT), steps=FILM_STEPS), encoding="utf-8")
    log = tmp_path_factory.mktemp("figures_server") / "streamlit.log"
    server = start_server(atlas_checkpoints, "demo", log, script=str(script), extra_env={"OMP_NUM_THREADS": "1"})
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def figures_pages(chromium, figures_server):
    """The page of figures at a size and with the link's parameters, opened once for every test that reads it."""
    pages = {}

    def get(width: int, height: int, **params):
        key = (width, height, tuple(sorted(params.items())))
        if key not in pages:
            from playwright.sync_api import expect

            pg = pages[key] = new_page(chromium, width=width, height=height)
            open_app(pg, figures_server.link(**params))
            # the six charts mount one by one: wait for all of them, then for them to be laid out
            expect(pg.locator(MAIN_CHART), figures_server.log_tail()).to_have_count(6, timeout=60_000)
            settle(pg)
        return pages[key]

    yield get
    for pg in pages.values():
        pg.context.close()


# Boxes of the texts of a chart (by its key), as [left, top, right, bottom].
BOXES_JS = """([key, sel]) => [...document.querySelectorAll(`.st-key-${key} ${sel}`)]
  .map(e => e.getBoundingClientRect()).filter(r => r.width > 0 || r.height > 0)
  .map(r => [r.left, r.top, r.right, r.bottom])"""


def boxes(pg, key: str, selector: str) -> list[list[float]]:
    return pg.evaluate(BOXES_JS, [key, selector])


def meet(a, b, pad: float = 0.0) -> bool:
    """Boxes a and b overlap, or come closer than ``pad`` px."""
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


# Each size the app draws these figures at: a laptop page (two columns of about 450 px) and presenter mode.
LOOKS = {"laptop": (1000, 900, {}), "presenter": (1280, 720, {"present": 1})}


@pytest.mark.parametrize("look", list(LOOKS))
def test_bar_values_clear_the_tick_labels_and_grid_lines(figures_pages, look):
    width, height, params = LOOKS[look]
    pg = figures_pages(width, height, **params)
    for key in ("candidates", "cross"):
        values = boxes(pg, key, ".bartext")
        assert values, key  # "cross" labels its highest bar, the first, beside the y axis
        marks = boxes(pg, key, ".xtick text") + boxes(pg, key, ".ytick text") + boxes(pg, key, ".gridlayer path")
        hits = [(v, m) for v in values for m in marks if meet(v, m, pad=5)]  # closer than 5 px reads as touching
        assert hits == [], f"{key}: a bar value runs into a tick label or grid line: {hits}"
        svg = boxes(pg, key, ".main-svg")[0]
        assert all(v[0] >= svg[0] and v[2] <= svg[2] and v[1] >= svg[1] for v in values), key  # not cut off


@pytest.mark.parametrize("look", list(LOOKS))
def test_training_step_labels_stand_apart(figures_pages, look):
    width, height, params = LOOKS[look]
    pg = figures_pages(width, height, **params)
    for key in ("loss", "entropy"):
        labels = sorted(boxes(pg, key, ".xtick text"))
        assert len(labels) >= 4, key
        gaps = [b[0] - a[2] for a, b in zip(labels, labels[1:])]
        assert min(gaps) >= 4, f"{key}: step labels {min(gaps):.1f} px apart"


@pytest.mark.parametrize("look", list(LOOKS))
def test_the_similarity_colour_bar_clears_its_labels_and_the_curve(figures_pages, look):
    width, height, params = LOOKS[look]
    pg = figures_pages(width, height, **params)
    title = boxes(pg, "similarity", ".cbtitle text")
    ticks = boxes(pg, "similarity", ".colorbar .cbaxis text")
    bar = boxes(pg, "similarity", ".colorbar")
    curve_axis = boxes(pg, "similarity", ".g-y2title text") + boxes(pg, "similarity", ".y2tick text")
    assert title and ticks and bar and curve_axis
    assert [t for t in ticks if meet(t, title[0])] == [], "the colour bar's title runs into its tick labels"
    assert [c for c in curve_axis if meet(c, bar[0])] == [], "the colour bar runs into the curve's y axis"


def test_presenter_mode_draws_no_colour_bar_beside_bars(figures_pages):
    pg = figures_pages(*LOOKS["presenter"][:2], present=1)
    for key in ("candidates", "cross", "scaling"):
        assert boxes(pg, key, ".colorbar") == [], key
    assert boxes(pg, "similarity", ".colorbar")  # a heatmap keeps its own


# A hatched bar (the highlighted one: colour is not its only mark) is filled with a pattern whose background is its
# colour.
FILLS_JS = """key => [...document.querySelectorAll(`.st-key-${key} .bars path`)].map(p => {
  const fill = getComputedStyle(p).fill, id = fill.match(/url\\("?(#[^")]+)"?\\)/);
  const back = id && document.querySelector(`${id[1]} rect`);
  return back ? getComputedStyle(back).fill : fill;
})"""


def test_high_contrast_bars_stand_out_against_the_plot(figures_pages):
    pg = figures_pages(*LOOKS["presenter"][:2], present=1, contrast=1)
    for key in ("candidates", "cross"):
        fills = set(pg.evaluate(FILLS_JS, key))
        assert len(fills) == 2, (key, fills)  # the highlighted bar and the others
        assert min(_contrast(f) for f in fills) >= 3.0, (key, fills)


def _contrast(css: str) -> float:
    """WCAG contrast ratio of a CSS rgb() colour against white."""
    rgb = [int(v) / 255 for v in css[css.index("(") + 1: css.index(")")].split(",")[:3]]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 1.05 / (0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] + 0.05)
