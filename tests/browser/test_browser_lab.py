"""Real-browser tests of the what-if lab: every new figure draws, hovering a cell or bar names the head or position
and its value as the figure holds it, and a copied link (the address bar after choosing in the page) restores
the same figures in a fresh session."""
from __future__ import annotations

import urllib.parse

import pytest

from browser_js import LAID_OUT_JS
from browser_support import (
    EXCEPTION,
    enter_text,
    new_page,
    open_app,
    runs,
    select_option,
    wait_charts,
    wait_new_run,
    widget,
)
from tiny_checkpoint import GERMAN

A = "Ein Hund läuft im Schnee."
B = "Zwei Hunde spielen im Schnee."  # as many tokens as A for the tiny model
A2, A3 = "Ein Hund läuft im Regen.", "Ein Mann schläft auf einem Sofa."
WHAT_IF = ["pair_fig", "pair_diff_fig", "knockout_fig", "knockout_bars", "patch_heads_fig", "patch_pos_fig"]
DECODING = ["lens_fig", "why_fig", "why_heads_fig"]

# The page coordinates of data point (x, y) of trace `trace` in the chart with key `key` (category axes take a
# category's name), found through the chart's own axes, so the mouse lands on that cell or bar.
POINT_JS = """([key, trace, x, y]) => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const t = gd._fullData[trace], fl = gd._fullLayout;
  const xa = fl[t.xaxis.replace('x', 'xaxis')], ya = fl[t.yaxis.replace('y', 'yaxis')];
  const box = gd.querySelector('.main-svg').getBoundingClientRect();
  return {x: box.left + xa._offset + xa.c2p(xa.d2c(x)), y: box.top + ya._offset + ya.c2p(ya.d2c(y))};
}"""

# What a chart shows: its title and every trace's values, to compare two sessions' drawings.
SHOWN_JS = """key => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const values = t => JSON.stringify(Array.from(t.type === 'bar' ? t.y : t.z, r => r && r.length !== undefined
                                                ? Array.from(r) : r));
  return {title: gd.layout.title && gd.layout.title.text, data: gd._fullData.map(values)};
}"""

# Where to point at a cell or bar, in data coordinates, and its value: (row i, column j) of a heatmap's z, or the
# middle of bar i.
VALUE_JS = """([key, trace, i, j]) => {
  const t = document.querySelector(`.st-key-${key} .js-plotly-plot`)._fullData[trace];
  if (t.type !== 'bar') return {x: t.x[j], y: t.y[i], v: t.z[i][j]};
  return t.orientation === 'h' ? {x: t.x[i] / 2, y: t.y[i], v: t.x[i]} : {x: t.x[i], y: t.y[i] / 2, v: t.y[i]};
}"""


def query(pg) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).items()}


def hover(pg, key: str, trace: int, i: int, j: int = 0) -> tuple[str, float]:
    """Move the mouse onto row i, column j (a heatmap) or bar i of a trace; (the hover's text, the value there)."""
    chart = pg.locator(f".st-key-{key}")
    chart.scroll_into_view_if_needed()
    cell = pg.evaluate(VALUE_JS, [key, trace, i, j])
    point = pg.evaluate(POINT_JS, [key, trace, cell["x"], cell["y"]])
    pg.mouse.move(0, 0)
    pg.mouse.move(point["x"], point["y"])
    label = chart.locator(".hoverlayer")
    label.locator("text").first.wait_for(state="attached", timeout=5_000)
    return label.text_content(), cell["v"]


