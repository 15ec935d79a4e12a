"""Real-browser tests of the views on a Marian model: `streamlit run app.py` serving an imported Marian model (a random
MarianMTModel imported as French → English, built in the test by tests/views/test_app_marian.py's fixture), in Chromium.
Every view draws without an exception, the Attention heatmap's axes carry the model's SentencePiece pieces and its
own languages, and a new sentence redraws the axes with that sentence's pieces."""
from __future__ import annotations

import html

import pytest
from playwright.sync_api import expect

from browser_support import (
    CHART,
    MAIN,
    assert_clean,
    choose_view,
    enter_text,
    new_page,
    open_app,
    start_test_server,
    stop_server,
    wait_charts,
)
from tests.views.test_app_marian import TEXT, VIEWS, marian_root  # noqa: F401  (marian_root is a fixture)

MODEL = "tiny-marian"
NEW_TEXT = "Ein Zebra frisst Äpfel im Schnee!"
# Views that draw no chart for this model: no head report yet (the page offers to compute it), no training film.
NO_CHARTS = {"Heads": "Compute the head report", "Training": "no film"}

# The drawn Plotly figure of the one-head heatmap: its axes as Plotly holds them in the page, and each axis's title
# as drawn (a note named after its axis: viz/axis_notes.py).
HEAD_AXES_JS = """() => {
  const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  const title = a => {
    const i = (gd.layout.annotations || []).findIndex(n => n.name === `${a} title`);
    const el = i >= 0 && gd.querySelector(`.annotation[data-index='${i}'] text`);
    return el ? el.textContent : '';
  };
  const ax = a => ({ticktext: [...(gd.layout[a].ticktext || [])], title: title(a),
                    drawn: [...gd.querySelectorAll(`g.${a[0]}tick text`)].map(t => t.textContent)});
  return {x: ax('xaxis'), y: ax('yaxis')};
}"""


@pytest.fixture(scope="module")
def marian_server(marian_root, tmp_path_factory):  # noqa: F811
    """`streamlit run app.py` serving `tiny-marian` (one torch thread, a cache folder of its own)."""
    server = start_test_server(marian_root, MODEL, tmp_path_factory)
    yield server
    stop_server(server)


@pytest.fixture
def marian_page(chromium, marian_server):
    pg = new_page(chromium)
    yield pg
    pg.context.close()


@pytest.fixture(scope="module")
def translator(marian_root):  # noqa: F811
    from model.inference.translator import Translator

    return Translator.from_checkpoint(marian_root / MODEL)


def head_axes(page) -> dict:
    """The one-head heatmap's axes: tick texts unescaped as Plotly draws them, titles, and the drawn tick labels."""
    # the page's charts draw one by one: wait for this one (by its key), not only for the first
    page.locator(".st-key-head_fig .js-plotly-plot .main-svg").first.wait_for(state="attached", timeout=60_000)
    axes = page.evaluate(HEAD_AXES_JS)
    for a in ("x", "y"):
        axes[a]["ticktext"] = [html.unescape(t) for t in axes[a]["ticktext"]]
    return axes


@pytest.mark.browser
@pytest.mark.slow
def test_every_view_draws_the_imported_model(marian_page, marian_server):
    open_app(marian_page, marian_server.link(view=VIEWS[0], text=TEXT))
    for view in VIEWS:
        if view != VIEWS[0]:
            choose_view(marian_page, view, timeout=60_000)
        main = marian_page.locator(MAIN)
        if view in NO_CHARTS:
            expect(main.get_by_text(NO_CHARTS[view]), view).not_to_have_count(0, timeout=60_000)
        else:
            assert wait_charts(marian_page, 60_000) >= 1, view
        assert_clean(marian_page, view)
        text = main.inner_text()
        assert "FR" in text and "German" not in text, view  # the model's languages, not the shipped model's
        # random weights never say </s>: the header names Marian's end token, not <eos>
        assert "stopped at the length limit before </s>" in text and "<eos>" not in text, view


@pytest.mark.browser
def test_attention_axes_are_the_models_pieces_and_name_its_languages(marian_page, marian_server, translator):
    pieces = list(translator.prepare(TEXT).axis_tokens)
    assert any(p.startswith("▁") for p in pieces) and pieces[-1] == "</s>"
    open_app(marian_page, marian_server.link(view="Attention", text=TEXT, kind="cross", layer=1, head=1))
    wait_charts(marian_page, 60_000)
    assert_clean(marian_page, "Attention")
    axes = head_axes(marian_page)
    assert axes["x"]["ticktext"] == pieces  # every source piece, word-start mark included
    assert axes["x"]["drawn"] == pieces  # and that is what the reader sees
    assert axes["y"]["ticktext"][0] == "<pad>"  # the decoder starts from Marian's start token
    assert "key (FR, source)" in axes["x"]["title"] and "query (EN, decoder input)" in axes["y"]["title"]
    titles = axes["x"]["title"] + axes["y"]["title"]
    assert "DE" not in titles and "German" not in titles and "English" not in titles


@pytest.mark.browser
def test_a_new_sentence_redraws_the_axes_with_its_pieces(marian_page, marian_server, translator):
    open_app(marian_page, marian_server.link(view="Attention", text=TEXT, kind="enc_self", layer=1, head=1))
    wait_charts(marian_page, 60_000)
    assert head_axes(marian_page)["x"]["ticktext"] == list(translator.prepare(TEXT).axis_tokens)
    enter_text(marian_page, NEW_TEXT, timeout=60_000)
    n = wait_charts(marian_page, 60_000)
    assert n == marian_page.locator(CHART).count() >= 1
    assert_clean(marian_page, "Attention after a new sentence")
    pieces = list(translator.prepare(NEW_TEXT).axis_tokens)
    assert pieces != list(translator.prepare(TEXT).axis_tokens)
    axes = head_axes(marian_page)
    assert axes["x"]["ticktext"] == pieces and axes["y"]["ticktext"] == pieces  # encoder self: source on both axes
    assert axes["x"]["drawn"] == pieces
    assert "(FR, source)" in axes["x"]["title"] and "(FR, source)" in axes["y"]["title"]
