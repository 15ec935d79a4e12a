"""The router: which page each view opens, and what runs before and after it.

app.py draws the sidebar, loads the model, answers bad input and traces the sentence; its last step, `show`, runs
the chosen view's page as a Streamlit fragment, so that a view, layer, head or step change reruns the page only, not
the sidebar, the header and the trace lookup (less server time per click, and the browser redraws only the page).
One run of the fragment, in order:

1. if a page widget changed what the header or the trace depend on (`APP_INPUTS`: the Decoding page's forced
   prefix), or the view starts or ends side by side, the whole app runs again;
2. the sidebar's list of views is drawn into its slot (choosing a view is a fragment run too);
3. the page draws itself: `PAGES[view].render(ctx)`, in the run's theme and the model's languages;
4. the header (views/parts/header.py) is drawn into its slot above the page, after the page: while presenter mode's quiz
   asks about a step, the header keeps that step's answer;
5. after a switch, the next page's model work and figures are made in the background (views/plumbing/ahead.py);
6. the URL is written (a fragment run does not reach app.py's end).

Widgets keep their values by themselves between runs that do not draw them (`persist_state`,
views/plumbing/urlstate.py).

What runs first in a session stays at app.py's top, before its other imports: NumPy's and pandas' imports and the
warm-up (views/plumbing/warmup.py) come before the app's code is imported. `end` closes every run of the whole app.

This module imports the pages; no page imports it, so the imports among views/ have no cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import streamlit as st

from views.pages import (
    alignment,
    attention,
    decoding,
    embeddings,
    head,
    heads,
    masks,
    overview,
    positional,
    training,
    whatif,
)
from views.parts.compare import side_b_line
from views.parts.header import Header, presenter_slots
from views.parts.header import draw as draw_header
from views.parts.note import lines as note_lines
from views.parts.widgets import choosing_in
from views.plumbing import ahead, warmup
from views.plumbing.state import COMPARE, COMPARE_VIEWS, VIEWS, Context, ModelKey, checkpoint_label, sync_url
from viz.kinds import using_languages
from viz.theme import DEFAULT_THEME, PHONE_PX, PHONE_THEME, Theme, presenter_theme, using_theme

# The page registry: each view of the sidebar's list and the module that draws it; a page has `render(ctx)`, and
# one whose first visit costs the server most has `ahead(ctx)`, the calls that visit makes (views/plumbing/ahead.py).
PAGES: dict[str, ModuleType] = {
    "Overview": overview, "Embeddings": embeddings, "Positional encoding": positional, "Attention": attention,
    "Inside one head": head, "Masks": masks, "Decoding": decoding, "Alignment": alignment, "What if": whatif,
    "Heads": heads,
    "Training": training,
}

# What the header and the trace depend on. When one of the page's widgets changes one of these (the Decoding page's
# forced prefix), the whole app must run again. The view is not one of them: the fragment draws the list of views
# too, and the header's line that depends on the view.
APP_INPUTS = ("ckpt", "src_lang", "tgt_lang", "text", "decoding", "beam", "max_len", "prefix", "compare", "text2",
              "ckpt2", "present", "contrast")


@dataclass(frozen=True)
class Frame:
    """What app.py drew around the page, and the fragment fills in: the slots it left, and what goes there."""

    views: Any  # the sidebar's container for the list of views
    header_slot: Any  # the container above the page, for the header
    header: Header
    comparing: bool  # this run traced side B too (side by side, on a page that draws it)
    facts: str  # the end of the header's caption: the model, the source's length, the time, a stop at the limit
    screen: tuple[int, int] | None = None  # the window's (width, height), views/plumbing/screen.py


def app_inputs() -> tuple:
    ss = st.session_state
    return tuple(tuple(v) if isinstance(v, list) else v for v in (ss.get(k) for k in APP_INPUTS))


def draw_views(slot) -> None:
    """The list of views, in its place in the sidebar: drawn by the page's fragment, or by a run that stops first."""
    slot.radio("View", VIEWS, key="view", persist_state="session")


