"""Figures and their styling: the unvalidated figure every builder makes, the template, the lecture-room layout
(fonts, title, margins wide enough for the labels) and presenter mode's minimum font size.

A builder writes its traces and layout as dicts and calls :func:`styled_figure` (or :func:`figure`, then
:func:`style`); text widths are estimated here (:func:`text_px`) so that margins and titles fit before Plotly
draws.
"""

from __future__ import annotations

import html
import json
import math
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from viz import plotly_internals
from viz.text import TITLE_WRAP_CHARS, title_lines, wrap_title
from viz.theme import figure_width, fit_height, theme

MIN_COLORBAR_PX = 120  # a colour bar shorter than this squeezes its tick labels together
# Width a figure is assumed to get on the page when the caller does not say
# (``width_px``); only used to decide how many key labels fit. PAGE_WIDTH_PX is
# the main column of a 1440 px window with the sidebar open (Streamlit's wide
# layout): a figure in a column of share f gets about f × PAGE_WIDTH_PX.
FIGURE_WIDTH_PX = 700
PAGE_WIDTH_PX = 940
# Titles hang TITLE_PAD_PX below the figure's top edge, TITLE_LINE_PX per line.
TITLE_PAD_PX, TITLE_LINE_PX = 18, 25

# Whether figure() validates what the builders wrote (see figure()); tests switch it on with validating().
_VALIDATE: ContextVar[bool] = ContextVar("viz_validate", default=False)


@contextmanager
def validating() -> Iterator[None]:
    """Build the figures inside the block with plotly's full validation (tests compare both ways)."""
    token = _VALIDATE.set(True)
    try:
        yield
    finally:
        _VALIDATE.reset(token)


def figure(data: list | None = None, layout: dict | None = None, template: str = "plotly_white") -> go.Figure:
    """A figure from trace and layout dicts written by this package, built without plotly's validation, with the
    registered plotly ``template`` (the look a notebook gets; the app's charts are sent with the look written in
    and no template, see :func:`viz.transport.browser_json`).

    Validation checks every property name and coerces every value, and it costs two to three times the rest of
    a heatmap's build (most of a page's server CPU per new sentence). The builders
    write plain, valid plotly (no shorthands for validation to expand), so tests/viz/test_viz_fast_build.py builds
    every figure made here both ways, with validation inside :func:`validating`, and checks that the JSON sent to
    the browser is the same. Attribute access (``fig.layout.title.text``, ``fig.data[0].z``) works either way.
    """
    # An empty template given keeps plotly from setting its default one first; ours is set after the figure is
    # built, which deep-copies the layout it is given.
    fig = plotly_internals.new_figure(data, {"template": {}, **(layout or {})}, _VALIDATE.get())
    set_template(fig, template)
    return fig


@cache
def _template_text(name: str) -> str:
    return json.dumps(pio.templates[name].to_plotly_json())


def template_dict(name: str) -> dict:
    """The registered plotly template ``name`` as plain JSON, a fresh copy each time.

    Set as a template object, plotly deep-copies it (``to_plotly_json``), twice per figure
    (the default template, then ours), up to half of a small heatmap's build. An unvalidated layout keeps a dict
    as it is given, so each figure gets its own copy made by ``json.loads`` from text kept once; the figure's
    JSON is the same (tests/viz/test_viz_fast_build.py)."""
    return json.loads(_template_text(name))


def style(fig: go.Figure, title: str | None = None, height: int | None = None,
          width: int | None = None, wrap_chars: int | None = TITLE_WRAP_CHARS,
          subplot_titles: bool = False) -> go.Figure:
    """Apply the lecture-room styling (large fonts, white template) in place.

    The title is wrapped with :func:`wrap_title` (``wrap_chars=None``: never),
    hangs from the top of the figure, and the top margin grows with its number
    of lines (plus room for ``subplot_titles`` above the top row of plots).
    A builder that writes its whole layout as a dict uses :func:`styled_figure` instead (one build, no update).
    """
    set_template(fig, "plotly_white")
    styling = style_layout(title, height, width, wrap_chars, subplot_titles)
    margin = styling["margin"]
    # plotly's own dict of the layout, read only: to_plotly_json() would deep-copy it, template and all
    fit_margins(margin, {**plotly_internals.props(fig.layout), "font": styling["font"]},
                styling.get("height") or fig.layout.height, width or fig.layout.width)
    fig.update_layout(**dict(styling, margin=margin))
    return enforce_min_font(fig)


