"""Colour scales by role: probabilities (0..1) and signed values; the theme in force says which plotly scale each
role is (the presenter's high-contrast theme swaps them)."""

from __future__ import annotations

from functools import cache

from viz.plotly_internals import named_colorscale
from viz.theme import theme

# The roles; the theme says which plotly scale each one is (see resolve_scale).
PROB_SCALE = "prob"
SIGNED_SCALE = "signed"

# The lines of one figure differ by dash as well as by colour, and the legend shows both: a reader who cannot tell
# the colours apart (greyscale, a washed-out projector, a colour-vision deficiency) can still match line and name.
LINE_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def line_dash(i: int) -> str:
    """The dash of a figure's ``i``-th line (0-based), repeating after six."""
    return LINE_DASHES[i % len(LINE_DASHES)]


def resolve_scale(colorscale):
    """A role (PROB_SCALE, SIGNED_SCALE) or a plotly scale name -> the scale as [position, colour] pairs.

    Spelled out, as plotly's validation would: plotly.js has scales of the same names with other colours
    ("Blues" there runs from dark blue to grey), and figure() does not validate."""
    if colorscale == PROB_SCALE:
        colorscale = theme().prob_scale
    elif colorscale == SIGNED_SCALE:
        colorscale = theme().signed_scale
    if isinstance(colorscale, str):
        return [list(pair) for pair in _named_scale(colorscale)]  # a fresh list: a figure may be changed later
    return colorscale




@cache
def _named_scale(name: str) -> tuple:
    return tuple(tuple(pair) for pair in named_colorscale(name))  # as validation spells it out
