"""Shared heatmap builders, token axes, number formats and figure styling for every view.

Shape letters (see :mod:`viz`): ``i`` query (row) positions, ``j`` key (column)
positions, ``h`` panels (usually heads).

Heatmaps follow one convention everywhere: query on the y axis (first token at
the top), key on the x axis, INTEGER axes with token tick labels (category axes
merge repeated tokens such as "the" and "."), and masked cells drawn as a grey
overlay trace named ``"masked"`` on top of NaN cells in the value trace. Every
function that takes both token lists takes them as ``(z, row/query tokens,
column/key tokens)``, the order of the axes of ``z``.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import unicodedata
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.basevalidators import ColorscaleValidator
from _plotly_utils.utils import to_typed_array_spec

# Text helpers live in viz.text and are re-exported here, so views import one module.
from viz import look
from viz.text import (  # noqa: F401
    TITLE_WRAP_CHARS,
    cut_token,
    escape_token,
    escape_tokens,
    fmt_prob,
    fmt_share,
    title_lines,
    visible_len,
    wrap_title,
)

# The theme lives in viz.theme and is re-exported here too.
from viz.theme import (  # noqa: F401
    DEFAULT_THEME,
    PRESENTER_THEME,
    TEXT_LINE_PX,
    Theme,
    below_controls,
    fit_height,
    presenter_height,
    theme,
    using_theme,
)

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
    and no template, see :func:`browser_json`).

    Validation checks every property name and coerces every value, and it costs two to three times the rest of
    a heatmap's build (a page of three attention figures: ~0.2 s of server CPU per new sentence). The builders
    write plain, valid plotly (no shorthands for validation to expand), so tests/test_viz_fast_build.py builds
    every figure made here both ways, with validation inside :func:`validating`, and checks that the JSON sent to
    the browser is the same. Attribute access (``fig.layout.title.text``, ``fig.data[0].z``) works either way.
    """
    # An empty template given keeps plotly from setting its default one first; ours is set after the figure is
    # built, which deep-copies the layout it is given.
    fig = go.Figure(data=data, layout={"template": {}, **(layout or {})}, _validate=_VALIDATE.get())
    set_template(fig, template)
    return fig


@lru_cache(maxsize=None)
def _template_text(name: str) -> str:
    return json.dumps(pio.templates[name].to_plotly_json())


def template_dict(name: str) -> dict:
    """The registered plotly template ``name`` as plain JSON, a fresh copy each time.

    Set as a template object, plotly deep-copies it (``to_plotly_json``): 0.2 ms a time here, twice per figure
    (the default template, then ours), up to half of a small heatmap's build. An unvalidated layout keeps a dict
    as it is given, so each figure gets its own copy made by ``json.loads`` from text kept once; the figure's
    JSON is the same (tests/test_viz_fast_build.py)."""
    return json.loads(_template_text(name))


TICK_FONT = DEFAULT_THEME.tick  # the default theme's values, for callers that need a number
MIN_TICK_FONT = DEFAULT_THEME.min_tick  # no label is ever drawn smaller
BASE_FONT = DEFAULT_THEME.base
TITLE_FONT = DEFAULT_THEME.title
# Colour scales by role; the theme says which plotly scale each role is (see resolve_scale).
PROB_SCALE = "prob"
SIGNED_SCALE = "signed"
MASK_COLOUR = "#b0b0b0"
MASK_TRACE_NAME = "masked"
# Above this many masked cells (or 30 tokens a side) the "x" markers would be a
# grey smear; the grey fill alone then carries the message.
MAX_MASK_MARKERS = 900
# d3 format of probabilities in hover templates: the browser's twin of fmt_prob.
PROB_D3 = ".3f"

# Token axes (issue #8). A heatmap is ROW_PX pixels per query row plus room for
# the title and the key labels, between MIN_HEIGHT and MAX_HEIGHT; a facet panel
# is FACET_ROW_PX per row between MIN_PANEL_PX and MAX_PANEL_PX. When tick
# labels would be closer than MIN_TICK_PX, or more than MAX_TICKS, only every
# n-th token is labelled (hover still names every token).
ROW_PX = 28
MIN_HEIGHT, MAX_HEIGHT = 380, 1000
FACET_ROW_PX = 22
MIN_PANEL_PX, MAX_PANEL_PX = 220, 520
MIN_TICK_PX = DEFAULT_THEME.min_tick_px  # between neighbouring labels, across the text
MAX_TICKS = 40
MIN_COLORBAR_PX = 120  # a colour bar shorter than this squeezes its tick labels together
# Width a figure is assumed to get on the page when the caller does not say
# (``width_px``); only used to decide how many key labels fit. PAGE_WIDTH_PX is
# the main column of a 1440 px window with the sidebar open (Streamlit's wide
# layout): a figure in a column of share f gets about f × PAGE_WIDTH_PX.
FIGURE_WIDTH_PX = 700
PAGE_WIDTH_PX = 940
# Titles hang TITLE_PAD_PX below the figure's top edge, TITLE_LINE_PX per line.
TITLE_PAD_PX, TITLE_LINE_PX = 18, 25