def assert_drawn(pg, keys: list[str], timeout: float = 120_000) -> None:
    """Wait for each key's chart to draw: the page's charts mount one by one, so the first drawn says nothing
    about the others."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wait_charts(pg, timeout)
    for key in keys:
        try:
            pg.locator(f".st-key-{key} .js-plotly-plot .main-svg").first.wait_for(state="attached", timeout=timeout)
        except PlaywrightTimeout:
            raise AssertionError(f"{key} was not drawn within {timeout / 1000:.0f} s; the page's errors: "
                                 f"{pg.locator(EXCEPTION).all_inner_texts()}") from None
    assert pg.locator(EXCEPTION).count() == 0, pg.locator(EXCEPTION).all_inner_texts()


@pytest.mark.browser
def test_every_what_if_figure_draws_and_its_hover_names_the_head_or_position_and_value(page, app_server):
    open_app(page, app_server.link(view="What if", text=A, pair=B, kind="cross", layer=2, head=3, lab_patch=1))
    assert_drawn(page, WHAT_IF)
    text, value = hover(page, "pair_diff_fig", 0, 1, 2)
    assert "query: " in text and "key: " in text and f"weight B − A: {value:+.3f}" in text
    assert "A: query 1, key 2 · B: query 1, key 2" in text
    text, value = hover(page, "knockout_fig", 2, 1, 2)  # cross-attention, layer 2, head 3
    assert "cross-attention layer 2, head 3" in text and f"Δ log p (nats): {value:+.3f}" in text
    text, value = hover(page, "knockout_bars", 0, 1)
    assert "output token: " in text and "(1)" in text and f"{value:+.3f}" in text
    text, value = hover(page, "patch_heads_fig", 0, 0, 1)  # encoder self-attention, layer 1, head 2
    assert "encoder self-attention layer 1, head 2" in text and f"share restored: {value:+.3f}" in text
    text, value = hover(page, "patch_pos_fig", 0, 1, 1)  # encoder, source position 1, after layer 2
    assert "encoder residual stream after layer 2, at Hund→Hunde (1)" in text, text
    assert f"share restored: {value:+.3f}" in text


@pytest.mark.browser
def test_the_lens_and_why_figures_draw_and_their_hover_names_layer_token_and_value(page, app_server):
    open_app(page, app_server.link(view="Decoding", text=A, dec_step=2, dec_lens=1, dec_why=1))
    assert_drawn(page, DECODING)
    text, value = hover(page, "lens_fig", 0, 1, 0)  # layer 2, rank 1
    assert "layer 2, rank 1" in text and "token: " in text and f"probability {value:.3f}" in text
    text, value = hover(page, "lens_fig", 1, 1)  # the chosen token's bar in the last layer (the model's own)
    assert text.startswith("layer 2") and f"{value:.3f}, rank 1 of the vocabulary" in text
    text, value = hover(page, "why_fig", 0, 1)
    assert "source token: " in text and "(1)" in text and f"{value:+.3f} nats" in text
    text, value = hover(page, "why_heads_fig", 1, 0, 0)
    assert "decoder self-attention layer 1, head 1" in text and f"{value:+.3f}" in text


def shown(pg, keys: list[str]) -> dict:
    return {key: pg.evaluate(SHOWN_JS, key) for key in keys}


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("view", ["What if", "Decoding"])
def test_a_copied_link_restores_the_lab_figures(page, app_server, chromium, view):
    if view == "What if":
        open_app(page, app_server.link(view=view, text=A, pair=B, lab_patch=1))
        wait_charts(page)
        select_option(page, "head", "3")
        # output token 1: the token whose log p B moves by more than the gap a patching share needs (MIN_GAP)
        select_option(page, "lab_token", next(o for o in options(page, "lab_token") if o.startswith("output token 1:")))
        keys, expected = WHAT_IF, {"head": "3", "lab_token": "1", "pair": B, "lab_patch": "1"}
    else:
        open_app(page, app_server.link(view=view, text=A, dec_step=2, dec_lens=1, dec_why=1))
        wait_charts(page)
        first = query(page)["why_b"]
        select_option(page, "why_b", next(o for o in options(page, "why_b") if o not in (first, query(page)["why_a"])))
        keys, expected = DECODING, {"dec_step": "2", "dec_lens": "1", "dec_why": "1"}
    wait_charts(page)
    link = page.url
    assert {k: query(page).get(k) for k in expected} == expected
    before = shown(page, keys)
    fresh = new_page(chromium)
    try:
        open_app(fresh, link)
        assert_drawn(fresh, keys)
        assert query(fresh) == query(page)  # the restored session writes the same choices back
        assert shown(fresh, keys) == before
    finally:
        fresh.context.close()


def options(pg, key: str) -> list[str]:
    """The options of a select box (opened and closed again)."""
    box = widget(pg, key).locator("input[role='combobox']")
    listed = pg.locator("[role='listbox'] [role='option']")
    for _ in range(3):  # a rerun that lands just after the click redraws the box closed: click again
        box.click()
        try:
            listed.first.wait_for(timeout=5_000)
            break
        except Exception:
            pg.keyboard.press("Escape")
    found = listed.all_inner_texts()
    pg.keyboard.press("Escape")
    return [o.strip() for o in found]


@pytest.mark.browser
def test_typing_sentence_b_redraws_the_pair(page, app_server):
    open_app(page, app_server.link(view="What if", text=A))
    wait_charts(page)
    type_b(page, B)
    assert_drawn(page, WHAT_IF[:4])  # patching runs when asked for
    assert query(page)["pair"] == B
    before = runs(page)
    page.go_back(wait_until="commit")  # Back: sentence B as it was, a copy of A (left out of the link)
    wait_new_run(page, before)
    assert "pair" not in query(page) and widget(page, "pair_box").locator("input").input_value() == A


def type_b(pg, text: str) -> None:
    """Type sentence B into the What if page's box and apply it (Enter); waits for the new run."""
    field = widget(pg, "pair_box").locator("input")
    before = runs(pg)
    field.fill(text)
    field.press("Enter")
    wait_new_run(pg, before)


