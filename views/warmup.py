"""The browser starts on Plotly's and the table's code while the server's first run is still loading the model.

A session's first run draws an empty chart and an empty table off-screen (Streamlit loads Plotly's 4.6 MB and the
table's 1.3 MB script only when a page first holds a chart or a table, and Chromium takes a while to compile
Plotly's) before the run imports torch and loads the model, so the two overlap. They are removed when the run ends
(`done`): a page never shows them. On a warm server a first run can end before the browser has drawn them; then
the page's own charts ask for the same code as soon, and there was nothing to overlap.

This module imports only Streamlit, so that app.py can call it before its other imports.
"""
from __future__ import annotations

import streamlit as st


def start():
    """Draw the off-screen chart and table on a session's first run; returns the placeholder for `done`."""
    placeholder = st.empty()
    if "atlas_warm" not in st.session_state:
        st.session_state["atlas_warm"] = True
        with placeholder.container(key="atlas-warm"):
            st.markdown("<style>.st-key-atlas-warm {position: absolute; left: -10000px; width: 300px; height: 40px; "
                        "overflow: hidden;}</style>", unsafe_allow_html=True)
            st.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"height": 40}},
                            config={"staticPlot": True}, key="atlas-warm-chart")
            st.dataframe({"": []}, key="atlas-warm-table", hide_index=True)
    return placeholder


def done(placeholder) -> None:
    """Remove the warm-up elements (at the end of every run that may have drawn them)."""
    placeholder.empty()