# Which side each attention kind reads from: (query side, key side), filled in
# with the source / target language names.
KIND_SIDES = {
    "enc_self": ("{src}, source", "{src}, source"),
    "dec_self": ("{tgt}, decoder input", "{tgt}, decoder input"),
    "cross": ("{tgt}, decoder input", "{src}, source"),
}
KIND_NAMES = {
    "enc_self": "encoder self-attention",
    "dec_self": "decoder self-attention (masked)",
    "cross": "cross-attention (decoder → encoder)",
}


# The languages axis titles name (short codes such as "DE"), per thread like the theme: the app sets the loaded
# model's with using_languages(), so every figure of the page is labelled for that model without each caller
# passing them. An explicit src_lang/tgt_lang argument still wins.
_LANGS: ContextVar[tuple[str, str]] = ContextVar("viz_languages", default=("DE", "EN"))


def languages() -> tuple[str, str]:
    """(source, target) language labels figures are built with now."""
    return _LANGS.get()


@contextmanager
def using_languages(src: str, tgt: str) -> Iterator[tuple[str, str]]:
    """Build the figures inside the block with these language labels."""
    token = _LANGS.set((src, tgt))
    try:
        yield (src, tgt)
    finally:
        _LANGS.reset(token)


def resolve_languages(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """The given labels, or the ones in force (:func:`using_languages`) where None."""
    src, tgt = languages()
    return src_lang or src, tgt_lang or tgt


def kind_sides(kind: str, src_lang: str | None = None, tgt_lang: str | None = None) -> tuple[str, str]:
    """Return ``(query_side, key_side)``, e.g. ``("EN, decoder input", "DE, source")`` for cross."""
    if kind not in KIND_SIDES:
        raise ValueError(f"kind must be one of {sorted(KIND_SIDES)}, got {kind!r}")
    src_lang, tgt_lang = resolve_languages(src_lang, tgt_lang)
    src, tgt = escape_token(src_lang), escape_token(tgt_lang)
    q_side, k_side = KIND_SIDES[kind]
    return q_side.format(src=src, tgt=tgt), k_side.format(src=src, tgt=tgt)


def axis_titles(kind: str, src_lang: str | None = None, tgt_lang: str | None = None) -> tuple[str, str]:
    """Return ``(query_title, key_title)`` for ``kind`` in enc_self/dec_self/cross.

    E.g. cross: ``("query (EN, decoder input) ↓", "key (DE, source) →")``.
    """
    q_side, k_side = kind_sides(kind, src_lang, tgt_lang)
    if theme().short_axis_titles:  # the language only; which input it is, the page's controls say
        q_side, k_side = q_side.split(",")[0], k_side.split(",")[0]
    return f"query ({q_side}) ↓", f"key ({k_side}) →"


def as_mask(mask: np.ndarray | None, n_rows: int, n_cols: int) -> np.ndarray | None:
    """Bring a mask to an ``(i, j)`` = ``(n_rows, n_cols)`` bool array (True = may attend).

    Accepts the shapes models usually produce: ``(i, j)``, ``(1, j)`` or ``(j,)``
    (key padding), or those with extra leading singleton axes such as
    ``(1, 1, i, j)``.
    """
    if mask is None:
        return None
    m = np.asarray(mask)
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    try:
        return np.broadcast_to(m.astype(bool), (n_rows, n_cols)).copy()
    except ValueError:
        raise ValueError(
            f"mask has shape {np.asarray(mask).shape}, which does not broadcast to "
            f"(i, j) = ({n_rows}, {n_cols}); pass a bool array with True where attention is allowed"
        ) from None


def check_tokens(z: np.ndarray, row_tokens, col_tokens, what: str = "z") -> None:
    """Raise a clear error when an ``(..., i, j)`` array and its token lists disagree."""
    n_rows, n_cols = z.shape[-2:]
    if row_tokens is not None and len(row_tokens) != n_rows:
        raise ValueError(
            f"{what} has shape {tuple(z.shape)} but {len(row_tokens)} query (row) tokens were "
            f"given; the second-to-last axis must have one entry per query token"
        )
    if col_tokens is not None and len(col_tokens) != n_cols:
        raise ValueError(
            f"{what} has shape {tuple(z.shape)} but {len(col_tokens)} key (column) tokens were "
            f"given; the last axis must have one entry per key token"
        )


# Keys whose arrays plotly never turns into typed arrays (_plotly_utils.utils.is_skipped_key).
_NOT_TYPED = frozenset({"geojson", "layer", "layers", "range"})
_HTML_SAFE = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))  # as plotly.io.to_json writes them


