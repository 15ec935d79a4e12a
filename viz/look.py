"""The app's chart look, written into each figure so that the browser draws a chart once, not twice.

``st.plotly_chart(theme="streamlit")`` styles a figure in the browser: it fills the figure's template (plotly_white
here) with Streamlit's fonts and colours and sets the title in bold. It does that in an effect that runs after the
chart's first draw, on a copy, and hands the copy to ``Plotly.react``. Plotly then compares the copy with what it
drew: the template is a new object, and typed arrays (which Plotly cannot compare) count as changed, so it drew
every chart a second time in full, each time one appeared (counted in Chromium: two full draws per chart, about a
third of a page switch's drawing).

:func:`bake` writes that styling into the figure itself, so the page can hand it over with ``theme=None``: the
layout gets the template's layout under its own settings (the figure's own settings win, as with a template), every
trace its type's template entry, and the title its bold weight; only the text's grey is darker (CHART_TEXT).
``chart_look.json`` is the template Streamlit's light theme makes of plotly_white (Streamlit 1.67, read back from a
chart in Chromium; the parts for 3-D, polar, ternary and map plots left out, which the app never draws);
``tests/browser/test_browser_single_draw.py`` reads it back from a live chart again and fails when Streamlit's theme has
changed.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

LOOK_FILE = Path(__file__).with_name("chart_look.json")
# Streamlit's theme writes a chart's text (tick labels, axis and colour-bar titles, hover labels) in a grey of 3.7:1 on
# white, under WCAG AA's 4.5:1 for text of that size; :func:`bake` writes it 6.1:1 instead (docs/accessibility.md).
# The stored look stays Streamlit's own, so the test that compares the two keeps telling when Streamlit changes it.
FADED_TEXT, CHART_TEXT = "#808495", "#5f6270"
_CARTESIAN_AXIS = re.compile(r"^[xy]axis\d*$")
# Trace types whose category axis Plotly draws without grid or zero lines (its "oriented" traces).
_ORIENTED = {"bar", "box", "violin", "histogram", "funnel", "waterfall"}
# Items of these layout lists get the template's "<name>defaults" entry.
_ITEM_DEFAULTS = {"annotations": "annotationdefaults", "shapes": "shapedefaults"}


@lru_cache(maxsize=1)
def look() -> dict:
    """The template: {"layout": {...}, "data": {trace type: [entries]}}."""
    return json.loads(_look_text())


@lru_cache(maxsize=1)
def _look_text() -> str:
    return LOOK_FILE.read_text(encoding="utf-8")


def baked_look() -> dict:
    """The template as :func:`bake` writes it into a figure (a fresh copy): :func:`look` with CHART_TEXT."""
    return json.loads(_baked_text())


@lru_cache(maxsize=1)
def _baked_text() -> str:
    """The look as bake writes it: the stored one with its faded text darkened (FADED_TEXT -> CHART_TEXT)."""
    return _look_text().replace(f'"{FADED_TEXT}"', f'"{CHART_TEXT}"')


def under(base, top):
    """``top`` with what it leaves unset taken from ``base``: dicts merged key by key, ``top`` wins elsewhere."""
    if isinstance(base, dict) and isinstance(top, dict):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = under(base[key], value) if key in base else value
        return merged
    return top


def bake(fig: dict) -> dict:
    """Write the look into a figure dict ({"data": [...], "layout": {...}}, plain JSON values) in place, and drop
    its own template: what Plotly would draw from the figure with the template applied. The figure shares nothing
    with the stored look afterwards (a later change to it, a font floor say, stays in this figure)."""
    template = json.loads(_baked_text())  # a fresh copy: several times faster than copy.deepcopy(look())
    layout = fig["layout"]
    layout.pop("template", None)
    tl = template["layout"]
    for key, value in tl.items():
        if key in ("xaxis", "yaxis") or key.endswith("defaults"):
            continue
        layout[key] = under(value, layout[key]) if key in layout else value
    axes = [k for k in layout if _CARTESIAN_AXIS.match(k)] or ["xaxis", "yaxis"]
    no_grid = _category_axes(fig["data"])
    for name in axes:
        given, from_template = layout.get(name) or {}, tl.get(name[:5], {})
        axis = under(from_template, given)
        # Plotly shows an axis line, grid lines, a zero line or minor grid lines by default when the *input* gives
        # their colour or width (a template's do not count: Lib.coerce2), grid and zero lines also on every axis
        # but the category axis of bars and boxes. Written into the input, the template's colours would turn them
        # on: say what Plotly decides from the figure alone, where the figure and the template leave it open.
        grid = name not in no_grid
        for flag, props, default in (("showline", ("linecolor", "linewidth"), False),
                                     ("showgrid", ("gridcolor", "gridwidth", "griddash"), grid),
                                     ("zeroline", ("zerolinecolor", "zerolinewidth"), grid)):
            if flag not in given and flag not in from_template and not any(given.get(p) for p in props):
                axis[flag] = default
        minor = given.get("minor") or {}
        if "showgrid" not in minor and not any(minor.get(a) for a in ("gridcolor", "gridwidth", "griddash")):
            axis["minor"] = {**axis.get("minor", {}), "showgrid": False}
        layout[name] = axis
    for key, defaults in _ITEM_DEFAULTS.items():
        if key in layout and defaults in tl:
            layout[key] = [under(tl[defaults], item) for item in layout[key]]
    title = layout.get("title")
    if isinstance(title, dict) and title.get("text"):  # Streamlit's theme sets the title in <b>
        layout["title"] = under({"font": {"weight": "bold"}}, title)
    seen: dict[str, int] = {}
    for i, trace in enumerate(fig["data"]):
        kind = trace.get("type", "scatter")
        entries = template["data"].get(kind)
        if entries:  # Plotly cycles through a type's entries, trace by trace
            n = seen.get(kind, 0)
            seen[kind] = n + 1
            fig["data"][i] = under(entries[n % len(entries)], trace)
    return fig


def _category_axes(traces: list) -> set[str]:
    """Layout names of the axes along which bars or boxes stand (y for horizontal ones, x otherwise)."""
    names = set()
    for trace in traces:
        if trace.get("type") in _ORIENTED:
            # A box from its numbers (q1, median, q3) stands at its positions x, or y: vertical when given x;
            # one from its samples stands along the axis its samples are not on.
            stats = "q1" in trace
            flat = ("y" in trace and "x" not in trace) if stats else ("x" in trace and "y" not in trace)
            horizontal = trace.get("orientation", "h" if flat else "v") == "h"
            ref = trace.get("yaxis", "y") if horizontal else trace.get("xaxis", "x")
            names.add(ref[0] + "axis" + ref[1:])
    return names
