"""Every private name of Streamlit the app relies on, in one room: the history flag of a run, the name of the thread
that runs a session's script, and the CSS that reaches into Streamlit's elements by their `data-testid` (a frontend
detail, not an API).

A Streamlit upgrade may rename either. tests/views/test_internals_contract.py checks that the installed Streamlit still
has the flag and every test id named here, and names this file when one is gone. With `ATLAS_PUBLIC_ONLY=1`
(viz/speed.py's switches) nothing here is used: no flag (history is then told by the URL changing under
the session, views/plumbing/urlstate.py) and only the CSS that names the app's own classes and keys; the pages look
plainer,
never blank.
"""
from __future__ import annotations

import re
import threading

from viz.speed import off
from viz.theme import DEFAULT_THEME


def history_navigation() -> bool | None:
    """True when the browser's Back or Forward button started this run (None: cannot tell)."""
    if off("streamlit"):
        return None
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return getattr(ctx, "is_history_navigation", None) if ctx is not None else None


SCRIPT_THREAD = "ScriptRunner.scriptThread"  # Streamlit's name of the thread that runs one session's script


def runs_in_flight() -> int | None:
    """How many sessions' scripts this process is running now (None: cannot tell, with the switch on)."""
    if off("streamlit"):
        return None
    return sum(t.name == SCRIPT_THREAD for t in threading.enumerate())


def serve_kept_json(kept: type) -> None:
    """Answer Streamlit's serialisation of a kept figure from the JSON kept with it (views/plumbing/figcache.py).

    `st.plotly_chart` calls `plotly.io.to_json(fig.to_dict(), validate=False)`, looking the function up on the
    module at every call; for a heatmap with a hover label per cell that is a large part of a run. So, once per
    process, plotly.io.to_json is replaced by a function that answers exactly that call for a dict of type `kept`
    (its `.json`) and hands every other call, and its result, to Plotly's own function. Not with the switch on."""
    import plotly.io

    original = getattr(plotly.io.to_json, "__wrapped__", plotly.io.to_json)  # Plotly's own, on a second import too
    if off("figcache"):
        plotly.io.to_json = original
        return

    def to_json(fig, *args, **kwargs):
        if type(fig) is kept and not args and kwargs == {"validate": False}:
            return fig.json
        return original(fig, *args, **kwargs)

    to_json.__wrapped__ = original
    plotly.io.to_json = to_json


def style(css: str) -> str:
    """A `<style>` block for st.markdown; with the switch on, the rules that name a Streamlit test id are left out
    (inside a media query too: a rule is a selector and its block, the innermost pair of braces)."""
    if off("streamlit"):
        css = re.sub(r"[^{}]*data-testid[^{}]*\{[^{}]*\}", "", css)
    return f"<style>{css}</style>"


def test_ids(css: str) -> set[str]:
    """The Streamlit test ids a CSS text names."""
    return set(re.findall(r"data-testid='(\w+)'", css))


# The page's CSS. Larger base font: readable from the back of a lecture room (Streamlit's chart look, viz/look.py,
# was read at this size). Sidebar: model names fit their select box. Charts: a whole number of pixels wide, so that
# the width Streamlit measures and hands Plotly is the one Plotly measured for its first draw (a fraction of a pixel
# apart was a change, and a second full draw: viz.transport.browser_json). Captions: Streamlit draws them in the text
# colour at 60 % opacity (3.9:1 on white, below WCAG AA's 4.5:1 for text of this size; axe-core flagged every one,
# docs/accessibility.md); at 75 % they read 6.1:1 on the page and 5.7:1 on the sidebar, and still look quieter than
# the text around them. Focus: one ring that shows on every control reached by the keyboard (Streamlit marks
# some only by a faint change of their border, select boxes and text areas among them; Plotly's toolbar buttons by
# a 1 px line).
PAGE_CSS = ("html, body, [class*='st-'] {font-size: 1.05rem;} .block-container {padding-top: 2rem;} "
            "[data-testid='stSidebar'][data-collapsed='false'] {min-width: 22rem;} "
            "[data-testid='stFullScreenFrame'] {width: round(down, 100%, 1px);} "
            ".stApp [data-testid='stCaptionContainer'] {opacity: 0.75;} "
            "html .stApp :focus-visible, html .stApp .js-plotly-plot .plotly .modebar-btn:focus-visible "
            "{outline: 3px solid #1d4ed8; outline-offset: 2px;} "
            # A radio's input is clipped to 1 px (its ring would not show): the option it belongs to gets the ring.
            # React Aria marks that option data-focus-visible: a plain attribute rule, where :has(input:focus-visible)
            # made the browser check the option's descendants on every change of the page.
            "html .stApp [data-testid='stRadioOption'][data-focus-visible] "
            "{outline: 3px solid #1d4ed8; outline-offset: 2px; border-radius: 0.25rem;} "
            ".atlas-scroll {max-height: 400px; overflow-y: auto; margin-bottom: 1rem;}")

# A phone (Streamlit stacks columns below 640 px, the same width is used here). Students open the lecturer's link on
# a 390 px screen, where the page's controls, stacked one under the other, and its paragraphs pushed the first figure
# below the first screen. There: the first block of the page that holds a figure (and its text description) comes
# right under the header, before the page's title, controls and paragraphs (only the order on screen changes: a screen
# reader still reads the controls first); a row of select boxes (attention kind, layer, head) stays one row, and an
# empty column takes no line of its own; a table wider than the screen scrolls in its own box, not the page; the
# page's headings are set smaller (the header's sentence and translation: a 40-word sentence filled the screen).
# Plotly's toolbar is hidden: without a hover to end, a touch screen keeps it over the title. The figures are built
# for the phone's width (viz.theme.PHONE_THEME, once the window's width has reached the server): until then, crowded
# tick labels, which shrink to viz.theme's min_tick (10 px) on a laptop, are drawn at 12 px.
_PAGE_BLOCK = ("[data-testid='stMainBlockContainer'] > [data-testid='stVerticalBlock'] "
               "> [data-testid='stLayoutWrapper'] > [data-testid='stVerticalBlock']")