def figure_json(fig: go.Figure) -> str:
    """What ``fig.to_json()`` sends the browser, built two to five times faster.

    ``to_json`` deep-copies the whole figure (every hover label of every cell) and then walks it again in Python
    to make it JSON-safe: 0.2 s for the Embeddings page's heatmaps of 256 dimensions. Here each dict and list
    is copied once, numeric arrays become plotly's typed arrays (base64, as ``to_json`` writes them), other
    arrays become lists, and the C encoder of ``json`` writes the rest. tests/test_viz_fast_build.py checks
    that the browser gets the same figure as from ``to_json``.
    """
    out = {"data": [_plain(trace) for trace in fig._data], "layout": _plain(fig._layout)}
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
      and counts them as changed;
    - ``datarevision`` names the content (equal only for equal content), so Plotly does not walk the arrays to
      compare them; a chart handed a figure with another name is drawn again.
    The app's CSS gives every chart a whole-pixel width: Streamlit sets the width it measured, and a fraction of
    a pixel against Plotly's own measurement was a change, and a second draw, too.
    """
    # The template is left out here rather than copied and then dropped by look.bake.
    layout = {k: _plain(v, k, typed=False) for k, v in fig._layout.items() if k != "template"}
    out = {"data": [_plain(trace, typed=False) for trace in fig._data], "layout": layout}
    for trace in out["data"]:
        trace.pop("uid", None)
    try:
        return _dumps(_finished(out, datarevision))
    except (TypeError, ValueError):  # a value json cannot write: plotly's own encoding, then plain lists
        return _dumps(_finished(_untyped(json.loads(pio.to_json(fig.to_dict(), validate=False))), datarevision))


def _finished(out: dict, datarevision: str) -> dict:
    """The look written in, the theme's smallest font kept by what came with it (as by enforce_min_font), named."""
    look.bake(out)
    if theme().min_font:
        _floor_sizes(out, theme().min_font)
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
    text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    for unsafe, safe in _HTML_SAFE:
        text = text.replace(unsafe, safe)
    return text


def _plain(value, key: str | None = None, typed: bool = True):
    """``value`` as JSON-ready dicts, lists and scalars; numeric arrays right under a dict key as typed arrays
    (``typed=False``: as lists, with NaN and infinities as None)."""
    if isinstance(value, dict):
        return {k: _plain(v, k, typed) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, None, typed) for v in value]
    if isinstance(value, np.ndarray):
        if typed and key is not None and key not in _NOT_TYPED and value.dtype.kind in "iuf" and value.size:
            spec = to_typed_array_spec(value)
            if isinstance(spec, dict):
                return spec
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
    fit_margins(margin, {**fig.layout._props, "font": styling["font"]}, styling.get("height") or fig.layout.height,
                width or fig.layout.width)
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
    once; where the estimate is short, plotly still pushes (and draws twice), so no label is ever cut off.
    tests/test_browser_margins.py checks the estimate against Chromium's own measurements.
    """
    left = bottom = 0.0
    for name, axis in layout.items():
        if not (name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict)) or axis.get("visible") is False:
            continue
        x = name[0] == "x"
        domain = axis.get("domain") or [0.0, 1.0]
        if not x and domain[0] > 0.01:  # a y axis not at the left edge pushes no margin (in a grid, every row's
            continue                    # x axis is counted: their labels are alike, and it errs on the safe side)
        tick = (axis.get("tickfont") or {}).get("size") or base
        title = axis.get("title") or {}
        need = (15 + 1.3 * ((title.get("font") or {}).get("size") or base)) if title.get("text") else 0.0
        if axis.get("showticklabels", True):
            texts = axis.get("ticktext")
            if texts is not None and len(texts):
                widest = max(text_px(str(t), tick) for t in texts)
                angle = math.radians(abs(axis.get("tickangle") or 0)) if x else 0.0
                need += widest * math.sin(angle) + tick * math.cos(angle) if x else widest
            else:  # plotly's own numbers: one line below, about four digits beside
                need += 1.5 * tick if x else 2.6 * tick
        if x:
            bottom = max(bottom, need + 20)
        else:
            left = max(left, need + 16)
    return left, bottom


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

    ``update_layout(template=name)`` validates a deep copy of the whole template: 12 ms per figure here, a quarter
    of a heatmap's build. A registered template is valid already, and plotly itself sets the default template
    without validation when it creates a figure (``BaseFigure._initialize_layout_template``); here it is set as
    plain JSON (:func:`template_dict`), which plotly keeps without copying it again. The figure's JSON is the same.
    """
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = template_dict(name)
    finally:
        layout._validate = fig._validate


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
    bottom = max(layout.margin.b or 0, label_margins(layout._props, theme().base)[1])  # plotly pushes the margin
    if layout.height - (layout.margin.t or 0) - bottom >= MIN_COLORBAR_PX:
        return
    owners = [layout.coloraxis] + list(fig.data)
    for owner in owners:
        if "colorbar" in (owner._props or {}):  # only bars the figure shows (see floor_fonts)
            owner.colorbar.update(lenmode="pixels", len=MIN_COLORBAR_PX)


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


