"""axe-core in the real browser: run the WCAG 2.1 A/AA rules on one view of the app and count what it finds.

Used by tests/browser/test_browser_axe.py (every view, three modes, tiny model; docs/accessibility.md has the counts
once taken on the shipped model). axe-core itself comes with the
`axe-playwright-python` package (its axe.min.js is injected into the page): nothing is downloaded at run time.
"""
from __future__ import annotations

from browser_js import LAID_OUT_JS
from browser_support import CHART, open_app

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
IMPACTS = ("critical", "serious", "moderate", "minor")
# The three looks a student or a lecturer sees: as opened, presenter mode (?present=1), high contrast (?contrast=1).
MODES = {"normal": {}, "presenter": {"present": 1}, "high-contrast": {"contrast": 1}}

# Parts of the page axe must not judge, each with why: (CSS selector, reason). Only for what the app cannot change.
EXCLUDE: list[tuple[str, str]] = []


def run_axe(page) -> dict:
    """axe-core's violations of the WCAG 2.0/2.1 A and AA rules on the page as it is now (axe's own JSON)."""
    from axe_playwright_python.sync_playwright import Axe

    context = {"include": [["html"]], "exclude": [[sel] for sel, _ in EXCLUDE]}
    options = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations", "incomplete"]}
    return Axe().run(page, context=context, options=options).response


def summarize(response: dict) -> dict:
    """Per impact, how many rules failed and on how many elements; per rule its impact, element count and the
    first few elements (CSS selectors) with axe's own explanation of the first."""
    rules = {}
    for v in response["violations"]:
        rules[v["id"]] = {"impact": v["impact"], "nodes": len(v["nodes"]), "help": v["help"],
                          "targets": [" ".join(map(str, n["target"])) for n in v["nodes"][:5]],
                          "why": sorted({n.get("failureSummary", "") for n in v["nodes"]})[:5]}
    return {"rules_by_impact": {i: sum(r["impact"] == i for r in rules.values()) for i in IMPACTS},
            "nodes_by_impact": {i: sum(r["nodes"] for r in rules.values() if r["impact"] == i) for i in IMPACTS},
            "rules": rules,
            # what axe could not decide (text over an image, say): to look at by hand, not a failure
            "incomplete": {v["id"]: len(v["nodes"]) for v in response.get("incomplete", [])}}


CHARTS_DRAWN_JS = """sel => [...document.querySelectorAll(sel)].every(c => {
    const gd = c.querySelector('.js-plotly-plot');
    return gd && gd.querySelector('.main-svg') && gd._fullLayout && !gd._fullLayout._replotting;
})"""


# The page's own stylesheet is drawn and no element is a placeholder any more: Streamlit loads the code of an element
# (a table; st.markdown with unsafe_allow_html=True, which writes the app's stylesheet) only when a page first needs
# it, so on a busy machine a fresh page can show its text for a second or more before the stylesheet applies (axe
# would judge the unstyled text), and a table is a grey skeleton until its code has arrived.
STYLED_JS = """() => !!document.querySelector("[data-testid='stMain'] [data-testid='stElementContainer'] style")
    && !document.querySelector("[data-testid='stSkeleton']")"""  # an element whose code is still on its way
# Resolves once the page has not changed for `ms` milliseconds (the run counter's script counts the changes).
QUIET_JS = """ms => new Promise(done => {
    let last = window.__atlasChanges, since = performance.now();
    const tick = () => {
        if (window.__atlasChanges !== last) { last = window.__atlasChanges; since = performance.now(); }
        if (performance.now() - since >= ms) done(true); else setTimeout(tick, 25);
    };
    tick();
})"""


def open_view(page, server, view: str, mode: str, **params) -> None:
    """Open `view` in `mode` through a link and wait until the page is complete: its script run has finished, the
    code of its elements has arrived, its stylesheet applies, it has stopped changing and its charts are drawn (a
    chart being drawn has no text yet); then make the window as tall as the page."""
    open_app(page, server.link(view=view, **MODES[mode], **params))
    settle(page)
    whole_page(page)


def settle(page, quiet_ms: int = 300) -> None:
    """Wait until the page shows all that its last run sent (see open_view)."""
    page.wait_for_load_state("networkidle", timeout=60_000)
    page.wait_for_function(STYLED_JS, timeout=60_000, polling=50)
    page.evaluate(QUIET_JS, quiet_ms)
    if page.locator(CHART).count():
        page.wait_for_function(CHARTS_DRAWN_JS, arg=CHART, timeout=60_000, polling="raf")


def whole_page(page, max_height: int = 12_000) -> dict:
    """Grow the window to the height of the page's content. axe judges the contrast of text only where it can see
    it: text scrolled out of Streamlit's main pane is left undecided ("incomplete"), not counted. Returns the
    window's size before, for a caller that opens more pages in it."""
    height = page.evaluate("""() => Math.max(...[...document.querySelectorAll(
        "[data-testid='stMain'], [data-testid='stSidebarContent']")].map(e => e.scrollHeight), window.innerHeight)""")
    size = page.viewport_size
    if height > size["height"]:
        page.evaluate("() => { window.atlasHoldScreen = true; }")  # presenter mode: not a new screen to draw for
        page.set_viewport_size({"width": size["width"], "height": min(height, max_height)})
        page.wait_for_function(LAID_OUT_JS, arg=CHART, timeout=30_000, polling="raf")
    return size


def serious(summary: dict) -> dict[str, int]:
    """The serious and critical rules that failed, with their element counts (what the test allows none of)."""
    return {rule: r["nodes"] for rule, r in summary["rules"].items() if r["impact"] in ("serious", "critical")}
