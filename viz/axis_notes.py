"""Axis titles handed to the browser as notes (annotations) placed beside the tick labels, and nothing for Plotly
to measure: the last step of :func:`viz.transport.browser_json`.

Plotly places an axis title by measuring every tick label of its axis in the page (one forced layout of the page
per label: a title with a ``standoff``, as Streamlit's look gives every axis, needs the labels' depth, and the
title then steps around each label's box). The same goes for ``automargin`` (the labels' extent) and for
``ticklabeloverflow`` "hide past div" (each label's box against the chart's, once per label drawn). On the
Inside-one-head page, with nine panels, that was about a fifth of a first visit's time in Chromium
(docs/performance.md). The figures' margins are already made to hold their labels and titles
(:func:`viz.layout.label_margins`, checked in Chromium by tests/browser/test_browser_tour.py (C4)), so here
- each axis title becomes a note centred on its axis, just past its tick labels' estimated reach
  (:func:`viz.layout.tick_labels_px`), in the title's own font; a y title turned as Plotly turns it;
- ``automargin`` is off and tick labels are never hidden ("allow"), on the axes and on the colour bars.
The figure object keeps its axis titles (the text alternative and the tests read them there); only the JSON the
browser draws changes. Each note is named "<axis> title" (``xaxis2 title``), so a reader of the JSON finds it.
"""
from __future__ import annotations

import re

from viz.layout import tick_labels_px

_CARTESIAN_AXIS = re.compile(r"^[xy]axis\d*$")
LABEL_PAD_PX = 4  # between an axis and its tick labels (Plotly's own, with no tick marks drawn)
TITLE_GAP_PX = 10  # between the tick labels' reach and the title


def place_titles(fig: dict) -> dict:
    """In a figure dict as the browser gets it (the look written in): every cartesian axis title as a note beside
    its labels, no automargin, no hidden labels. In place; returns ``fig``."""
    layout = fig["layout"]
    base = (layout.get("font") or {}).get("size") or 12
    notes = []
    for name in [k for k in layout if _CARTESIAN_AXIS.match(k)]:
        axis = layout[name]
        if not isinstance(axis, dict):
            continue
        axis["automargin"] = False
        axis.setdefault("ticklabeloverflow", "allow")
        title = axis.pop("title", None)
        if isinstance(title, str):  # plotly's shorthand for {"text": ...}
            title = {"text": title}
        if isinstance(title, dict) and title.get("text") and axis.get("visible", True) is not False:
            notes.append(_note(name, axis, title, layout, base))
    for trace in fig["data"]:
        if trace.get("showscale") is not False and (trace.get("type") in ("heatmap", "contour") or "colorbar" in trace):
            trace["colorbar"] = {**(trace.get("colorbar") or {}), "ticklabeloverflow": "allow"}
    if notes:
        layout["annotations"] = list(layout.get("annotations") or []) + notes
    return fig


def _note(name: str, axis: dict, title: dict, layout: dict, base: float) -> dict:
    """The note for axis ``name``'s ``title``: centred along the axis, past its labels on the axis's side."""
    x = name[0] == "x"
    side = axis.get("side") or ("bottom" if x else "left")
    outward = -1 if side in ("bottom", "left") else 1
    anchor = axis.get("anchor") or ("y" if x else "x")
    if anchor == "free":
        at = axis.get("position", 0.0)
    else:  # the edge of the counter axis's domain where this axis is drawn
        counter = (layout.get(anchor[0] + "axis" + anchor[1:]) or {}).get("domain") or [0.0, 1.0]
        at = counter[0] if outward < 0 else counter[1]
    along = axis.get("domain") or [0.0, 1.0]
    shift = outward * (LABEL_PAD_PX + tick_labels_px(axis, base, x) + TITLE_GAP_PX)
    note = dict(name=f"{name} title", text=title["text"], xref="paper", yref="paper", showarrow=False)
    if title.get("font"):
        note["font"] = title["font"]
    if x:
        note.update(x=(along[0] + along[1]) / 2, y=at, xanchor="center",
                    yanchor="top" if outward < 0 else "bottom", yshift=shift)
    else:
        note.update(x=at, y=(along[0] + along[1]) / 2, yanchor="middle", textangle=-90,
                    xanchor="right" if outward < 0 else "left", xshift=shift)
    return note