def style_layout(title: str | None = None, height: int | None = None, width: int | None = None,
                 wrap_chars: int | None = TITLE_WRAP_CHARS, subplot_titles: bool = False,
                 margin: dict | None = None) -> dict:
    """The layout settings :func:`style` applies, as a dict (without the template); ``margin`` overrides some
    of its margins."""
    t = theme()
    lines = title_lines(title, wrap_chars)
    if title and wrap_chars:
        title = wrap_title(title, wrap_chars)
    layout = dict(font=dict(size=t.base),
                  margin=dict(dict(l=20, r=20, b=20, t=top_margin(lines) + (20 if subplot_titles and lines else 0)),
                              **(margin or {})),
                  hoverlabel=dict(font=dict(size=t.hover)))
    if title:
        layout["title"] = dict(text=title, font=dict(size=t.title), y=1, yref="container", yanchor="top",
                               pad=dict(t=TITLE_PAD_PX))
    if height:  # presenter mode: no taller than its screen leaves (viz.theme)
        layout["height"] = fit_height(height)
    if width:
        layout["width"] = int(width)
    return layout


# Advance widths of the printable ASCII characters (32..126), in hundredths of the font size, of DejaVu Sans: a
# wide sans-serif like Verdana, so the estimates below err on the wide side of Arial and Liberation Sans.
_CHAR_WIDTHS = ("3240468464957827393950843236323464646464646464646464343484848453996869707763587775292966568675796079"
                "696361736899696169393439845050616355636235636328285828976361636341523963598259595264346484")
_TAGS = re.compile(r"<[^>]*>")
MIN_PLOT_PX = 64  # plotly keeps at least this much of the plot when margins grow (layout.minreducedheight)


def text_px(text: str, size: float) -> float:
    """Width of plotly label text (tags dropped, entities one character) at font ``size``, estimated."""
    plain = html.unescape(_TAGS.sub("", text))
    total = 0.0
    for ch in plain:
        code = ord(unicodedata.normalize("NFD", ch)[0])
        if 32 <= code < 127:
            total += int(_CHAR_WIDTHS[2 * (code - 32): 2 * (code - 31)]) / 100
        else:
            total += 1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.8
    return total * size


def label_margins(layout: dict, base: float) -> tuple[float, float]:
    """(left, bottom) pixels the tick labels and titles of the axes at the figure's left and bottom edges need.

    Plotly finds out by drawing: with ``automargin`` (the template's) it draws the figure, measures the labels,
    and when they do not fit in the margins it draws everything again, which is half the drawing time of a
    heatmap in the browser. Margins set to this estimate beforehand leave nothing to push, so the figure is drawn
    once. The browser gets no automargin at all (viz/axis_notes.py: measuring the labels is itself a forced
    layout of the page per label), so this estimate is what keeps every label in the figure:
    tests/browser/test_browser_tour.py (C4) checks it against Chromium's own measurements of the labels and titles.
    """
    left = bottom = 0.0
    for name, axis in layout.items():
        if not (name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict)) or axis.get("visible") is False:
            continue
        x = name[0] == "x"
        domain = axis.get("domain") or [0.0, 1.0]
        if not x and domain[0] > 0.01:  # a y axis not at the left edge pushes no margin (in a grid, every row's
            continue                    # x axis is counted: their labels are alike, and it errs on the safe side)
        title = axis.get("title") or {}
        need = (15 + 1.3 * ((title.get("font") or {}).get("size") or base)) if title.get("text") else 0.0
        need += tick_labels_px(axis, base, x)
        if x:
            bottom = max(bottom, need + 20)
        else:
            left = max(left, need + 16)
    return left, bottom


def tick_labels_px(axis: dict, base: float, x: bool) -> float:
    """How far an axis's tick labels reach from the axis, in pixels: down from an x axis (rotated labels
    included), out from a y axis; 0 where it shows none. ``base``: the figure's font size, for labels that set
    none."""
    if not axis.get("showticklabels", True) or axis.get("visible") is False:
        return 0.0
    tick = (axis.get("tickfont") or {}).get("size") or base
    texts = axis.get("ticktext")
    if texts is not None and len(texts):
        widest = max(text_px(str(t), tick) for t in texts)
        angle = math.radians(abs(axis.get("tickangle") or 0)) if x else 0.0
        return widest * math.sin(angle) + tick * math.cos(angle) if x else widest
    return 1.5 * tick if x else 2.6 * tick  # plotly's own numbers: one line below, about four digits beside


