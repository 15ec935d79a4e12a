"""The lecturer's note (URL `note`): a line pinned to every view in presenter mode, e.g. what to ask the room.

It stands at the top of the screen, above the header, on at most three lines; the figures below give up the
height it takes (:func:`lines`, viz.theme.presenter_theme), so they still end on the screen.
The note is shown as text, escaped, never as HTML or Markdown markup; only the fixed rule below is HTML.
"""
from __future__ import annotations

import streamlit as st

from views.parts.text import md_escape
from views.plumbing.streamlit_internals import NOTE_CSS, style
from views.plumbing.urlstate import NOTE_CHARS

KEY = "lecture_note"
LINE_CHARS = 100  # of the note's 20 px type in a line at 1280 px (200 characters take two)


def lines(note: str | None) -> int:
    """How many lines the pinned note takes in presenter mode (0 without a note)."""
    note = (note or "").strip()
    return min(3, -(-len(note) // LINE_CHARS)) if note else 0


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