_SCALES = ColorscaleValidator("colorscale", "heatmap")


@lru_cache(maxsize=None)
def _named_scale(name: str) -> tuple:
    return tuple(tuple(pair) for pair in _SCALES.validate_coerce(name))  # as validation spells it out


def floor_fonts(fig: go.Figure, px: int, unset: int | None = None) -> go.Figure:
    """Raise every font size set in ``fig`` (layout, axes, annotations, colourbars, trace texts) to ≥ ``px``.

    The builders already use the theme's sizes; this catches the few set by hand (bar labels, notes), so
    presenter mode keeps its promise for every figure, including ones added later. Unset sizes inherit
    ``layout.font.size``, which :func:`style` sets from the theme, except where Streamlit's theme sets its own
    (axis and colourbar titles, legends): ``unset`` gives those a size. It visits the font properties only:
    serialising the figure instead would cost 0.3 s per heatmap.
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
        if parent is not None and "colorbar" in (parent._props or {}):
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


def cell_names(tokens: Sequence[str]) -> list[str]:
    """The name of each token's cell on a heatmap's category axis and in its hover: ``"tok (pos)"``, escaped.
    The position keeps repeated tokens apart (two "the" are two rows, never one)."""
    return [f"{t} ({i})" for i, t in enumerate(escape_tokens(tokens))]


def tick_step(n: int, axis_px: float | None = None, angle: int | None = None) -> int:
    """Label every ``tick_step``-th of ``n`` tokens: ≤ MAX_TICKS labels, ≥ MIN_TICK_PX apart.

    The distance counted is the one between neighbouring labels, across the
    text: for labels rotated by ``angle`` degrees that is the tick spacing
    times |sin(angle)|.
    """
    step = max(1, math.ceil(n / MAX_TICKS))
    if axis_px and n:
        step = max(step, math.ceil(theme().min_tick_px / (axis_px / n * _slant(angle))))
    return step


def tick_font(n: int, axis_px: float | None, step: int, angle: int | None = None) -> int:
    """Tick label size: the theme's with room to spare, smaller when crowded, ≥ its minimum."""
    t = theme()
    if not axis_px or not n:
        return t.tick
    gap = axis_px / n * step * _slant(angle)  # px between neighbouring labels
    return int(min(t.tick, max(t.min_tick, gap - 3)))


def _slant(angle: int | None) -> float:
    """Share of the tick spacing that separates rotated labels (1 for horizontal ones)."""
    return abs(math.sin(math.radians(angle))) if angle else 1.0


def plot_width_px(width_px: int | None, row_tokens=None, colorbar: bool = True,
                  cols: int = 1) -> float:
    """Width of one plot (of ``cols`` side by side) in a figure ``width_px`` wide (estimate).

    Takes off the margins, the row labels and title, and the colourbar.
    """
    cap = theme().max_label_chars
    longest = max((visible_len(escape_token(cut_token(t, cap))) for t in row_tokens), default=2) \
        if row_tokens is not None else 3
    used = 40 + 0.57 * theme().tick * min(longest, 16) + 15 + theme().base + (110 if colorbar else 0)
    width = (width_px or FIGURE_WIDTH_PX) * theme().width_scale
    return max(40.0, (width - used) / cols * (0.95 if cols > 1 else 1))


