"""Tours: every view opened cold (a fresh Streamlit session, through a link) once per mode, and every check that
applies run on that one load, in Debian's Chromium.

| mode | window | the app | checks |
|---|---|---|---|
| normal | 1500×1000 (a laptop) | the tiny `demo` model | C1–C7 |
| presenter | 1280×720 (a projector), `present=1` | `demo` | C1–C3, C8–C11 on every part of the page |
| phone | 390×844, touch, 3× pixels | `demo` | C1–C3, C12 |
| high contrast | 1280×900, `contrast=1` | the untrained twin with a head switched off (`off=cross-1-1`) | C1–C7 |

Training is opened on `filmed` (a model with a training film) and Heads on `demo` (a model with a head report) in
every mode. axe-core (WCAG 2.1 A and AA: no serious or critical violation) runs in presenter and high-contrast
mode on AXE_VIEWS: its findings come from the page's stylesheet, which is global, and from the kinds of elements a
page holds, which these three views hold between them (the opened text description, in normal mode, is
tests/browser/test_browser_axe.py). Every view of every mode is saved under artifacts/screenshots/tour/ (the whole
page in normal mode, the screen in the others).

Each check, and the defect it was written for (each fails on that defect):
- C1 no exception: no Streamlit exception box, no stack trace, no error box (a page that crashes on some model).
- C2 accessible names: every chart has a text alternative as its aria-label (charts a screen reader skipped:
  axe's svg-img-alt, WCAG 1.1.1).
- C3 one draw: every chart makes one full Plotly draw when it appears (Streamlit's chart element handed
  Plotly.react a figure twice on mount and every chart was drawn twice: viz.transport.browser_json, viz.look).
- C4 margins: every heatmap is drawn with the margins it asked for, its labels reach into them and no further,
  the estimate wastes little and no axis title covers a tick label (Plotly's automargin measured the labels and
  drew the figure again, wider; titles drawn over rotated labels).
- C5 cut text: no label, button, metric title or select box value is cut with an ellipsis or hidden by overflow
  (the CSV buttons and "Rescale colours" cut at 1280 px; the model box cutting a long model name).
- C6 tick labels apart: no two tick labels of a heatmap overlap (a long sentence's labels squashed together).
- C7 nothing escaped shown: no `&lt;`, `&gt;`, `&amp;` or `\\.` shown as text (escaping meant for Markdown
  leaking onto the page), and the view is in the URL (a link restores it).
- C8 presenter fits: the header takes two lines at most and holds the whole translation (it showed one English
  word, the rest behind a click), and every chart of every part ends on the 720 px screen (a lecturer had to scroll
  in front of the class).
- C9 presenter text: every figure text is 20 px or more (the lecture guide's promise for the back of the hall).
- C10 presenter texts apart: no text of a figure runs into another or past the figure's edge, a heatmap's rows
  are at least viz.rows.MIN_ROW_PX tall (labels squeezed to fit a long sentence), and every legend entry is shown
  (a legend taller than a projector's figure scrolled, and hid 3 of the waves' 8 names), and every colour bar has a
  title and two tick labels or more (the Heads grid's short bar wrote one "0").
- C11 presenter sidebar: the sidebar is folded away (it took a third of the projector).
- C12 phone: nothing scrolls sideways, the sidebar is folded, the first figure starts on the first screen, every
  tick label is 12 px or more (a phone showed the sidebar over the page and the figure three screens down); no two
  texts of a figure overlap, none runs past its figure's edge, every figure text is 12 px or more (figures built
  for a laptop ran their panels' titles together, cut a colour bar's title and piled up the grids' numbers).
"""
from __future__ import annotations

import functools
import urllib.parse

import pytest
from test_browser_presenter import FILM_SENTENCE  # every word known to the model with a film

import page_checks as checks
from axe_support import CHARTS_DRAWN_JS, QUIET_JS, STYLED_JS, run_axe, serious, summarize, whole_page
from browser_js import LAID_OUT_JS, RUN_COUNTER_JS
from browser_support import (
    CHART,
    MAIN,
    SIDEBAR,
    full_screenshot,
    new_page,
    open_app,
    runs,
    wait_charts,
    wait_new_run,
    widget,
)
from model.records import VIEWS
from presenter_checks import DRAWN_FOR_JS, close_choose, open_choose
from tiny_checkpoint import GERMAN

pytestmark = pytest.mark.browser

