"""A built figure as JSON for the browser, written without Plotly's validation and deep copies.

:func:`figure_json` is what ``fig.to_json()`` writes; :func:`browser_json` is what the app hands
``st.plotly_chart(..., theme=None)``: the chart look written in, plain lists, and a name for the content, so
that Plotly draws the chart once where it appears.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from viz import look, plotly_internals, speed
from viz.axis_notes import place_titles
from viz.phone import colorbar_below
from viz.theme import theme

# Keys whose arrays plotly never turns into typed arrays (is_skipped_key of plotly's private utilities).
_NOT_TYPED = frozenset({"geojson", "layer", "layers", "range"})
_HTML_SAFE = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))  # as plotly.io.to_json writes them
_FLOAT32_TEXT_MIN = 16  # float32 arrays from this size on are written with 9 significant digits (_Float32s)


def figure_json(fig: go.Figure) -> str:
    """What ``fig.to_json()`` sends the browser, built two to five times faster.

    ``to_json`` deep-copies the whole figure (every hover label of every cell) and then walks it again in Python
    to make it JSON-safe: slow for big figures (the Embeddings page's heatmaps of 256 dimensions). Here each dict
    and list is copied once, numeric arrays become plotly's typed arrays (base64, as ``to_json`` writes them),
    other arrays become lists, and the C encoder of ``json`` writes the rest. tests/viz/test_viz_fast_build.py checks
    that the browser gets the same figure as from ``to_json``.
    """
    if plotly_internals.public_only():
        return pio.to_json(fig.to_dict(), validate=False)
    out = {"data": [_plain(trace) for trace in plotly_internals.traces(fig)],
           "layout": _plain(plotly_internals.layout(fig))}
    for trace in out["data"]:
        trace.pop("uid", None)
    try:
        return _dumps(out)
    except (TypeError, ValueError):  # a NaN or a value json cannot write: plotly's own way
        return pio.to_json(fig.to_dict(), validate=False)


def browser_json(fig: go.Figure, datarevision: str) -> str:
    """The figure as the app hands it to ``st.plotly_chart(..., theme=None)``: drawn once where it appears.

    Streamlit's chart element hands ``Plotly.react`` the figure twice when it mounts, the second time as a copy
    made after the first draw. Plotly redraws in full unless the copy compares equal to what it drew, so here
    - the chart look is written into the figure (:func:`viz.look.bake`) instead of a template, which would be a
      new object in the copy;
    - numeric arrays are plain lists (NaN written as null, as plotly does): Plotly cannot compare typed arrays
      and counts them as changed; float32 arrays are written with 9 significant digits (:class:`_Float32s`),
      which read back as exactly the same float32s;
    - ``datarevision`` names the content (equal only for equal content), so Plotly does not walk the arrays to
      compare them; a chart handed a figure with another name is drawn again.
    The app's CSS gives every chart a whole-pixel width: Streamlit sets the width it measured, and a fraction of
    a pixel against Plotly's own measurement was a change, and a second draw, too.
    """
    if plotly_internals.public_only():
        return _dumps(_finished(_untyped(json.loads(pio.to_json(fig.to_dict(), validate=False))), datarevision))
    # The template is left out here rather than copied and then dropped by look.bake (kept when the look is off).
    layout = {k: _plain(v, k, typed=False) for k, v in plotly_internals.layout(fig).items()
              if k != "template" or speed.off("look")}
    out = {"data": [_plain(trace, typed=False) for trace in plotly_internals.traces(fig)], "layout": layout}
    for trace in out["data"]:
        trace.pop("uid", None)
    try:
        return _dumps(_finished(out, datarevision))
    except (TypeError, ValueError):  # a value json cannot write: plotly's own encoding, then plain lists
        return _dumps(_finished(_untyped(json.loads(pio.to_json(fig.to_dict(), validate=False))), datarevision))


def _finished(out: dict, datarevision: str) -> dict:
    """The look written in, the theme's smallest font kept by what came with it (as by enforce_min_font), the axis
    titles as notes (viz.axis_notes), named. A device switched off (viz/speed.py) leaves its step to the browser:
    Streamlit's theme then styles the chart (views/widgets.chart), Plotly places the axis titles."""
    if not speed.off("look"):
        look.bake(out)
    if theme().min_font:
        _floor_sizes(out, theme().min_font)
    if theme().figure_px:  # a phone
        colorbar_below(out)
    if not speed.off("axis_notes"):
        place_titles(out)  # after the floor: the labels' reach is estimated at the sizes drawn
    out["layout"]["datarevision"] = datarevision
    return out


def _floor_sizes(value, px: float, in_font: bool = False) -> None:
    """Raise every font size in a figure dict to at least ``px``, in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if in_font and key == "size" and isinstance(item, (int, float)) and item < px:
                value[key] = px
            elif isinstance(item, (dict, list)):
                _floor_sizes(item, px, key.endswith("font"))
    elif isinstance(value, list):
        for item in value:
            _floor_sizes(item, px, in_font)


def _dumps(out: dict) -> str:
    arrays: list[np.ndarray] = []
    slot = f"@{secrets.token_hex(8)}@"  # a placeholder no text of the figure can hold: new for every call

    def numbers(value):
        if isinstance(value, _Float32s):
            arrays.append(value.array)
            return f"{slot}{len(arrays) - 1}"
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    text = json.dumps(out, separators=(",", ":"), allow_nan=False, default=numbers)
    for unsafe, safe in _HTML_SAFE:
        text = text.replace(unsafe, safe)
    if arrays:
        text = re.sub(f'"{slot}(\\d+)"', lambda m: _float32_json(arrays[int(m.group(1))]), text)
    return text


class _Float32s:
    """A float32 array that :func:`_dumps` writes as JSON numbers of 9 significant digits ("0.84147096", not the
    float64 "0.8414709568023682"): nine digits read back as the very same float32, in about half the text.

    A page's first visit waits for its charts' JSON to arrive, and a websocket message of a few hundred kB reaches
    the page well after the server wrote it while the page is drawing the charts before it (the network frames'
    times in `python benchmarks/bench_pages.py --profile`). Nine digits are also written faster than float64's
    seventeen."""
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


_NINE_DIGITS = "%.9g".__mod__


def _float32_json(a: np.ndarray) -> str:
    """(...) float32 -> nested JSON lists of numbers; NaN and infinities as null (as plotly writes them)."""
    if a.ndim > 1:
        return "[" + ",".join(_float32_json(row) for row in a) + "]"
    texts = list(map(_NINE_DIGITS, a.tolist()))
    if not np.isfinite(a).all():
        texts = [t if ok else "null" for t, ok in zip(texts, np.isfinite(a).tolist())]
    return "[" + ",".join(texts) + "]"


def _plain(value, key: str | None = None, typed: bool = True):
    """``value`` as JSON-ready dicts, lists and scalars; numeric arrays right under a dict key as typed arrays
    (``typed=False``: as lists, with NaN and infinities as None; float32 arrays of _FLOAT32_TEXT_MIN values or more
    as :class:`_Float32s`, which :func:`_dumps` writes)."""
    if isinstance(value, dict):
        return {k: _plain(v, k, typed) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, None, typed) for v in value]
    if isinstance(value, np.ndarray):
        if typed and key is not None and key not in _NOT_TYPED and value.dtype.kind in "iuf" and value.size:
            spec = plotly_internals.typed_array(value)
            if isinstance(spec, dict):
                return spec
        if not typed and value.dtype == np.float32 and value.size >= _FLOAT32_TEXT_MIN:
            return _Float32s(value)
        if not typed and value.dtype.kind == "f" and not np.isfinite(value).all():
            kept = value.astype(object)
            kept[~np.isfinite(value)] = None
            return kept.tolist()
        return value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if not typed and isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _untyped(value):
    """A figure dict from plotly's JSON with every typed array ({"dtype", "bdata", "shape"}) as a plain list."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            shape = value.get("shape")
            if shape:
                data = data.reshape([int(n) for n in str(shape).split(",")])
            return _plain(data, typed=False)
        return {k: _untyped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untyped(v) for v in value]
    return value
