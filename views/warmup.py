"""The browser starts on Plotly's code while the server's first run is still loading the model.

A session's first run draws an empty chart off-screen (Streamlit loads Plotly's 4.6 MB script only when a page
first holds a chart, and Chromium takes a while to compile it) before the run imports torch and loads the model,
so the two overlap. Beside it go a metric and a download button, the first page's element types whose code the
sidebar does not fetch, which would otherwise show grey skeletons after the run until their code arrived, and an
empty table, for the next pages' tables. They are removed when the run ends (`done`) and hidden until then
(`visibility: hidden` also keeps them out of screen readers and the tab order): a page never shows them. On a warm
server a first run can end before the browser has drawn them; then the page's own elements ask for the same code as
soon, and there was nothing to overlap. The app's tables are HTML (st.table, or Markdown), so no page waits for the
1.3 MB code of st.dataframe's canvas grid. st.table needs pandas, which a server's first run goes without
(views/pandas_gate.py): there the table waits for the session's next run.

This module imports only Streamlit, so that app.py can call it before its other imports.
"""
from __future__ import annotations

import streamlit as st


def _todo(tables: bool) -> list[str]:
    warmed = st.session_state.setdefault("atlas_warm", set())
    return [part for part in ("chart", "table") if part not in warmed and (part != "table" or tables)]


def due(tables: bool = True) -> bool:
    """Whether `start` would draw anything: a page's fragment, which a view switch runs without app.py's top,
    draws the table's warm-up only then (it is the session's first run with pandas, after a first page without)."""
    return bool(_todo(tables))


def start(tables: bool = True):
    """Draw what the session has not warmed yet (all of it on its first run; the table only with `tables`, when
    pandas may be imported); returns the placeholder for `done`."""
    placeholder = st.empty()
    warmed = st.session_state.setdefault("atlas_warm", set())
    todo = _todo(tables)
    if todo:
        warmed.update(todo)
        with placeholder.container(key="atlas-warm"):
            st.markdown("<style>.st-key-atlas-warm {position: absolute; left: -10000px; width: 300px; height: 40px; "
                        "overflow: hidden; visibility: hidden;}</style>", unsafe_allow_html=True)
            if "chart" in todo:
                st.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"height": 40}},
                                config={"staticPlot": True}, key="atlas-warm-chart")
                st.metric("warm-up", 0, label_visibility="collapsed")
                st.download_button("warm-up", b"", disabled=True, key="atlas-warm-download")
            if "table" in todo:
                st.table({"warm-up": [0]})
    return placeholder


def done(placeholder) -> None:
    """Remove the warm-up elements (at the end of every run that may have drawn them)."""
    placeholder.empty()
