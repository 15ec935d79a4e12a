"""The quiz's live poll on the projector: the room votes from its phones before the answer is revealed.

"Let the room vote" opens a room (views/rooms/): a six-character code the students type or scan, a secret presenter
key kept in this page's URL (`poll`), so a reload, Back, or the lecturer's next link with the same `poll` keeps the
room. Each question the quiz asks is put to the room (`RoomStore.ask` is idempotent: a rerun keeps the votes); the
room's answers are drawn as they arrive, by a fragment that reruns alone twice a second. Reveal writes the model's
answer and values to the room, and every phone shows them beside the room's share. The store holds the answer only
from then on: before Reveal no phone can be sent what it does not have.
"""
from __future__ import annotations

import html
import os
import urllib.parse

import streamlit as st

from views.parts.text import md_escape
from views.parts.widgets import chart
from views.plumbing.figcache import cached
from views.plumbing.streamlit_internals import style
from views.rooms.store import RoomView, open_store, store_errors
from viz.poll import room_and_model_figure, room_figure
from viz.quiz import Question
from viz.theme import Theme, theme, using_theme

REFRESH_S = 0.5  # the projector's chart follows the room at least this often (an answer shows within a second)
QR_PX = 220  # the QR code's side on the projector, scanned from 5 m (it fits below the question at 1280×720)
VALUE = {"next": "probability", "looks": "attention weight"}  # what the model's number for an option is
# The students' link stays on one line (a link broken inside its port was copied wrong): it may break only
# before its query, where the <wbr> is.
LINK_CSS = ".st-key-poll_join code {white-space: nowrap; font-size: 20px;}"
ROW_PX = 36  # an option's row in the projector's chart of answers: its 20 px label and its count, apart


def owner() -> str:
    """The presenter key of this session's live room ("" when none)."""
    return st.session_state.get("poll") or ""


def live_code() -> str | None:
    """The code of this session's room while it is open; a closed, expired or unknown one is forgotten."""
    key = owner()
    if not key:
        return None
    code = open_store().code_of(key)
    if code is None:
        st.session_state["poll"] = ""
    return code


def unavailable(error: BaseException) -> str:
    """The line the projector shows when the room store fails (no server path: the error's kind only)."""
    return (f"The live poll is unavailable ({type(error).__name__}): check ATLAS_ROOM_DIR or ATLAS_ROOM_STORE on the "
            "server (deploy/README.md). The quiz goes on without it.")


def _open() -> None:
    try:
        _, key = open_store().create()
    except store_errors() as e:
        st.session_state["_poll_error"] = unavailable(e)
        return
    st.session_state["poll"] = key


def _close() -> None:
    key = owner()
    if key:
        try:
            open_store().close(key)
        except store_errors():  # already gone (expired), or the store is down: the page forgets it either way
            pass
    st.session_state["poll"] = ""


def join_link(code: str) -> str:
    """The students' link: the app's address as the projector's browser reached it (or ATLAS_PUBLIC_URL, for a
    server whose address the room reaches by another name), with only `room` in its query."""
    base = os.environ.get("ATLAS_PUBLIC_URL", "").strip() or (st.context.url or "")
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((parts.scheme or "http", parts.netloc, parts.path or "/",
                                    urllib.parse.urlencode({"room": code}), ""))


def qr_svg(link: str) -> str:
    """The link as a QR code (SVG, dark on white: a projector washes out light greys)."""
    import segno

    return segno.make(link, error="m").svg_inline(scale=6, border=2, dark="#111827", light="#ffffff")


def live_room() -> tuple[str | None, str | None]:
    """(this session's open room's code or None, why the store failed or None), for the question's row."""
    try:
        return live_code(), st.session_state.pop("_poll_error", None)
    except store_errors() as e:
        return None, unavailable(e)


def offer(where, failed: str | None = None) -> None:
    """The button that opens a room, in the question's row (`where`); below the row, why the store failed."""
    if failed:
        st.warning(failed)
    where.button("Let the room vote", on_click=_open, key="poll_open", type="secondary",
                 help="Students answer on their phones: a code and a QR code to join, their answers live here, "
                      "and Reveal shows the model's answer on every phone.")


def ask_room(code: str, q: Question, prompt: str, context: str) -> None:
    """Ask the room `q` (its options in the order the projector shows; asking again keeps the answers), then show
    how to join and the answers as they arrive."""
    try:
        open_store().ask(owner(), q.kind, prompt, context, tuple(q.options))
    except store_errors() as e:
        st.warning(unavailable(e))
        return
    panel(code)


