"""Real-browser test: the app on a phone, in Chromium's phone emulation (390×844, touch, 3× pixels).

Students open the lecturer's link on their phones. Every view on a phone (no exception, nothing scrolls sideways, the
sidebar folded, the first figure on the first screen, tick labels of 12 px or more): tests/browser/test_browser_tour.py.
Here: a long sentence keeps the first figure on the first screen, with the controls in one row; every page's figures
are built for the phone's width with a long sentence too (no text of a figure runs into another or past its edge,
none is below 12 px), and a desktop browser's window made that narrow gets them as well; on Attention, a tap on a
heatmap cell shows the label a mouse shows on a desktop, where the sidebar starts open.
"""
from __future__ import annotations

import pytest

from browser_js import LAID_OUT_JS, RUN_COUNTER_JS
from browser_support import SIDEBAR, assert_clean, full_screenshot, new_page, open_app, wait_charts
from model.records import VIEWS
from page_checks import MAIN_CHART, PHONE, PHONE_FIGURE, PHONE_JS, figure_text_problems
from tiny_checkpoint import GERMAN

WORDS = " ".join(GERMAN).replace(".", "").split()  # the tiny model's vocabulary, read word by word
LONG = " ".join((WORDS * 3)[:40]) + "."  # a 40-word sentence: its header takes a third of the screen

# The centre of row r, column c of the first heatmap of the chart holding `sel` (viewport pixels).
CELL_JS = r"""
([sel, r, c]) => {
  const gd = document.querySelector(sel).querySelector('.js-plotly-plot');
  const tr = gd._fullData.find(t => t.type === 'heatmap' && t.visible === true);
  const xa = gd._fullLayout[tr.xaxis.replace('x', 'xaxis')], ya = gd._fullLayout[tr.yaxis.replace('y', 'yaxis')];
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(c), box.top + ya._offset + ya.l2p(r)];
}
"""

HOVER = ".hoverlayer .hovertext"

# Where each heatmap panel of the first chart starts across the figure (its x axis's domain's start, rounded).
PANEL_STARTS_JS = """sel => { const gd = document.querySelector(sel).querySelector('.js-plotly-plot');
  return gd._fullData.filter(t => t.type === 'heatmap')
    .map(t => Math.round(100 * gd._fullLayout[t.xaxis.replace('x', 'xaxis')].domain[0])); }"""


@pytest.fixture
def phone(chromium, app_server):
    """A fresh phone context (so a fresh Streamlit session) and its page."""
    context = chromium.new_context(**PHONE)
    context.set_default_timeout(90_000)
    context.add_init_script(RUN_COUNTER_JS)
    yield context.new_page()
    context.close()


def settle(pg) -> int:
    """Wait until the page's figures are drawn and laid out at the phone's width; returns how many there are."""
    n = wait_charts(pg, 90_000)
    pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=90_000, polling="raf")
    return n


def first_figure(pg) -> str:
    """A selector for the chart highest on the screen (its element's key, st-key-...)."""
    key = pg.evaluate("""sel => {
        const c = [...document.querySelectorAll(sel)].filter(c => c.getBoundingClientRect().width)
          .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)[0];
        return [...c.closest('.stElementContainer').classList].find(k => k.startsWith('st-key-'));
    }""", PHONE_FIGURE)
    assert key, "the first figure has no key"
    return f"[data-testid='stMain'] .{key}"


def hover_text(pg, chart: str) -> str:
    label = pg.locator(f"{chart} {HOVER}")
    label.first.wait_for(state="attached", timeout=30_000)
    return " | ".join(t.strip() for t in label.all_text_contents())


