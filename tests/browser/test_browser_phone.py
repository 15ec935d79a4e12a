"""Real-browser test: every page of the app on a phone, in Chromium's phone emulation (390×844, touch, 3× pixels).

Students open the lecturer's link on their phones. On every view: no exception, nothing scrolls sideways (neither
the document nor Streamlit's main area), the sidebar starts folded (it would cover the whole page), the first figure
starts within the first screen (PHONE_CSS in views/plumbing/streamlit_internals.py puts it under the header) and
every tick label is drawn at 12 px or more. On Attention, a tap on a heatmap cell shows the label a mouse shows on a
desktop, where the sidebar starts open.
"""
from __future__ import annotations

import pytest
from test_browser_presenter import MAIN_CHART, model_for

from browser_js import LAID_OUT_JS, RUN_COUNTER_JS
from browser_support import SIDEBAR, assert_clean, new_page, open_app, wait_charts
from tiny_checkpoint import GERMAN

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 3}
WORDS = " ".join(GERMAN).replace(".", "").split()  # the tiny model's vocabulary, read word by word
LONG = " ".join((WORDS * 3)[:40]) + "."  # a 40-word sentence: its header takes a third of the screen
FIGURE = f"{MAIN_CHART}:not(.st-key-atlas-warm *)"  # the page's figures (the warm-up chart is off-screen)

# What a phone shows: sideways scroll of the document and of Streamlit's main area, the sidebar's box, the top of the
# figure highest on the screen, and the tick labels drawn below 12 px.
PHONE_JS = r"""
([figure, minPx]) => {
  const main = document.querySelector("[data-testid='stMain']");
  const side = document.querySelector("[data-testid='stSidebar']").getBoundingClientRect();
  const figures = [...document.querySelectorAll(figure)].map(c => c.getBoundingClientRect()).filter(b => b.width);
  const small = [...main.querySelectorAll(".js-plotly-plot g[class$='tick'] > text")]
    .filter(t => t.textContent.trim() && parseFloat(getComputedStyle(t).fontSize) < minPx)
    .map(t => `"${t.textContent}" at ${getComputedStyle(t).fontSize}`);
  return {page: document.scrollingElement.scrollWidth, main: main.scrollWidth, width: window.innerWidth,
          sidebar: side.right, top: figures.length ? Math.min(...figures.map(b => b.top)) : null,
          figures: figures.length, small};
}
"""

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
    }""", FIGURE)
    assert key, "the first figure has no key"
    return f"[data-testid='stMain'] .{key}"


def hover_text(pg, chart: str) -> str:
    label = pg.locator(f"{chart} {HOVER}")
    label.first.wait_for(state="attached", timeout=30_000)
    return " | ".join(t.strip() for t in label.all_text_contents())


@pytest.mark.browser
@pytest.mark.slow
def test_every_view_fits_a_phone(phone, app_server, screenshot_dir):
    from views.plumbing.state import VIEWS

    bad, figures = [], 0
    for view in VIEWS:
        open_app(phone, app_server.link(view=view, **model_for(view)))
        # the sidebar folds itself after the first run: wait for it, then read the page
        phone.wait_for_function(f"""() => document.querySelector("{SIDEBAR}").getBoundingClientRect().right <= 0""",
                                timeout=30_000, polling="raf")
        figures += settle(phone)
        assert_clean(phone, f"phone, {view}")
        got = phone.evaluate(PHONE_JS, [FIGURE, 12])
        found = [f"the page is {got['page']} px wide"] if got["page"] > got["width"] else []
        found += [f"the main area is {got['main']} px wide"] if got["main"] > got["width"] else []
        found += [f"the sidebar reaches {got['sidebar']:.0f} px"] if got["sidebar"] > 0 else []
        found += [f"the first figure starts at {got['top']:.0f} px"] if got["top"] is None or got["top"] >= 844 else []
        found += got["small"][:5]
        if found:  # a picture of what failed, for whoever reads the test's output
            phone.screenshot(path=screenshot_dir / f"phone_{view.replace(' ', '_')}.png")
        bad += [f"{view}: {what}" for what in found]
    assert bad == [], "on a 390×844 phone:\n" + "\n".join(bad)
    assert figures >= len(VIEWS)  # every page drew a figure


@pytest.mark.browser
def test_a_long_sentence_keeps_the_first_figure_on_the_first_screen(phone, app_server, screenshot_dir):
    for name, text in (("short", GERMAN[2]), ("long", LONG)):
        open_app(phone, app_server.link(view="Attention", text=text))
        settle(phone)
        assert_clean(phone, f"Attention, {name} sentence")
        got = phone.evaluate(PHONE_JS, [FIGURE, 12])
        phone.screenshot(path=screenshot_dir / f"phone_attention_{name}.png")
        assert got["top"] is not None and got["top"] < 844, f"{name}: the first figure starts at {got['top']} px"
        assert got["page"] <= got["width"] and got["main"] <= got["width"], (name, got)
        # the controls follow the figure, one row: kind, layer and head side by side
        boxes = [phone.locator(f".st-key-{k}").bounding_box() for k in ("kind", "layer", "head")]
        assert len({round(b["y"]) for b in boxes}) == 1, f"{name}: the select boxes are not one row: {boxes}"
        assert all(b["x"] + b["width"] <= 390 for b in boxes), boxes


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
