"""The browser starts on Plotly's code while the server's first run is still loading the model.

A session's first run draws an empty chart off-screen (Streamlit loads Plotly's 4.6 MB script only when a page
first holds a chart, and Chromium takes a while to compile it) before the run imports torch and loads the model,
so the two overlap. Beside it go a metric and a download button, the first page's element types whose code the
sidebar does not fetch, which would otherwise show grey skeletons after the run until their code arrived. They are
removed when the run ends (`done`) and hidden until then
(`visibility: hidden` also keeps them out of screen readers and the tab order): a page never shows them. On a warm
server a first run can end before the browser has drawn them; then the page's own elements ask for the same code as
soon, and there was nothing to overlap. The pages' tables are Markdown (views/parts/widgets.py `table`): no page waits
for
st.table's code or the 1.3 MB code of st.dataframe's canvas grid. Only a text description's tables, opened on
demand, are st.table.

This module imports only Streamlit, so that app.py can call it before its other imports.
"""
from __future__ import annotations

import streamlit as st


def start():
    """Draw the warm-up on a session's first run (nothing later); returns the placeholder for `done`."""
    placeholder = st.empty()
    if not st.session_state.get("atlas_warm"):
        st.session_state["atlas_warm"] = True
        with placeholder.container(key="atlas-warm"):
            st.markdown("<style>.st-key-atlas-warm {position: absolute; left: -10000px; width: 300px; height: 40px; "
                        "overflow: hidden; visibility: hidden;}</style>", unsafe_allow_html=True)
            st.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"height": 40}},
                            config={"staticPlot": True}, key="atlas-warm-chart")
            st.metric("warm-up", 0, label_visibility="collapsed")
            st.download_button("warm-up", b"", disabled=True, key="atlas-warm-download")
    return placeholder


def done(placeholder) -> None:
    """Remove the warm-up elements (at the end of every run that may have drawn them)."""
    placeholder.empty()