@pytest.mark.browser
def test_a_long_sentence_keeps_the_first_figure_on_the_first_screen(phone, app_server, screenshot_dir):
    for name, text in (("short", GERMAN[2]), ("long", LONG)):
        open_app(phone, app_server.link(view="Attention", text=text))
        settle(phone)
        assert_clean(phone, f"Attention, {name} sentence")
        got = phone.evaluate(PHONE_JS, [PHONE_FIGURE, 12])
        phone.screenshot(path=screenshot_dir / f"phone_attention_{name}.png")
        assert got["top"] is not None and got["top"] < 844, f"{name}: the first figure starts at {got['top']} px"
        assert got["page"] <= got["width"] and got["main"] <= got["width"], (name, got)
        # the controls follow the figure, one row: kind, layer and head side by side
        boxes = [phone.locator(f".st-key-{k}").bounding_box() for k in ("kind", "layer", "head")]
        assert len({round(b["y"]) for b in boxes}) == 1, f"{name}: the select boxes are not one row: {boxes}"
        assert all(b["x"] + b["width"] <= 390 for b in boxes), boxes


@pytest.mark.browser
def test_every_page_builds_its_figures_for_the_phone_with_a_long_sentence(phone, app_server, screenshot_dir):
    found = []
    for view in VIEWS:
        model = {"ckpt": "filmed"} if view == "Training" else {}  # the model with a training film
        open_app(phone, app_server.link(view=view, text=LONG, **model))
        settle(phone)
        found += [f"{view}: {p}" for p in figure_text_problems(phone, 12)]
        full_screenshot(phone, screenshot_dir / f"phone_long_{view.lower().replace(' ', '_')}.png")
    assert found == [], "\n".join(found[:40])


@pytest.mark.browser
def test_a_desktop_window_as_narrow_as_a_phone_gets_the_phones_figures(chromium, app_server):
    """Its browser does not say "Mobile": the page is drawn for a laptop, the window's width arrives, and the page
    is drawn again for a phone (views/plumbing/screen.py)."""
    pg = new_page(chromium, width=390, height=844, timeout=90_000)
    try:
        open_app(pg, app_server.link(view="Heads", text=GERMAN[2]))
        pg.wait_for_function("() => (document.querySelector('.atlas-screen') || {}).dataset?.drawn?.startsWith('390x')",
                             timeout=60_000, polling="raf")
        pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=90_000, polling="raf")
        wait_charts(pg, 90_000)
        # the grid's panels one above the other (a laptop's page has them side by side): they start at one x
        starts = pg.evaluate(PANEL_STARTS_JS, MAIN_CHART)
        found = figure_text_problems(pg, 12)
    finally:
        pg.context.close()
    assert len(starts) >= 2 and len(set(starts)) == 1, f"the panels start at x = {starts}"
    assert found == [], "\n".join(found[:40])


@pytest.mark.slow
@pytest.mark.browser
def test_a_tap_on_a_cell_shows_what_hover_shows_on_a_desktop(phone, chromium, app_server):
    link = app_server.link(view="Attention", text=GERMAN[2])
    open_app(phone, link)
    settle(phone)
    chart = first_figure(phone)  # on the first screen, under the header
    cell = (2, 3)  # query row 2, key column 3 of the first head
    x, y = phone.evaluate(CELL_JS, [chart, *cell])
    assert 0 < y < 844, f"the cell is at {y:.0f} px, off the first screen"
    assert phone.locator(f"{chart} {HOVER}").count() == 0
    phone.touchscreen.tap(x, y)
    tapped = hover_text(phone, chart)

    desk = new_page(chromium, width=1500, height=1000, timeout=90_000)
    try:
        open_app(desk, link)
        # "auto": a desktop's sidebar starts open
        desk.wait_for_function(f"""() => {{ const b = document.querySelector("{SIDEBAR}").getBoundingClientRect();
                                             return b.left >= 0 && b.width >= 300; }}""", timeout=30_000)
        settle(desk)
        desk.locator(chart).scroll_into_view_if_needed()
        x, y = desk.evaluate(CELL_JS, [chart, *cell])
        desk.mouse.move(x, y)
        hovered = hover_text(desk, chart)
    finally:
        desk.context.close()
    assert "weight" in hovered, hovered
    assert tapped == hovered, f"a tap shows {tapped!r}, a mouse on a desktop {hovered!r}"