@pytest.mark.browser
def test_sentence_b_follows_the_sidebars_sentence_until_it_is_typed_into(page, app_server):
    from playwright.sync_api import expect

    open_app(page, app_server.link(view="What if", text=A))
    wait_charts(page)
    box = widget(page, "pair_box").locator("input")
    enter_text(page, A2)  # the sidebar's text area
    expect(box).to_have_value(A2)
    assert "pair" not in query(page)  # A's copy is left out of the link
    type_b(page, B)
    assert query(page)["pair"] == B
    enter_text(page, A3)
    expect(box).to_have_value(B)  # typed into: B is the user's and stays
    assert (query(page)["text"], query(page)["pair"]) == (A3, B)
    assert page.locator(EXCEPTION).count() == 0


LONG = GERMAN[2]  # the presenter header's sentence takes two lines at 1280 px
LONG_PAIRS = {"minimal pair": "Ein Hund spielen im hohen Gras mit einem orangen Spielzeug.",
              "unrelated": GERMAN[1]}  # as many tokens as LONG (patched), 3 of 12 shared


@pytest.mark.browser
@pytest.mark.parametrize("name", list(LONG_PAIRS))
def test_presenter_mode_offers_sentence_b_and_its_figures_still_fit_a_projector(chromium, app_server, name):
    from playwright.sync_api import expect

    pair, main_chart = LONG_PAIRS[name], "[data-testid='stMain'] [data-testid='stPlotlyChart']"
    pg = new_page(chromium, width=1280, height=720, timeout=60_000)
    try:
        for part in ("A and B", "B − A", "patching: heads", "patching: positions"):
            open_app(pg, app_server.link(view="What if", text=LONG, pair=pair, present=1, focus=part))
            wait_charts(pg)
            pg.wait_for_function(LAID_OUT_JS, arg=main_chart, timeout=60_000, polling="raf")
            expect(widget(pg, "pair_box").locator("input")).to_have_value(pair)
            expect(widget(pg, "lab_example")).to_be_visible()
            warned = pg.locator("[data-testid='stAlertContentWarning']").filter(has_text="No minimal pair")
            expect(warned).to_have_count(1 if name == "unrelated" else 0)
            charts = pg.locator(main_chart)
            assert charts.count() >= 1, part
            for i in range(charts.count()):
                box = charts.nth(i).bounding_box()
                assert box["y"] + box["height"] <= 721, f"{part}: chart {i} ends at {box['y'] + box['height']:.0f}"
            assert pg.locator(EXCEPTION).count() == 0
    finally:
        pg.context.close()