_CHART = "[data-testid='stPlotlyChart']"
_FIRST_FIGURE = f"{_PAGE_BLOCK} > :has({_CHART}):not(:has({_CHART}) ~ *)"
PHONE_MIN_TICK_PX = 12
_SMALL_TICKS = ", ".join(f".stApp .js-plotly-plot g[class$='tick'] > text[style*='font-size: {px}px']"
                         for px in range(DEFAULT_THEME.min_tick, PHONE_MIN_TICK_PX))
PHONE_CSS = ("@media (max-width: 640px) {"
             f"{_FIRST_FIGURE}, {_FIRST_FIGURE} + [class*='st-key-alt_'] {{order: -1;}} "
             "[data-testid='stColumn']:has([data-testid='stSelectbox']), "
             "[data-testid='stColumn']:not(:has([data-testid='stElementContainer'])) {min-width: 0;} "
             "[data-testid='stMarkdownContainer'] table {display: block; max-width: 100%; overflow-x: auto;} "
             "[data-testid='stMain'] [data-testid='stMarkdownContainer'] h3 {font-size: 1.3rem;} "
             "[data-testid='stMain'] [data-testid='stMarkdownContainer'] h4 {font-size: 1.15rem;} "
             f"{_SMALL_TICKS} {{font-size: {PHONE_MIN_TICK_PX}px !important;}}"
             # Plotly's toolbar stays shown on a touch screen (no hover ends), over the figure's title.
             ".stApp .js-plotly-plot .modebar-container {display: none;}"
             "}")

# Presenter mode: text grows, the page uses the screen's width and height, and the header starts at the top of the
# screen, between the two buttons of Streamlit's toolbar (made transparent, and deaf to the pointer but for its
# buttons), so the strip the toolbar takes on a laptop is the figure's. The blocks of the page are set closer (0.45rem
# apart), and so are a radio's options.
PRESENTER_TOP = "0.35rem"  # the page's top padding
PRESENTER_CSS = ("html, body, [class*='st-'] {font-size: 1.3rem;} "
                 f".block-container {{padding: {PRESENTER_TOP} 1.5rem 0.5rem 1.5rem; max-width: 100%;}} "
                 "[data-testid='stMarkdownContainer'] h3, [data-testid='stMarkdownContainer'] h4 "
                 "{font-size: 1.6rem; padding: 0.1rem 0;} "
                 "[data-testid='stVerticalBlock'] {gap: 0.45rem;} "
                 "[data-testid='stHeader'] {pointer-events: none; background: transparent;} "
                 "[data-testid='stHeader'] button {pointer-events: auto;} "
                 # the page's <style> blocks: no gap each above the header
                 "[data-testid='stElementContainer']:has(> [data-testid='stMarkdown'] "
                 "[data-testid='stMarkdownContainer'] > style:only-child) {display: none;} "
                 "[data-testid='stMain'] [data-testid='stRadioGroup'] {min-height: 0;} "
                 "[data-testid='stMain'] [data-testid='stRadioOption'] p {line-height: 1.35;}")

# Presenter mode's header: the sentence and its translation on two lines at most (views.parts.header.fit_line cuts
# the text to them), clear of the toolbar's buttons at its two ends, and the caption under it on one line, cut with
# "…" (the popover "Whole text" has it all). viz.theme.HEADER_PX is measured with it.
HEADER_CSS = (".st-key-atlas_header_line {gap: 0.3rem; padding: 0 2.2rem 0 2.4rem;} "
              ".st-key-atlas_header_line h4 {display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: "
              "vertical; overflow: hidden; padding: 0;} "
              ".st-key-atlas_header_line [data-testid='stCaptionContainer'] p "
              "{white-space: nowrap; overflow: hidden; text-overflow: ellipsis;} "
              ".st-key-atlas_header_line [data-testid='stCaptionContainer'] code {white-space: nowrap;} "
              ".st-key-atlas_header_line [data-testid='stMarkdownContainer'] {min-width: 0;} "
              ".st-key-atlas_header_line [data-testid='stPopover'] button {min-height: 0; padding: 0.05rem 0.6rem;} "
              "[data-testid='stPopoverBody'] {min-width: min(46rem, 92vw);}")

# The lecturer's note stands above the header, clear of the toolbar's buttons at its two ends; it takes at most
# three lines of 20 px type (200 characters take two at 1280 px), which the figures' height gives up
# (viz.theme.presenter_theme). Dark text on pale yellow: a sticky note, legible in high-contrast mode and on a
# washed-out projector.
NOTE_CSS = (".st-key-KEY {padding: 0 2.2rem 0 2.4rem; margin-bottom: 0.4rem; gap: 0;} "
            ".st-key-KEY [data-testid='stMarkdownContainer'] p {margin: 0; padding: 0.1rem 0.6rem; font-size: 20px; "
            "line-height: 1.25; color: #1f1f1f; background: #fff4c2; border-left: 0.3rem solid #b8860b; "
            "border-radius: 0.25rem; display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical; "
            "overflow: hidden;}").replace("KEY", "lecture_note")
