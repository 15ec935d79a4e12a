"""The lecturer's note (URL `note`): a line pinned to every view in presenter mode, e.g. what to ask the room.

It stands in the strip at the top of the screen that presenter mode keeps free above the header (between the
sidebar's arrow and the app menu), so it takes no height from the figures that are sized to fit a 720 px screen.
The note is shown as text, escaped, never as HTML or Markdown markup; only the fixed rule below is HTML.
"""
from __future__ import annotations

import streamlit as st

from views.parts.text import md_escape
from views.plumbing.streamlit_internals import NOTE_CSS, style
from views.plumbing.urlstate import NOTE_CHARS

KEY = "lecture_note"
def field() -> None:
    """The sidebar's box for the note, bound to the URL."""
    st.text_input("Lecturer's note", key="note", max_chars=NOTE_CHARS, persist_state="session",
                  placeholder="e.g. Ask: why “Hund”?",
                  help="A short line shown at the top of every view in presenter mode, and kept in the link, so a "
                       "prepared link carries what to say or ask. Shown as text, never as HTML.")


def pin(present: bool) -> None:
    """The note at the top of the screen, in presenter mode only (outside it, the sidebar's box shows it)."""
    note = st.session_state.get("note") or ""
    if not (present and note.strip()):
        return
    with st.container(key=KEY):
        st.markdown(style(NOTE_CSS), unsafe_allow_html=True)
        st.markdown(":material/push_pin: " + md_escape(note))
