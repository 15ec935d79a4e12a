"""Colour scales by role: probabilities (0..1), signed values, and effects on the translation; the theme in force
says which plotly scale each role is (the presenter's high-contrast theme swaps them)."""

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


# Effects on the translation (a head switched off, a component patched in, the loss with a head off) share one
# colour language on every page, since one lecture shows several of them: the warm end of the theme's diverging
# scale (red; orange in high contrast) always means worse for the translation (its tokens less probable, its loss
# higher), the cool end better, white no change, whichever way the quantity drawn runs; the legend says it in words.
WORSE = "worse for the translation"


def effect_scale(higher_is_worse: bool) -> list[list]:
    """The diverging scale of an effect on the translation as [position, colour] pairs, warm at the end of the values
    that are worse for it: ``higher_is_worse`` True for a loss increase, False for a change of log p."""
    name = theme().signed_scale  # warm at its high end
    if not higher_is_worse:
        name = name[:-2] if name.endswith("_r") else name + "_r"
    return resolve_scale(name)


def effect_colours(higher_is_worse: bool) -> tuple[str, str]:
    """(colour of a negative value, colour of a positive one) of an effect: the ends of :func:`effect_scale`."""
    scale = effect_scale(higher_is_worse)
    return scale[0][1], scale[-1][1]


def effect_words(worse: str = WORSE, short: bool = False) -> str:
    """What the warm colour means, for a legend: "red: worse for the translation"; ``short``, or in presenter mode's
    large type, "red: worse", which fits along a short colour bar (the figure's title says of what)."""
    t = theme()
    return f"{t.warm_name}: worse" if short or t.short_axis_titles else f"{t.warm_name}: {worse}"


def effect_legend(label: str, worse: str = WORSE) -> str:
    """A colour bar's title for an effect: the quantity drawn, then :func:`effect_words` on a line of its own."""
    return f"{label}<br>{effect_words(worse)}" if label else effect_words(worse)


@cache
def _named_scale(name: str) -> tuple:
    return tuple(tuple(pair) for pair in named_colorscale(name))  # as validation spells it out
