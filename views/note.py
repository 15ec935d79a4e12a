"""The lecturer's note (URL `note`): a line pinned to every view in presenter mode, e.g. what to ask the room.

It stands in the strip at the top of the screen that presenter mode keeps free above the header (between the
sidebar's arrow and the app menu), so it takes no height from the figures that are sized to fit a 720 px screen.
The note is shown as text, escaped, never as HTML or Markdown markup; only the fixed rule below is HTML.
"""
from __future__ import annotations

import streamlit as st

from views.text import md_escape
from views.urlstate import NOTE_CHARS

KEY = "lecture_note"
# The rule also takes Streamlit's wrapper of the container out of the page's flow (else its gap stays there).
# At most three lines of 20 px type fit the strip at 1280 px (200 characters take two); a longer line on a narrow
# screen is cut there rather than run into the header. Dark text on pale yellow: a sticky note, legible in
# high-contrast mode and on a washed-out projector.
STYLE = ("<style>.st-key-KEY, [data-testid='stLayoutWrapper']:has(> .st-key-KEY) {position: fixed; top: 0.35rem; "
         "left: 4.5rem; right: 4.5rem; z-index: 999991; width: auto; gap: 0;} "
         ".st-key-KEY [data-testid='stMarkdownContainer'] p {margin: 0; padding: 0.1rem 0.6rem; font-size: 20px; "
         "line-height: 1.25; color: #1f1f1f; background: #fff4c2; border-left: 0.3rem solid #b8860b; "
         "border-radius: 0.25rem; display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical; "
         "overflow: hidden;}</style>").replace("KEY", KEY)


def field() -> None:
    """The sidebar's box for the note, bound to the URL."""
    st.text_input("Lecturer's note", key="note", max_chars=NOTE_CHARS, placeholder="e.g. Ask: why “Hund”?",
                  help="A short line shown at the top of every view in presenter mode, and kept in the link, so a "
                       "prepared link carries what to say or ask. Shown as text, never as HTML.")


def pin(present: bool) -> None:
    """The note at the top of the screen, in presenter mode only (outside it, the sidebar's box shows it)."""
    note = st.session_state.get("note") or ""
    if not (present and note.strip()):
        return
    with st.container(key=KEY):
        st.markdown(STYLE, unsafe_allow_html=True)
        st.markdown(":material/push_pin: " + md_escape(note))