SENTENCE = GERMAN[2]  # long enough to take two lines of the presenter header at 1280 px, if nothing shortened it
DESK_SENTENCE = "Ein Mann mit einem großen Hut sitzt auf einer Bank im Park."  # unknown words too, at a desk
# What if's sentence B: A with one word changed (as many tokens, so activation patching draws too). Not in presenter
# mode: there the "A and B" figure squeezes a 12-token sentence's rows to 6 px and cuts its labels (C10), which is
# the presenter figures' own open issue; test_browser_lab.py checks that its figures end on the screen.
PAIR = {SENTENCE: SENTENCE.replace("orangen", "grünen"), DESK_SENTENCE: DESK_SENTENCE.replace("Mann", "Hund")}
AXE_VIEWS = ("Attention", "Decoding", "Heads")
# Pages that draw no chart for a model (the untrained twin has no head report yet: the page offers to compute it).
NO_CHART = {("high-contrast", "Heads")}

MODES = {
    "normal": {"size": (1500, 1000), "params": {}, "model": {"text": DESK_SENTENCE}},
    "presenter": {"size": (1280, 720), "params": {"present": 1}, "model": {}},
    "phone": {"size": None, "params": {}, "model": {}},
    "high-contrast": {"size": (1280, 900), "params": {"contrast": 1},
                      "model": {"ckpt": "demo:untrained", "off": "cross-1-1", "text": DESK_SENTENCE}},
}


def link_for(server, mode: str, view: str) -> str:
    """The link a tour opens: the view in the mode, on the model it is about (see the module's table)."""
    if view == "Training":
        model = dict(ckpt="filmed", text=FILM_SENTENCE)
    elif view == "Heads":
        model = dict(ckpt="demo", text=SENTENCE)
    else:
        model = {"ckpt": "demo", "text": SENTENCE, **MODES[mode]["model"]}
        if view == "What if" and mode != "presenter":  # presenter mode's pair: test_browser_lab.py (see PAIR)
            model["pair"] = PAIR[model["text"]]
    return server.link(view=view, **MODES[mode]["params"], **model)


def warm_fonts(pg, server) -> None:
    """Load the app once and every font face its stylesheets declare: Plotly draws a chart again when a font it
    asked for arrives (a bold title's face, say), which C3 would count. Later pages take the fonts from the cache."""
    open_app(pg, server.link(view="Overview", text=SENTENCE))
    wait_charts(pg, timeout=90_000)
    pg.evaluate("() => Promise.all([...document.fonts].map(f => f.load().catch(() => null)))")


@pytest.fixture(scope="module")
def tour_pages(chromium, app_server):
    """One page per mode, opened on first use; a link opened in it is a fresh Streamlit session (a cold load)."""
    pages = {}

    def get(mode: str):
        if mode not in pages:
            if mode == "phone":
                context = chromium.new_context(**checks.PHONE)
                context.set_default_timeout(90_000)
                context.add_init_script(RUN_COUNTER_JS)
                pages[mode] = context.new_page()
            else:
                pages[mode] = new_page(chromium, *MODES[mode]["size"], timeout=90_000)
            pages[mode].context.add_init_script(checks.DRAW_COUNTER_JS)
            warm_fonts(pages[mode], app_server)
        return pages[mode]

    yield get
    for pg in pages.values():
        pg.context.close()


def drawn(pg, expect_chart: bool) -> None:
    """Wait until the page shows all its last run sent (its elements' code arrived, its stylesheet applies, it has
    stopped changing), its charts are drawn and laid out at their width."""
    if expect_chart:
        wait_charts(pg, timeout=90_000)
    pg.wait_for_function(STYLED_JS, timeout=90_000, polling=50)
    pg.evaluate(QUIET_JS, 300)
    pg.wait_for_function(CHARTS_DRAWN_JS, arg=CHART, timeout=90_000, polling="raf")
    pg.wait_for_function(LAID_OUT_JS, arg=checks.MAIN_CHART, timeout=90_000, polling="raf")


def common(pg, view: str) -> list[str]:
    """C1, C2, C3 and the view in the URL."""
    found = checks.exceptions(pg) + checks.unnamed_charts(pg) + checks.drawn_twice(pg)
    shown = urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).get("view", [""])[0]
    return found + ([f"the URL names view {shown!r}"] if shown != view else [])


