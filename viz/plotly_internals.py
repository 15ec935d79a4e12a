"""Every private name of Plotly the app uses, in one room, each with a public fallback.

Plotly's property objects validate and copy on every access; reading a built figure's raw dicts, building one without
validation and setting a registered template as plain JSON made a page's figures several times cheaper to build
and send (docs/performance.md). Those are private names (`fig._data`, `fig._layout`, `obj._props`, `_validate`,
`_plotly_utils`), which a Plotly upgrade may change. So they live here only, tests/views/test_internals_contract.py
fails with a clear message when one changes, and `ATLAS_PUBLIC_ONLY=1` switches every one to Plotly's public API:
slower, never blank.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from viz import speed

# Plotly is imported where a figure is built: views/plumbing/streamlit_internals.py reads the switch before it loads.
if TYPE_CHECKING:
    import plotly.graph_objects as go


def public_only() -> bool:
    """True when Plotly's private names are off (`ATLAS_PUBLIC_ONLY=1` or `ATLAS_SPEED_OFF=plotly`, viz/speed.py)."""
    return speed.off("plotly")


def traces(fig: go.Figure) -> list[dict]:
    """The figure's traces as the dicts Plotly keeps (not copies: callers only read them)."""
    return [t.to_plotly_json() for t in fig.data] if public_only() else fig._data


def layout(fig: go.Figure) -> dict:
    """The figure's layout as the dict Plotly keeps (read only)."""
    return fig.layout.to_plotly_json() if public_only() else fig._layout


def props(obj) -> dict | None:
    """The properties a Plotly object (a layout, a trace, a colour bar's owner) has been given, as a dict."""
    return obj.to_plotly_json() if public_only() else obj._props


def new_figure(data: list | None, layout: dict, validate: bool) -> go.Figure:
    """go.Figure, validated only when `validate` (the builders write plain, valid Plotly: tests build both ways)."""
    import plotly.graph_objects as go

    if public_only() or validate:
        return go.Figure(data=data, layout=layout)
    return go.Figure(data=data, layout=layout, _validate=False)


def set_unvalidated(fig: go.Figure, **values) -> None:
    """Set layout properties known to be valid (a registered template's JSON) without validating them again."""
    if public_only():
        fig.update_layout(**values)
        return
    fig.layout._validate = False
    try:
        for key, value in values.items():
            fig.layout[key] = value
    finally:
        fig.layout._validate = fig._validate


def typed_array(a) -> dict:
    """A NumPy array as Plotly's base64 typed-array spec, as `to_json` writes it (the fast path's only: with the
    speed layer off, viz.transport lets `plotly.io.to_json` write the whole figure)."""
    from _plotly_utils.utils import to_typed_array_spec

    return to_typed_array_spec(a)


def named_colorscale(name: str) -> list[list]:
    """A named Plotly colour scale as [[position, colour], ...], spelled out as validation writes it."""
    if public_only():
        from plotly.colors import get_colorscale

        return [list(pair) for pair in get_colorscale(name)]
    from _plotly_utils.basevalidators import ColorscaleValidator

    return [list(pair) for pair in ColorscaleValidator("colorscale", "heatmap").validate_coerce(name)]


@contextmanager
def speed_layer(on: bool):
    """Tests: run a block with the speed layer on or off (the switch is read at each call)."""
    before = os.environ.get("ATLAS_PUBLIC_ONLY")
    os.environ["ATLAS_PUBLIC_ONLY"] = "0" if on else "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ATLAS_PUBLIC_ONLY", None)
        else:
            os.environ["ATLAS_PUBLIC_ONLY"] = before