def axis_ticks(tokens, n: int, angle: int | None = None, reverse: bool = False,
               axis_px: float | None = None) -> dict:
    """Integer axis settings: token tick labels at 0..n-1, range exactly the cells.

    ``axis_px`` (the axis length in pixels, if known) thins the labels with
    :func:`tick_step` and sizes them with :func:`tick_font`; rotated labels
    (``angle``) turn upright (-90°) when that lets more of them show. ``reverse`` puts
    position 0 at the top (query axes); the explicit range keeps the mask's
    "x" markers from padding the axis.
    """
    out: dict = dict(tickfont=dict(size=theme().tick))
    if reverse:
        out.update(autorange="reversed")
    if tokens is None:
        return out
    step = tick_step(n, axis_px, angle)
    if angle and step > 1 and tick_step(n, axis_px, -90) < step:  # upright labels fit more
        angle, step = -90, tick_step(n, axis_px, -90)
    cap = theme().max_label_chars  # presenter mode: long tokens cut, hover names them whole
    text = escape_tokens([cut_token(t, cap) for t in tokens])
    out.update(tickmode="array", tickvals=list(range(0, n, step)), ticktext=text[::step],
               tickfont=dict(size=tick_font(n, axis_px, step, angle)),
               range=[n - 0.5, -0.5] if reverse else [-0.5, n - 0.5])
    if angle is not None:
        out["tickangle"] = angle
    return out


def label_px(tokens, angle: int = -45) -> int:
    """Pixels the rotated key tick labels plus the axis title take below a plot (estimate)."""
    if tokens is None:
        return 50
    t = theme()  # a character is about 0.57 font sizes wide
    longest = max((visible_len(escape_token(cut_token(tok, t.max_label_chars))) for tok in tokens), default=2)
    return int(30 + t.base + 0.57 * t.tick * min(longest, 16) * abs(math.sin(math.radians(angle))))


def heatmap_height(n_rows: int, col_tokens=None, title_lines: int = 1, angle: int = -45) -> int:
    """Height of a one-panel heatmap: ROW_PX per row plus title and key labels, clamped.

    Between MIN_HEIGHT and MAX_HEIGHT; :func:`plot_rows_px` gives the rows' share.
    ``angle`` is the key labels' rotation (see :func:`axis_ticks`).
    """
    if theme().height_px:
        return theme().height_px
    return int(min(MAX_HEIGHT, max(MIN_HEIGHT, _overhead(col_tokens, title_lines, angle)
                                   + ROW_PX * n_rows)))


def plot_rows_px(height: int, col_tokens=None, title_lines: int = 1, angle: int = -45) -> int:
    """Pixels left for the rows of a heatmap of ``height`` (see :func:`heatmap_height`)."""
    return max(1, height - _overhead(col_tokens, title_lines, angle))


def _overhead(col_tokens, title_lines: int, angle: int) -> int:
    """Title, margins and key labels of a heatmap, in pixels: the key labels as wide as plotly will find them (the
    margin it pushes, see :func:`label_margins`), so that row labels thinned for the rest do not touch in a short
    presenter figure."""
    labels = label_px(col_tokens, angle)
    if col_tokens is not None:
        t = theme()
        widest = max((text_px(escape_token(cut_token(tok, t.max_label_chars)), t.tick) for tok in col_tokens),
                     default=0)
        slant = math.radians(abs(angle))
        labels = max(labels, int(15 + 1.3 * t.base + widest * math.sin(slant) + t.tick * math.cos(slant)))
    return top_margin(title_lines) + 20 + labels


def _traces(z, mask, row_tokens, col_tokens, row_name, col_name, value_name, fmt):
    """Value heatmap trace plus optional mask overlay traces for one panel.

    A token axis is a category axis (:func:`token_axis`) whose categories are the hover labels ``"tok (pos)"``:
    unique, so repeated tokens never merge, and hover reads them (``%{x}``, ``%{y}``) with no label per cell.
    Chromium drew a 30-token heatmap 2–2.5× faster than with two labels per cell as customdata, and its
    JSON is half the size. A numbered axis (no tokens) stays numeric; its hover says ``"dim 17"`` as before.
    """
    z = np.asarray(z, dtype=np.float32)
    n_rows, n_cols = z.shape
    xs, col_label = _cells(col_tokens, n_cols, col_name, "x")
    ys, row_label = _cells(row_tokens, n_rows, row_name, "y")
    where = f"{row_name}: {row_label}<br>{col_name}: {col_label}"
    m = as_mask(mask, n_rows, n_cols)
    shown = z.copy()
    if m is not None:
        shown[~m] = np.nan  # each cell hovers in exactly one trace
    # Plain dicts: the figure validates them once when it is built (a go.Heatmap here would validate
    # them twice, and incremental updates of a built figure cost ~5× more than building it in one go).
    value = dict(
        type="heatmap", z=shown, x=xs, y=ys, hoverongaps=False, name=value_name,
        hovertemplate=f"{where}<br>{value_name}: %{{z:{fmt}}}<extra></extra>",
    )
    traces = [value]
    if m is not None and (~m).any():
        grey = np.where(m, np.nan, 1.0).astype(np.float32)
        traces.append(dict(
            type="heatmap", z=grey, x=xs, y=ys, name=MASK_TRACE_NAME, showscale=False,
            colorscale=[[0, MASK_COLOUR], [1, MASK_COLOUR]], zmin=0, zmax=1, hoverongaps=False,
            hovertemplate=f"{where}<br>masked<extra></extra>",
        ))
        if (~m).sum() <= MAX_MASK_MARKERS and max(n_rows, n_cols) <= 30:
            yy, xx = np.nonzero(~m)
            traces.append(dict(
                type="scatter", x=_at(xs, xx), y=_at(ys, yy), mode="markers",
                name=MASK_TRACE_NAME + " (x)", showlegend=False, hoverinfo="skip",
                marker=dict(symbol="x-thin", size=9 if max(n_rows, n_cols) <= 15 else 6,
                            line=dict(width=1.5, color="#555555")),
            ))
    return traces


