"""The browser window's size, for presenter mode: a projector at 1920×1080 gets figures for its height, not 720 px.

A small component (Streamlit's components v2: JavaScript in the page, no iframe) reads the window's inner size when
the page is drawn and when the window is resized (after the resizing stops), and sends it when it differs from the
size the server drew for by more than a few pixels: that run draws the figures again, for the new size. The size is
the session's (session state), not the URL's: it is the screen's, not a choice the link should carry.
"""
from __future__ import annotations

import streamlit as st

from viz.theme import SCREEN_PX, SCREEN_WIDTH_PX

KEY = "_screen"  # session state: [width, height] of the window, as last sent
SLACK_PX = 8  # a change smaller than this (a scroll bar showing) is not worth drawing the page again
LARGEST = (3840, 2160)  # a 4K screen: a larger size sent (or made up) is taken as this

_JS = """
export default function ({ data, setStateValue }) {
  const drawn = (data && data.drawn) || [0, 0];
  const slack = (data && data.slack) || 8;
  const send = () => {
    // a full-page screenshot grows the window for a moment (window.atlasHoldScreen): no new screen
    if (window.atlasHoldScreen) return;
    const size = [window.innerWidth, window.innerHeight];
    if (Math.abs(size[0] - drawn[0]) > slack || Math.abs(size[1] - drawn[1]) > slack) setStateValue("size", size);
  };
  send();
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(send, 300); };
  window.addEventListener("resize", later);
  return () => { clearTimeout(timer); window.removeEventListener("resize", later); };
}
"""

_component = st.components.v2.component("atlas_screen", js=_JS)


def screen_size(where=st) -> tuple[int, int]:
    """The window's (width, height) in px as the browser last sent it (until then, the smallest screen presenter
    mode fits). Mounts the component in ``where`` (it draws nothing)."""
    ss = st.session_state
    drawn = ss.get(KEY) or [SCREEN_WIDTH_PX, SCREEN_PX]
    with where:
        result = _component(key="atlas_screen", data={"drawn": drawn, "slack": SLACK_PX}, height=0,
                            on_size_change=lambda: None)
    size = getattr(result, "size", None)
    if isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int | float) for v in size):
        ss[KEY] = [int(min(max(v, 0), top)) for v, top in zip(size, LARGEST)]
    width, height = ss.get(KEY) or (SCREEN_WIDTH_PX, SCREEN_PX)
    # the size this run draws for, for a test to wait on (where the component is: the sidebar takes no room away)
    where.markdown(f"<span class='atlas-screen' data-drawn='{width}x{height}'></span>", unsafe_allow_html=True)
    return width, height
