"""The browser window's size: a projector at 1920×1080 gets figures for its height, not 720 px; a phone gets figures
for its width (viz.theme.PHONE_THEME).

A small component (Streamlit's components v2: JavaScript in the page, no iframe) reads the window's inner size when
the page is drawn and when the window is resized (after the resizing stops), and sends it when it differs from the
size the server drew for by more than a few pixels: that run draws the figures again, for the new size. Outside
presenter mode only the width's side of PHONE_PX counts (a laptop's window resized is drawn as before, and a
desktop's first visit is drawn once); a first visit guesses the side from the browser's User-Agent (a phone's says
"Mobile"), so a phone's first page is drawn for a phone. The size is the session's (session state), not the URL's:
it is the screen's, not a choice the link should carry.
"""
from __future__ import annotations

import re

import streamlit as st

from viz.theme import PHONE_PX, SCREEN_PX, SCREEN_WIDTH_PX

KEY = "_screen"  # session state: [width, height] of the window, as last sent
SLACK_PX = 8  # a change smaller than this (a scroll bar showing) is not worth drawing the page again
LARGEST = (3840, 2160)  # a 4K screen: a larger size sent (or made up) is taken as this
PHONE_GUESS = (390, 844)  # a first visit from a phone's browser, until its window's size arrives
_MOBILE = re.compile(r"Mobi|Android|iPhone")  # the User-Agent of a phone's browser (not a tablet's)

_JS = """
export default function ({ data, setStateValue }) {
  // [drawn width, drawn height, slack, phone width, every change counts]: a list, which Streamlit passes on as it is
  // (a dict's values are checked for data frames, which imports pandas on a server's first page)
  const [w, h, slack, phone, every] = data || [0, 0, 8, 500, false];
  const drawn = [w, h];
  const send = () => {
    // a full-page screenshot grows the window for a moment (window.atlasHoldScreen): no new screen
    if (window.atlasHoldScreen) return;
    const size = [window.innerWidth, window.innerHeight];
    const changed = every ? Math.abs(size[0] - drawn[0]) > slack || Math.abs(size[1] - drawn[1]) > slack
                                       : (size[0] < phone) !== (drawn[0] < phone);
    if (changed) setStateValue("size", size);
  };
  send();
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(send, 300); };
  window.addEventListener("resize", later);
  return () => { clearTimeout(timer); window.removeEventListener("resize", later); };
}
"""

_component = st.components.v2.component("atlas_screen", js=_JS)


def screen_size(where=st, every: bool = False) -> tuple[int, int]:
    """The window's (width, height) in px as the browser last sent it (until then, a phone's if the browser says it
    is a phone's, else the smallest screen presenter mode fits). ``every``: any change of size is sent (presenter
    mode); otherwise only a change across PHONE_PX. Mounts the component in ``where`` (it draws nothing)."""
    ss = st.session_state
    drawn = ss.get(KEY) or list(_guess())
    with where:
        result = _component(key="atlas_screen", data=[*drawn, SLACK_PX, PHONE_PX, every], height=0,
                            on_size_change=lambda: None)
    size = getattr(result, "size", None)
    if isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int | float) for v in size):
        ss[KEY] = [int(min(max(v, 0), top)) for v, top in zip(size, LARGEST)]
    width, height = ss.get(KEY) or _guess()
    # the size this run draws for, for a test to wait on (where the component is: the sidebar takes no room away)
    where.markdown(f"<span class='atlas-screen' data-drawn='{width}x{height}'></span>", unsafe_allow_html=True)
    return width, height


def _guess() -> tuple[int, int]:
    """The window's size before the browser has sent it: a phone's if its User-Agent says so."""
    try:
        agent = st.context.headers.get("User-Agent") or ""
    except Exception:  # no request to read (a script run outside a server)
        agent = ""
    return PHONE_GUESS if _MOBILE.search(agent) else (SCREEN_WIDTH_PX, SCREEN_PX)