def _cells(tokens, n: int, word: str, var: str) -> tuple[list[str] | np.ndarray, str]:
    """The coordinates of ``n`` cells along an axis and how hover names one: the labels ``"tok (pos)"`` of a
    token axis (its categories), or positions 0..n-1 on a numbered axis (``"query 3"``)."""
    if tokens is None:
        return np.arange(n, dtype=np.int32), f"{word} %{{{var}}}"
    return cell_names(tokens), f"%{{{var}}}"


def _at(coords, idx: np.ndarray):
    """The coordinates ``coords[idx]``: category names on a token axis (a number there would be a new category)."""
    return [coords[i] for i in idx] if isinstance(coords, list) else idx.astype(np.int32)


def token_axis(tokens) -> dict:
    """Axis settings of a heatmap axis whose cells are ``tokens`` (see :func:`_traces`): a category axis."""
    return {} if tokens is None else {"type": "category"}


def heatmap(z: np.ndarray, row_tokens: Sequence[str] | None, col_tokens: Sequence[str] | None,
            *, row_title: str, col_title: str, mask: np.ndarray | None = None,
            zmin: float | None = 0.0, zmax: float | None = 1.0, colorscale=PROB_SCALE,
            title: str | None = None, value_name: str = "weight",
            row_name: str = "query", col_name: str = "key", fmt: str = PROB_D3,
            colorbar_title: str | None = None, colorbar: dict | None = None,
            width_px: int | None = None) -> go.Figure:
    """One heatmap of ``z`` (i, j): rows = row (query) tokens top to bottom, columns = key tokens.

    Everything after the token lists is keyword-only, so an old positional call
    with the key tokens first fails loudly instead of swapping the axes.
    ``mask`` (i, j) bool: True = may attend / visible, False = masked. Masked
    cells become NaN in the value trace and are covered by a grey trace named
    ``"masked"`` (z = 1 at masked cells, NaN elsewhere) plus "x" markers.
    ``row_tokens``/``col_tokens`` = None gives a plain numbered axis (e.g. dimensions).
    With row tokens the height follows :func:`heatmap_height`; ``width_px`` (the
    width the page gives the figure) decides how many key labels fit.
    ``colorbar`` adds colourbar settings (e.g. tick labels). ``title`` and axis
    titles are plotly text: escape user text with :func:`escape_token`.
    """
    z = np.asarray(z, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D (i, j) array, got shape {z.shape}")
    check_tokens(z, row_tokens, col_tokens)
    n_rows, n_cols = z.shape
    traces = _traces(z, mask, row_tokens, col_tokens, row_name, col_name, value_name, fmt)
    traces[0].update(zmin=zmin, zmax=zmax, colorscale=resolve_scale(colorscale),
                     colorbar=dict(title=dict(text=colorbar_title or value_name),
                                   tickfont=dict(size=theme().tick), **(colorbar or {})))
    if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
        traces[0].update(zmid=0)
    x_ticks = axis_ticks(col_tokens, n_cols, angle=-45 if col_tokens is not None else None,
                         axis_px=plot_width_px(width_px, row_tokens))
    wrap = title_wrap_chars(title, width_px)
    lines, angle = title_lines(title, wrap), x_ticks.get("tickangle", -45)
    height = heatmap_height(n_rows, col_tokens, lines, angle) if row_tokens is not None else None
    rows_px = plot_rows_px(height, col_tokens, lines, angle) if height else None
    layout = dict(xaxis=dict(title=dict(text=col_title), showgrid=False, zeroline=False, **x_ticks,
                             **token_axis(col_tokens)),
                  yaxis=dict(title=dict(text=row_title), showgrid=False, zeroline=False,
                             **axis_ticks(row_tokens, n_rows, reverse=True, axis_px=rows_px), **token_axis(row_tokens)))
    return styled_figure(traces, layout, title, height=height, wrap_chars=wrap)


# A title line may take this share of the width a figure is built for: the page can be narrower than the width
# assumed (PAGE_WIDTH_PX is a 1440 px window's; at 1280 px a third of the page is about 0.85 of THIRD_WIDTH_PX), and
# the title starts a little in from the left edge.
TITLE_FIT = 0.8


def title_wrap_chars(title: str | None, width_px: int | None) -> int:
    """Characters per title line for a figure ``width_px`` wide: TITLE_WRAP_CHARS, or fewer where a line that
    long would not fit (plotly does not wrap a title; it clips it at the figure's edge)."""
    if not title or not width_px:
        return TITLE_WRAP_CHARS
    size, limit = theme().title, width_px * theme().width_scale * TITLE_FIT
    chars = TITLE_WRAP_CHARS if theme().width_scale == 1 else 2 * TITLE_WRAP_CHARS  # a wider page: longer lines
    # Lines are broken at spaces by character count: fewer characters until every line fits (a single word wider
    # than the figure keeps its own line whatever the count).
    while chars > 12 and any(text_px(line, size) > limit for line in wrap_title(title, chars).split("<br>")):
        chars -= 1
    return chars


def grid_domains(rows: int, cols: int, h_space: float, v_space: float) -> list[tuple[list[float], list[float]]]:
    """(x domain, y domain) of each cell of a rows × cols grid in paper coordinates, row-major from the top left,
    with the same arithmetic as ``plotly.subplots.make_subplots`` (which is ~5× slower to build with)."""
    width = (1.0 - h_space * (cols - 1)) / cols
    height = (1.0 - v_space * (rows - 1)) / rows
    cells = []
    for r in range(rows):
        top = 1.0 - r * (height + v_space)
        for c in range(cols):
            left = c * (width + h_space)
            def clip(v):  # float rounding must not leave [0, 1]
                return min(1.0, max(0.0, v))
            cells.append(([clip(left), clip(left + width)], [clip(top - height), clip(top)]))
    return cells


def grid_figure(data: list, axes: dict, rows: int, cols: int, h_space: float, v_space: float, *,
                column_titles: Sequence[str] | None = None, row_titles: Sequence[str] | None = None,
                cell_titles: Sequence[str] | None = None, title_font: int = 16, style: dict | None = None,
                **layout) -> go.Figure:
    """ONE figure from trace dicts and per-cell axis settings, built in a single pass.

    ``data``: trace dicts with ``xaxis``/``yaxis`` set by :func:`cell_axes`; ``axes``: {cell index: (x axis
    settings, y axis settings)}. Titles go above the columns (or above each cell) and right of the rows, as
    make_subplots places them, before any ``annotations`` given. ``style``: arguments of :func:`style`, applied
    in the same build (:func:`styled_figure`).
    """
    cells = grid_domains(rows, cols, h_space, v_space)
    notes = []
    for p, (x_dom, y_dom) in enumerate(cells):
        if p not in axes:
            continue
        x_name, y_name = cell_axes(p)
        x_set, y_set = axes[p]
        layout["xaxis" + x_name[1:]] = dict(x_set, domain=x_dom, anchor=y_name)
        layout["yaxis" + y_name[1:]] = dict(y_set, domain=y_dom, anchor=x_name)
        if cell_titles is not None and p < len(cell_titles):
            notes.append(dict(text=cell_titles[p], x=sum(x_dom) / 2, y=y_dom[1], xref="paper", yref="paper",
                              xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=title_font)))
    for c, text in enumerate(column_titles or []):
        x_dom, y_dom = cells[c]
        notes.append(dict(text=text, x=sum(x_dom) / 2, y=y_dom[1], xref="paper", yref="paper", xanchor="center",
                          yanchor="bottom", showarrow=False, font=dict(size=title_font)))
    for r, text in enumerate(row_titles or []):
        x_dom, y_dom = cells[r * cols + cols - 1]
        notes.append(dict(text=text, x=x_dom[1], y=sum(y_dom) / 2, xref="paper", yref="paper", xanchor="left",
                          yanchor="middle", xshift=4, textangle=90, showarrow=False, font=dict(size=title_font)))
    layout["annotations"] = notes + list(layout.get("annotations", []))
    return styled_figure(data, layout, **style) if style is not None else figure(data, layout)