def fit_margins(margin: dict, layout: dict, height: int | None, width: int | None) -> None:
    """Widen ``margin`` (in place) to :func:`label_margins`' estimate, so that plotly draws the figure once.

    Not where the plot would shrink below plotly's minimum: there plotly shrinks the margins itself."""
    base = (layout.get("font") or {}).get("size") or theme().base
    left, bottom = label_margins(layout, base)
    legend = layout.get("legend") or {}
    if legend.get("yref") == "container" and legend.get("y") == 0 and layout.get("showlegend") is not False:
        bottom += 1.6 * base + 12  # one row of legend entries at the bottom edge
    if not height or margin["t"] + bottom + MIN_PLOT_PX <= height:
        margin["b"] = max(margin["b"], math.ceil(bottom))
    if margin["l"] + left + margin["r"] + MIN_PLOT_PX <= (width or PAGE_WIDTH_PX) * 0.6:
        margin["l"] = max(margin["l"], math.ceil(left))


def styled_figure(data: list, layout: dict, title: str | None = None, height: int | None = None,
                  width: int | None = None, wrap_chars: int | None = TITLE_WRAP_CHARS,
                  subplot_titles: bool = False, margin: dict | None = None) -> go.Figure:
    """``style(figure(data, layout), ...)`` in one build: plotly's incremental updates (``update_layout``,
    ``update_xaxes``) cost more than building the whole figure. ``layout`` must not set what style sets."""
    styling = style_layout(title, height, width, wrap_chars, subplot_titles, margin)
    clash = set(styling) & set(layout)
    if clash:
        raise ValueError(f"styled_figure: the layout sets {sorted(clash)}, which the styling sets")
    fit_margins(styling["margin"], {**layout, "font": styling["font"]}, styling.get("height"), width)  # label room
    fig = figure(data, {**layout, **styling})  # with the plotly_white template
    return enforce_min_font(fig)


def set_template(fig: go.Figure, name: str) -> None:
    """Give ``fig`` the registered plotly template ``name``, without validating it again.

    ``update_layout(template=name)`` validates a deep copy of the whole template: about a quarter
    of a heatmap's build. A registered template is valid already, and plotly itself sets the default template
    without validation when it creates a figure (``BaseFigure._initialize_layout_template``); here it is set as
    plain JSON (:func:`template_dict`), which plotly keeps without copying it again. The figure's JSON is the same.
    """
    plotly_internals.set_unvalidated(fig, template=template_dict(name))


def enforce_min_font(fig: go.Figure) -> go.Figure:
    """With a theme that has a minimum font size (presenter mode), bring every text of ``fig`` up to it, and keep
    its colour bars long enough for their tick labels.

    :func:`style` calls it; call it again after adding axes or traces to a styled figure.
    """
    t = theme()
    if not t.min_font:
        return fig
    _long_colorbars(fig)
    # Sizes left unset would take Streamlit's theme (about 14 px for axis and colourbar titles): set them.
    return floor_fonts(fig, t.min_font, unset=t.base)