def reveal(q: Question) -> None:
    """Reveal `q`'s answer in the room, with the model's value for each option (a no-op without a room; a store
    that fails is said on the page, and the projector reveals all the same)."""
    try:
        code = live_code()
        if code is None:
            return
        view = open_store().view(code)
        if view.question is not None and tuple(view.question.options) == tuple(q.options):
            open_store().reveal(owner(), view.question.qid, q.answer, tuple(float(v) for v in q.values))
    except store_errors() as e:
        st.session_state["_poll_error"] = unavailable(e)


def close_button(where) -> None:
    """In the question's row while a room is open, where "Let the room vote" was."""
    # No tooltip: the pointer rests here after "Let the room vote", and a tooltip would cover the question.
    where.button("Close the room", on_click=_close, key="poll_close", type="tertiary")


def panel(code: str) -> None:
    """Where the step's charts will be: how to join (the code, the QR code, the link) and the room's answers as
    they arrive. Fits below the question's rows on a 1280×720 projector."""
    link = join_link(code)
    qr, join, right = st.columns([1, 1.6, 2], vertical_alignment="top")
    qr.image(qr_svg(link), width=QR_PX)
    with join.container(key="poll_join"):
        st.markdown(f"#### Join: {code[:3]} {code[3:]}")
        st.markdown(style(LINK_CSS) + "Scan, or open<br>" + link_html(link), unsafe_allow_html=True)
    with right:
        _answers(code, theme())


def link_html(link: str) -> str:
    """The join link as typed text (a code span, not a link: the projector's mouse has nothing to follow), the
    scheme left out (a phone's browser adds it), a line break allowed only before the query."""
    shown = link.split("://", 1)[-1]
    path, _, query = shown.partition("?")
    return f"<code>{html.escape(path)}<wbr>{'?' + html.escape(query) if query else ''}</code>"


# The fragment reruns alone, outside the page's theme: the page hands it the theme its figures are built with
# (presenter mode's 20 px type).
@st.fragment(run_every=REFRESH_S)
def _answers(code: str, look: Theme) -> None:
    with using_theme(look):
        _draw_answers(code)


def _draw_answers(code: str) -> None:
    try:
        view = open_store().view(code)
    except store_errors() as e:
        st.warning(unavailable(e))
        return
    if view.status != "open" or view.question is None:
        st.info(status_text(view))
        return
    st.markdown(counts_text(view))
    # Below the question's rows a 1280×720 screen has about 210 px left: no title (the line above says it), no count
    # axis (each bar writes its count), ROW_PX a bar.
    options = tuple(view.question.options)
    chart(st, cached(room_figure, options, tuple(view.counts), title=None, height=20 + ROW_PX * len(options),
                     axis=False), width="stretch", key="poll_bars")  # the cache: most redraws find the last counts


def counts_text(view: RoomView) -> str:
    """'3 in the room · 2 answered' (present: seen in the last half minute)."""
    return f"**{view.members}** in the room · **{view.answered}** answered"


def status_text(view: RoomView) -> str:
    """What a room that takes no answers says, on the projector and on a phone."""
    return {"missing": "No room has this code.", "expired": "This room has expired.",
            "closed": "The lecturer closed this room."}.get(view.status, "Waiting for the lecturer's question…")


def answered_view(q: Question) -> RoomView | None:
    """This session's room once it has answered `q` (the same options), else None (no room, no answer, a store
    that fails)."""
    try:
        code = live_code()
        view = open_store().view(code) if code is not None else None
    except store_errors():
        return None
    if view is None or view.question is None or tuple(view.question.options) != tuple(q.options):
        return None
    return view if view.answered else None


def room_and_model(q: Question, height: int | None = None):
    """After Reveal, on the projector: the room's share beside the model's value for each option (what every phone
    shows), or None without a room that answered."""
    view = answered_view(q)
    if view is None:
        return None
    return cached(room_and_model_figure, tuple(q.options), tuple(view.counts), tuple(float(v) for v in q.values),
                  q.answer, VALUE.get(q.kind, "value"), height=height)


def room_line(q: Question) -> str:
    """After Reveal, on the projector: how the room answered (Markdown), or "" without a room or answers."""
    view = answered_view(q)
    if view is None:
        return ""
    right = view.counts[q.answer]
    return (f" The room: **{right} of {view.answered}** said {md_escape(q.options[q.answer])} "
            f"({round(100 * right / view.answered)} %).")