def cell_axes(p: int) -> tuple[str, str]:
    """Axis references of grid cell ``p`` (0-based, row-major): ("x", "y"), ("x2", "y2"), ..."""
    n = "" if p == 0 else str(p + 1)
    return "x" + n, "y" + n


def facet_heatmaps(zs: np.ndarray, titles: Sequence[str], row_tokens, col_tokens, *,
                   row_title: str, col_title: str, mask: np.ndarray | None = None,
                   zmin: float | None = 0.0, zmax: float | None = 1.0,
                   colorscale=PROB_SCALE, title: str | None = None, value_name: str = "weight",
                   row_name: str = "query", col_name: str = "key", max_cols: int = 4,
                   fmt: str = PROB_D3, shared_scale: bool = True,
                   colorbar_title: str | None = None, colorbar: dict | None = None,
                   width_px: int | None = None) -> go.Figure:
    """ONE figure with h heatmap panels of ``zs`` (h, i, j), up to ``max_cols`` per row.

    All panels share one colour axis (``layout.coloraxis``, one colourbar) with
    range ``zmin``..``zmax``; ``shared_scale=False`` gives every panel its own
    symmetric range instead (no colourbar). ``mask`` is (i, j), shared by all
    panels. Y tick labels are shown on the first column only. A panel is
    FACET_ROW_PX per row (clamped), and labels are thinned as in :func:`heatmap`.
    Everything after the token lists is keyword-only.
    """
    zs = np.asarray(zs, dtype=np.float32)
    if zs.ndim != 3:
        raise ValueError(f"facet_heatmaps expects (h, i, j), got shape {zs.shape}")
    n, n_rows, n_cols = zs.shape
    if len(titles) != n:
        raise ValueError(f"got {len(titles)} titles for {n} panels")
    check_tokens(zs, row_tokens, col_tokens)
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    # Pixels: panel body, rotated x tick labels below it, subplot title above.
    panel = min(MAX_PANEL_PX, max(MIN_PANEL_PX, FACET_ROW_PX * n_rows))
    panel_w = plot_width_px(width_px, row_tokens, colorbar=shared_scale, cols=cols)
    x_ticks = axis_ticks(col_tokens, n_cols, angle=-60 if col_tokens is not None else None,
                         axis_px=panel_w)
    wrap = title_wrap_chars(title, width_px)
    shown = None if col_tokens is None else [col_tokens[j] for j in x_ticks["tickvals"]]  # thinned labels
    labels = label_px(shown, angle=x_ticks.get("tickangle", -60)) + 20
    height = rows * (panel + labels) + 100
    if theme().height_px:  # presenter: the panels share the screen's height below the titles
        above = top_margin(title_lines(title, wrap)) + 40
        panel = max(MIN_PANEL_PX // 4, (theme().height_px - above) // rows - labels)
        height = rows * (panel + labels) + above
    v_space = min(0.9 / max(rows - 1, 1), labels / height) if rows > 1 else 0.0
    data, axes = [], {}
    y_ticks = axis_ticks(row_tokens, n_rows, reverse=True, axis_px=panel)
    for p in range(n):
        r, c = p // cols + 1, p % cols + 1
        x_ref, y_ref = cell_axes(p)
        for t, tr in enumerate(_traces(zs[p], mask, row_tokens, col_tokens, row_name, col_name,
                                       value_name, fmt)):
            if t == 0:
                if shared_scale:
                    tr.update(coloraxis="coloraxis", zmin=zmin, zmax=zmax)
                else:
                    lim = float(np.nanmax(np.abs(zs[p]))) or 1.0
                    tr.update(zmin=-lim, zmax=lim, colorscale=resolve_scale(colorscale), showscale=False)
            tr.update(xaxis=x_ref, yaxis=y_ref)
            data.append(tr)
        x_set = dict(showgrid=False, zeroline=False, **x_ticks, **token_axis(col_tokens))
        y_set = dict(showgrid=False, zeroline=False, **y_ticks, **token_axis(row_tokens))
        if c > 1 and row_tokens is not None:
            y_set["showticklabels"] = False
        if r == rows or p + cols >= n:
            x_set["title"] = dict(text=col_title)
        if c == 1:
            y_set["title"] = dict(text=row_title)
        axes[p] = (x_set, y_set)
    layout = {}
    if shared_scale:
        layout["coloraxis"] = dict(
            colorscale=resolve_scale(colorscale), cmin=zmin, cmax=zmax,
            colorbar=dict(title=dict(text=colorbar_title or value_name),
                          tickfont=dict(size=theme().tick), **(colorbar or {})))
        if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
            layout["coloraxis"]["cmid"] = 0
    return grid_figure(data, axes, rows, cols, 0.04 if row_tokens is None else 0.05, v_space,
                       cell_titles=list(titles), title_font=max(16, theme().base),
                       style=dict(title=title, height=height, subplot_titles=True, wrap_chars=wrap), **layout)