def above(view: str, shows: str, key: ModelKey) -> str:
    """The header's caption on what the figures below show (`shows`: the decoding, in words; `key`: the model)."""
    if view == "Heads":
        return (f"**Above: {shows}. The figures below come from the head report: the corpus, teacher-forced on its "
                "references**")
    if view == "Training":
        return f"**Above: {shows}. {training.below(key)}**"
    if view == "Alignment":
        own = ("on the reference typed below" if (st.session_state.get("align_ref") or "").strip()
               else "on this decoding")
        return (f"**Above: {shows}. The annotated pairs below are teacher-forced on their reference translations; "
                f"your sentence, {own}**")
    if view == "Masks":
        return (f"**Above: {shows}. The padding figures decode; the causal-mask figures are teacher-forced, and say "
                "on what**")
    return f"**Every figure below shows: {shows}**"


LAST_VIEW = "_page_last_view"  # session state: the view of the session's previous page run
IN_APP_RUN = "_page_in_app_run"  # session state: the page is drawn by a run of the whole app, not its fragment's


def show(ctx: Context, frame: Frame) -> None:
    """Run the chosen view's page as a fragment, in the theme the sidebar chose (app.py's last step before `end`)."""
    ss = st.session_state
    theme = DEFAULT_THEME
    if ss["present"] and frame.screen:  # the figures fill the window below the note and the header
        theme = presenter_theme(frame.screen[1], note_lines(ss.get("note")))
    elif frame.screen and frame.screen[0] < PHONE_PX:  # a phone: figures for its width
        theme = PHONE_THEME
    ss[IN_APP_RUN] = True  # the page runs inside the app's run, whose end writes the URL (end)
    try:
        page_fragment(ctx, frame, theme.high_contrast() if ss["contrast"] else theme, app_inputs())
    finally:
        ss[IN_APP_RUN] = False


@st.fragment
def page_fragment(ctx: Context, frame: Frame, theme: Theme, inputs: tuple) -> None:
    """The page as a Streamlit fragment (the module's docstring gives the order). `inputs` are the app-level choices
    the page was drawn for; if a widget of the page changed one, the app runs again."""
    if app_inputs() != inputs:
        st.rerun(scope="app")
    with using_theme(theme), using_languages(ctx.langs["src"], ctx.langs["tgt"]):
        _page(ctx, frame)
    if not st.session_state.get(IN_APP_RUN):
        sync_url()  # a fragment's own run does not reach the end of app.py


def _page(ctx: Context, frame: Frame) -> None:
    """The list of views, the page, and the header above it (drawn last: what it may show depends on the page)."""
    ss = st.session_state
    view = ss["view"]
    if ss["compare"] != "off" and (view in COMPARE_VIEWS) != frame.comparing:
        st.rerun(scope="app")  # side by side starts or ends: the header and the trace differ
    draw_views(frame.views)
    caption = above(view, ctx.shows, ctx.key)
    if ss["compare"] != "off" and not frame.comparing:
        st.caption(f"Side by side ({COMPARE[ss['compare']]}) is drawn on the {' and '.join(COMPARE_VIEWS)} pages.")
    ss["_quiz_secret"] = None  # presenter mode's quiz sets the step it asks about while drawing the page
    slots = presenter_slots() if ctx.present else None  # the header's two lines, the page's pickers in the second
    with choosing_in(slots.choose if slots else None):
        PAGES[view].render(ctx)
    # After the page: while the quiz asks about a step, the header keeps that step's answer.
    draw_header(frame.header_slot, frame.header, ss.get("_quiz_secret"),
                f"{caption} · {checkpoint_label(ss['ckpt'])} · {frame.facts}", slots)
    if slots is not None and ctx.other is not None:  # side B's line under A's, in the header's place
        slots.text.markdown(side_b_line(ctx.other))
    # After a switch (not a session's first run, nor a sentence, layer or head change), the first visit of the next
    # page down the list that has work to make ahead is made, unless that page will draw two sides: a class goes down
    # the list, past pages that cost little (Attention is drawn with the sentence). The worker takes only the time
    # the browser leaves (views/plumbing/ahead.py), so the page on screen does not pay for it (docs/performance.md).
    last, ss[LAST_VIEW] = ss.get(LAST_VIEW), view
    below = VIEWS[VIEWS.index(view) + 1:] if view in VIEWS else []
    following = next((v for v in below if hasattr(PAGES.get(v), "ahead")), None)
    if last not in (None, view) and following is not None and not ctx.present and not (
            ss["compare"] != "off" and following in COMPARE_VIEWS):
        ahead.after(lambda: PAGES[following].ahead(ctx))


def end(warm) -> None:
    """Every end of a run of the whole app: the URL says what the user chose, the warm-up (`warm`, what
    `warmup.start` returned) is gone."""
    sync_url()
    warmup.done(warm)
