"""Real-browser tests of the presenter mode and side by side, measured at a projector's 1280×720. Every part of every
page in presenter mode (20 px text, on the screen, the sidebar folded): tests/browser/test_browser_tour.py."""
from __future__ import annotations

import urllib.parse

import pytest

from browser_support import (
    CHART,
    EXCEPTION,
    SIDEBAR,
    new_page,
    open_app,
    runs,
    select_option,
    wait_charts,
    wait_new_run,
    wait_texts,
    widget,
)

SENTENCE = "Ein Hund läuft im Schnee."
OTHER = "Ein Mann fährt Fahrrad."
WIDTH, HEIGHT = 1280, 720

SIDEBAR_OPEN_JS = """sel => { const s = document.querySelector(sel);
  return s !== null && s.getAttribute('data-collapsed') === 'false' && s.getBoundingClientRect().right > 50; }"""


def query(pg) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).items()}


def sidebar_open(pg) -> bool:
    return pg.evaluate(SIDEBAR_OPEN_JS, SIDEBAR)


@pytest.fixture(scope="module")
def projector(chromium, app_server):
    pg = new_page(chromium, width=WIDTH, height=HEIGHT)
    yield pg
    pg.context.close()


@pytest.mark.browser
def test_presenter_mode_uses_the_screen_and_keeps_the_sidebar_reachable(projector, app_server):
    open_app(projector, app_server.link(view="Attention", text=SENTENCE, present=1, focus="one head"))
    wait_charts(projector)
    charts = projector.locator(CHART)
    assert charts.count() == 1  # one thing at a time
    box = charts.first.bounding_box()
    assert box["width"] >= 0.9 * WIDTH, box  # the sidebar's width went to the figure
    assert box["y"] + box["height"] <= HEIGHT + 2, box  # below the header and controls, within the screen
    assert box["height"] >= 0.5 * HEIGHT, box
    # The sidebar's arrow brings back the sentence and the views.
    projector.locator("[data-testid='stExpandSidebarButton']").click()
    projector.wait_for_function(SIDEBAR_OPEN_JS, arg=SIDEBAR, timeout=10_000)
    from playwright.sync_api import expect

    # the sidebar slides in: its controls show once it has arrived
    expect(widget(projector, "text").locator("textarea")).to_be_visible(timeout=30_000)
    expect(widget(projector, "view")).to_be_visible(timeout=30_000)


@pytest.mark.browser
def test_the_presenter_toggle_folds_the_sidebar_and_writes_the_link(page, app_server):
    open_app(page, app_server.link(view="Attention", text=SENTENCE))
    wait_charts(page)
    assert sidebar_open(page)
    before = runs(page)
    widget(page, "present").locator("label").click()
    wait_new_run(page, before)
    page.wait_for_function(f"() => !({SIDEBAR_OPEN_JS})({SIDEBAR!r})", timeout=10_000)
    from playwright.sync_api import expect

    assert query(page).get("present") == "1"
    expect(page.locator(CHART)).to_have_count(1, timeout=60_000)  # the normal page's charts go, the one stays


@pytest.mark.browser
def test_side_by_side_link_round_trips_and_survives_a_layer_change(page, app_server):
    open_app(page, app_server.link(view="Attention", text=SENTENCE, compare="sentence", text2=OTHER, kind="enc_self",
                                   focus="all heads of the layer"))
    wait_charts(page)
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "B · DE" in main and "Fahrrad" in main
    wait_texts(page, f"{CHART} .annotation-text", "A · Ein Hund", "B · Ein Mann", start=True)  # B's may draw later
    heads = page.locator(f"{CHART} .annotation-text").all_text_contents()
    assert any(t.startswith("A · Ein Hund") for t in heads) and any(t.startswith("B · Ein Mann") for t in heads)
    select_option(page, "layer", "2")
    url = query(page)
    assert (url["compare"], url["text2"], url["layer"], url["text"]) == ("sentence", OTHER, "2", SENTENCE)
    before = runs(page)
    page.go_back(wait_until="commit")
    wait_new_run(page, before)
    assert "layer" not in query(page) and query(page)["compare"] == "sentence"
    assert page.locator(EXCEPTION).count() == 0


@pytest.mark.browser
def test_side_by_side_of_two_models_draws_both_decodings(page, app_server):
    open_app(page, app_server.link(view="Decoding", text=SENTENCE, compare="model", ckpt2="demo:untrained"))
    wait_charts(page)
    wait_texts(page, f"{CHART} .gtitle", "A, step 1", "B, step 1", start=True)  # each decoding's chart draws apart
    titles = [t.strip() for t in page.locator(f"{CHART} .gtitle").all_text_contents()]
    assert any(t.startswith("A, step 1") for t in titles) and any(t.startswith("B, step 1") for t in titles)
    assert "demo (untrained)" in page.locator("[data-testid='stMain']").inner_text()
    assert query(page)["ckpt2"] == "demo:untrained"


@pytest.mark.browser
def test_forcing_a_candidate_inside_the_page_fragment_updates_the_header(page, app_server):
    """Pages run as fragments (a widget reruns only its page); a forced token changes the whole trace, so the app
    must run again."""
    open_app(page, app_server.link(view="Decoding", text=SENTENCE))
    wait_charts(page)
    header = page.locator("[data-testid='stMain'] h3").first.inner_text()
    button = page.locator("[class*='st-key-force_1_'] button:not([disabled])").first
    token = button.inner_text().strip()
    before = runs(page)
    # By keyboard, as a keyboard user presses it: a pointer click aims at coordinates, and under load a late layout
    # shift (fonts, charts settling) once moved the row of buttons under it (CI clicked "dog" after reading "Two").
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("""([n, old]) => window.__atlasRuns > n
        && document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']")
        && document.querySelector("[data-testid='stMain'] h3").innerText !== old""", arg=[before, header],
                           timeout=30_000, polling="raf")
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "You forced the first 1 token(s)" in main and "your forced first 1 token(s)" in main
    assert page.locator("[data-testid='stMain'] h3").first.inner_text().split()[1] == token  # EN line starts with it
    assert query(page).get("prefix") == token