def _long_colorbars(fig: go.Figure) -> None:
    """A colour bar is as long as the plot: in a figure cut to a presenter screen's height that can be too short
    for its tick labels, which then run into each other. Such a bar gets MIN_COLORBAR_PX, reaching into the margins."""
    layout = fig.layout
    if not layout.height:
        return
    # plotly pushes the margin out to the labels
    bottom = max(layout.margin.b or 0, label_margins(plotly_internals.props(layout), theme().base)[1])
    plot_px = layout.height - (layout.margin.t or 0) - bottom
    owners = [owner for owner in [layout.coloraxis] + list(fig.data)
              if "colorbar" in (plotly_internals.props(owner) or {})]  # only bars the figure shows (see floor_fonts)
    for owner in owners:
        bar = owner.colorbar
        if plot_px < MIN_COLORBAR_PX:
            bar.update(lenmode="pixels", len=MIN_COLORBAR_PX)
        if bar.tickvals is None:  # no more tick labels than fit apart on the bar (a row of bars can share a plot)
            length = bar.len if bar.lenmode == "pixels" else max(plot_px, MIN_COLORBAR_PX) * (bar.len or 1.0)
            bar.nticks = max(2, int(length // (2.5 * theme().tick)))
            if bar.nticks < 6:  # Plotly's round ticks on a short bar: a lone "0", or more than fit: the ends (and 0)
                _end_ticks(bar, _colour_range(fig, owner))


def _colour_range(fig: go.Figure, owner) -> tuple[float, float] | None:
    """The values at the ends of ``owner``'s colour bar: its cmin/zmin and cmax/zmax, else its data's extremes."""
    props = plotly_internals.props(owner) or {}
    lo, hi = props.get("zmin", props.get("cmin")), props.get("zmax", props.get("cmax"))
    if lo is not None and hi is not None:
        return float(lo), float(hi)
    shared = owner is fig.layout.coloraxis
    values = [v for trace in fig.data if (trace is owner or shared and "coloraxis" in (plotly_internals.props(trace)
              or {})) for v in _flat_numbers((plotly_internals.props(trace) or {}).get("z"))]
    return (min(values), max(values)) if values else None


def _flat_numbers(z) -> list[float]:
    """The finite numbers of a (nested) array of values; none for a missing or non-numeric one."""
    try:
        a = np.asarray(z, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return []
    return a[np.isfinite(a)].tolist()


def _end_ticks(bar, ends: tuple[float, float] | None) -> None:
    """Tick labels at both ends of a colour bar, and at 0 when the range spans it."""
    if ends is None or not ends[0] < ends[1]:
        return
    lo, hi = ends
    vals = [lo, *([0.0] if lo < 0 < hi else []), hi]
    bar.update(tickvals=vals, ticktext=[f"{v:.2g}".replace("-", "−") for v in vals])


def floor_fonts(fig: go.Figure, px: int, unset: int | None = None) -> go.Figure:
    """Raise every font size set in ``fig`` (layout, axes, annotations, colourbars, trace texts) to ≥ ``px``.

    The builders already use the theme's sizes; this catches the few set by hand (bar labels, notes), so
    presenter mode keeps its promise for every figure, including ones added later. Unset sizes inherit
    ``layout.font.size``, which :func:`style` sets from the theme, except where Streamlit's theme sets its own
    (axis and colourbar titles, legends): ``unset`` gives those a size. It visits the font properties only:
    serialising the figure instead would cost several times a heatmap's build.
    """
    def lift(obj, attr: str, fill: int | None = None) -> None:
        if obj is None or attr not in obj:
            return
        font = obj[attr]
        size = font.size if font is not None else None
        if size is None and fill is not None:
            font.size = max(fill, px)
        elif isinstance(size, (int, float)) and size < px:
            font.size = px
        elif isinstance(size, (list, tuple)):
            font.size = [max(v, px) for v in size]

    def colorbar(parent) -> None:
        # Only a colour bar the figure sets: any `colorbar` written into a trace or its marker makes plotly.js
        # draw one (showscale defaults to true once the input has a colorbar object), empty or not.
        if parent is not None and "colorbar" in (plotly_internals.props(parent) or {}):
            lift(parent.colorbar, "tickfont")
            lift(parent.colorbar.title, "font", unset)

    layout = fig.layout
    for obj, attr, fill in ((layout, "font", None), (layout.title, "font", None), (layout.hoverlabel, "font", None),
                            (layout.legend, "font", unset)):
        lift(obj, attr, fill)
    for axis in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        lift(axis, "tickfont")
        lift(axis.title, "font", unset)
    colorbar(layout.coloraxis)
    for note in layout.annotations:
        lift(note, "font")
    for trace in fig.data:
        for attr in ("textfont", "insidetextfont", "outsidetextfont"):
            lift(trace, attr)
        if "hoverlabel" in trace:
            lift(trace.hoverlabel, "font")
        colorbar(trace)
        if "marker" in trace:
            colorbar(trace.marker)
    return fig


def top_margin(lines: int) -> int:
    """Top margin for a title of ``lines`` lines (30 px without a title)."""
    return TITLE_PAD_PX + TITLE_LINE_PX * lines + 27 if lines else 30


# A title line may take this share of the width a figure is built for: the page can be narrower than the width
# assumed (PAGE_WIDTH_PX is a 1440 px window's; at 1280 px a third of the page is about 0.85 of THIRD_WIDTH_PX), and
# the title starts a little in from the left edge.
TITLE_FIT = 0.8


def title_wrap_chars(title: str | None, width_px: int | None) -> int:
    """Characters per title line for a figure ``width_px`` wide: TITLE_WRAP_CHARS, or fewer where a line that
    long would not fit (plotly does not wrap a title; it clips it at the figure's edge)."""
    if not title or not (width_px or theme().figure_px):
        return TITLE_WRAP_CHARS
    size, limit = theme().title, figure_width(width_px) * TITLE_FIT
    chars = TITLE_WRAP_CHARS if theme().width_scale <= 1 else 2 * TITLE_WRAP_CHARS  # a wider page: longer lines
    # Lines are broken at spaces by character count: fewer characters until every line fits (a single word wider
    # than the figure keeps its own line whatever the count).
    while chars > 12 and any(text_px(line, size) > limit for line in wrap_title(title, chars).split("<br>")):
        chars -= 1
    return chars