def desk_checks(pg, view: str) -> list[str]:
    """C1–C7, at a desk (normal or high-contrast mode)."""
    found = common(pg, view) + checks.margins(pg) + checks.cut_text(pg) + checks.tick_overlaps(pg)
    return found + checks.escaped_markup(pg)


def presenter_checks(pg, view: str, height: int) -> tuple[list[str], int]:
    """C1–C3, C8–C11 on every part the page offers (each chosen by its radio button, as a lecturer would)."""
    open_choose(pg)  # the page's pickers are in the header's "Choose"
    options = widget(pg, "focus").locator("[data-testid='stRadioOption']")
    names = [t.strip() for t in options.all_inner_texts()]
    found = [] if len(names) >= 2 else [f"presenter mode offers parts {names}"]
    measured = 0
    for i, part in enumerate(names):
        if i:
            open_choose(pg)
            before = runs(pg)
            options.nth(i).click()
            wait_new_run(pg, before, timeout=90_000)
            drawn(pg, expect_chart=False)  # a part may be a table
        close_choose(pg)
        fit, n = checks.off_the_screen(pg, height)
        measured += n
        problems = common(pg, view) + fit + checks.small_figure_text(pg, 20) + checks.tick_overlaps(pg)
        problems += checks.hidden_legend_entries(pg) + checks.unreadable_colorbars(pg)
        problems += ["the sidebar is open"] if pg.evaluate(checks.SIDEBAR_OPEN_JS, SIDEBAR) else []
        found += [f"{part}: {p}" for p in problems]
    return found + ([] if measured else ["no chart in any part"]), measured


@functools.cache
def translation_of(folder, text: str) -> str:
    """The model in `folder`'s translation of `text`, read once per model and sentence."""
    from model.inference.translator import Translator

    return Translator.from_checkpoint(folder).translate(text).text


def whole_translation(pg, server, view: str) -> list[str]:
    """C8: the presenter header's line holds the model's whole translation of the page's sentence."""
    model, text = ("filmed", FILM_SENTENCE) if view == "Training" else ("demo", SENTENCE)
    want = translation_of(server.checkpoint_dir / model, text)
    shown = " ".join(pg.locator(".st-key-atlas_header_line h4").inner_text().split())
    return [] if want in shown else [f"the header shows {shown!r}, not the whole translation {want!r}"]


def axe_problems(pg) -> list[str]:
    """axe-core's serious and critical violations, on the whole page (axe judges only the text it can see)."""
    size = whole_page(pg)
    try:
        bad = serious(summarize(run_axe(pg)))
    finally:  # the next view opens at the mode's own size (presenter mode draws for the window's)
        pg.set_viewport_size(size)
    return [f"axe: {rule} on {n} elements" for rule, n in bad.items()]


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("mode", list(MODES))
def test_tour(tour_pages, app_server, screenshot_dir, mode, view):
    pg = tour_pages(mode)
    # presenter mode shows one part of a page at a time, which may be a table (presenter_checks counts the charts)
    expect_chart = (mode, view) not in NO_CHART and mode != "presenter"
    open_app(pg, link_for(app_server, mode, view))
    if mode == "phone":  # the sidebar folds itself after the first run
        pg.wait_for_function(f"""() => document.querySelector("{SIDEBAR}").getBoundingClientRect().right <= 0""",
                             timeout=30_000, polling="raf")
    drawn(pg, expect_chart)
    if expect_chart:
        assert pg.locator(f"{MAIN} {CHART}").count() >= 1, "no chart"
    folder = screenshot_dir / "tour"
    folder.mkdir(exist_ok=True)
    shot = folder / f"{mode}_{view.lower().replace(' ', '_')}.png"
    if mode == "normal":  # the whole page; the other modes: what the screen shows
        full_screenshot(pg, shot)
    else:
        pg.screenshot(path=shot)
    if mode == "presenter":
        pg.wait_for_function(DRAWN_FOR_JS, timeout=60_000, polling="raf")  # drawn for this window
        found, _ = presenter_checks(pg, view, MODES[mode]["size"][1])
        found += whole_translation(pg, app_server, view)
    elif mode == "phone":
        found = common(pg, view) + checks.phone_problems(pg) + checks.figure_text_problems(pg, 12)
    else:
        found = desk_checks(pg, view)
    if view in AXE_VIEWS and mode in ("presenter", "high-contrast"):
        found += axe_problems(pg)
    assert found == [], f"{mode}, {view}:\n" + "\n".join(found[:40])
