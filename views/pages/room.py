"""A student's phone in the quiz's live poll (`?room=CODE`): the question and its options as large buttons, nothing
else of the app and never the answer before the lecturer reveals it (the room does not hold it until then).

The phone keeps a random id of its own in its link (`me`), so a reconnect to another server process, or a reload,
is the same student with the same answer; nothing else about the student is kept. The page follows the room by a
fragment that reruns alone every second: a new question, the reveal, a closed room.
"""
from __future__ import annotations

import streamlit as st

from views.parts.poll import VALUE, counts_text, status_text
from views.parts.text import md_escape
from views.parts.widgets import chart
from views.plumbing.streamlit_internals import style
from views.rooms import codes
from views.rooms.store import RoomView, open_store, store_errors
from viz.poll import room_and_model_figure
from viz.text import fmt_prob

REFRESH_S = 1.0  # a phone follows the room this often: the reveal reaches it within a second
DOWN = "The live poll cannot be reached just now: try again in a moment, or tell the lecturer."
# Options as large buttons, a thumb's height, in type readable at arm's length; keyed elements carry their key as a
# class (Streamlit's documented `st-key-` prefix).
# The app's pages put their first figure first on a phone; here the question and the answer come first.
ROOM_CSS = ("[class*='st-key-room_opt_'] button {min-height: 3.4rem;} "
            "[class*='st-key-room_opt_'] button p {font-size: 1.35rem;} "
            ".block-container {max-width: 40rem; padding-top: 1.5rem;} "
            ".st-key-room_page * {order: 0 !important;}")


def render() -> None:
    st.markdown(style(ROOM_CSS), unsafe_allow_html=True)
    with st.container(key="room_page"):
        try:
            _page()
        except store_errors():  # a store that fails says so, never with a stack trace
            st.error(DOWN)


def _page() -> None:
    code = codes.normalize(st.query_params.get("room", ""))
    if code is None:
        _join_form("No room has this code.")
        return
    _count_join()
    voter = st.query_params.get("me", "")
    if not codes.valid_voter_id(voter):
        voter = codes.new_voter_id()
        st.query_params["me"] = voter  # kept by the browser: a reconnect is the same student
    view = open_store().join(code, voter)
    if view.status == "missing":
        _join_form("No room has this code.")
        return
    st.caption(f"Attention Atlas · room {code[:3]} {code[3:]}")
    _live(code, voter)


def _count_join() -> None:
    """Joins are rate-limited per browser session, so codes cannot be tried in bulk from one page; the session's
    own room, rerun, is not another try."""
    ss = st.session_state
    if ss.get("_room_joined") == st.query_params.get("room"):
        return
    if not ss.setdefault("_room_joins", codes.JoinLimiter()).allow():
        st.error("Too many tries: wait a minute, then type the code again.")
        st.stop()
    ss["_room_joined"] = st.query_params.get("room")


def _join_form(said: str) -> None:
    if said:
        st.warning(said)
    with st.form("room_join", border=False):
        typed = st.text_input("Room code", max_chars=9, placeholder="e.g. K7Q 2MX",
                              help="The six characters on the projector")
        if st.form_submit_button("Join", type="primary", width="stretch"):
            code = codes.normalize(typed)
            if code is None:
                st.warning("A room code is six letters and digits.")
            else:
                st.query_params["room"] = code
                st.rerun()


def _vote(code: str, voter: str, qid: int, option: int) -> None:
    try:
        said = open_store().vote(code, voter, qid, option)
    except store_errors():
        said = "unavailable"
    if said != "ok":
        st.session_state["_room_refused"] = said


@st.fragment(run_every=REFRESH_S)
def _live(code: str, voter: str) -> None:
    try:
        view = open_store().join(code, voter)
    except store_errors():
        st.error(DOWN)
        return
    q = view.question
    if view.status != "open" or q is None:
        (st.info if view.status == "open" else st.warning)(status_text(view))
        return
    st.markdown(f"### {md_escape(q.prompt)}")
    if q.context:
        st.markdown(md_escape(q.context))
    if view.reveal is None:
        _ask(view, code, voter)
    else:
        _revealed(view)


def _ask(view: RoomView, code: str, voter: str) -> None:
    q = view.question
    for i, option in enumerate(q.options):
        st.button(md_escape(option), key=f"room_opt_{q.qid}_{i}", width="stretch",
                  type="primary" if view.mine == i else "secondary", on_click=_vote, args=(code, voter, q.qid, i))
    refused = st.session_state.pop("_room_refused", None)
    if refused == "revealed" or refused == "stale":
        st.warning("Too late: the lecturer has moved on.")
    elif refused == "unavailable":
        st.error(DOWN)
    if view.mine is None:
        st.caption("Tap your answer. You can change it until the lecturer reveals.")
    else:
        st.caption(f"Your answer: {md_escape(q.options[view.mine])}. You can change it until the lecturer reveals. "
                   f"{counts_text(view)}.")


def _revealed(view: RoomView) -> None:
    q, r = view.question, view.reveal
    name = VALUE.get(q.kind, "value")
    st.success(f"The model's answer: **{md_escape(q.options[r.answer])}** ({name} {fmt_prob(r.values[r.answer])})")
    if view.mine is not None:
        st.markdown(f"You said {md_escape(q.options[view.mine])}: "
                    + ("**right**." if view.mine == r.answer else "not this one."))
    chart(st, room_and_model_figure(q.options, view.counts, r.values, r.answer, name), width="stretch",
          key=f"room_reveal_{q.qid}", config={"displayModeBar": False})  # its buttons would cover the title
