"""Shared heatmap builders, token escaping and figure styling for every view.

Shape letters: ``q`` query positions, ``k`` key positions, ``n`` panels (heads).

Heatmaps follow one convention everywhere: query on the y axis (first token at
the top), key on the x axis, INTEGER axes with token tick labels (category axes
merge repeated tokens such as "the" and "."), and masked cells drawn as a grey
overlay trace named ``"masked"`` on top of NaN cells in the value trace.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

TICK_FONT = 14
BASE_FONT = 15
TITLE_FONT = 19
PROB_SCALE = "Blues"
SIGNED_SCALE = "RdBu_r"
MASK_COLOUR = "#b0b0b0"
MASK_TRACE_NAME = "masked"
# Above this many masked cells (or 30 tokens a side) the "x" markers would be a
# grey smear; the grey fill alone then carries the message.
MAX_MASK_MARKERS = 900

# Which side each attention kind reads from: (query side, key side).
KIND_SIDES = {
    "enc_self": ("DE, source", "DE, source"),
    "dec_self": ("EN, decoder input", "EN, decoder input"),
    "cross": ("EN, decoder input", "DE, source"),
}
KIND_NAMES = {
    "enc_self": "encoder self-attention",
    "dec_self": "decoder self-attention (masked)",
    "cross": "cross-attention (decoder → encoder)",
}


def kind_sides(kind: str) -> tuple[str, str]:
    """Return ``(query_side, key_side)``, e.g. ``("EN, decoder input", "DE, source")``."""
    if kind not in KIND_SIDES:
        raise ValueError(f"kind must be one of {sorted(KIND_SIDES)}, got {kind!r}")
    return KIND_SIDES[kind]


def axis_titles(kind: str) -> tuple[str, str]:
    """Return ``(query_title, key_title)`` for ``kind`` in enc_self/dec_self/cross.

    E.g. cross: ``("query (EN, decoder input) ↓", "key (DE, source) →")``.
    """
    q_side, k_side = kind_sides(kind)
    return f"query ({q_side}) ↓", f"key ({k_side}) →"


def escape_token(token: object) -> str:
    """Escape a token so plotly shows it literally (``<script>`` stays text).

    Plotly renders a subset of HTML in labels and hover text and only knows
    the entities &amp; &lt; &gt; (plus a few symbols), so quotes are left alone:
    ``&quot;`` would be printed as-is.
    """
    return html.escape(str(token), quote=False)


def escape_tokens(tokens: Sequence[object]) -> list[str]:
    """Escape every token of a list with :func:`escape_token`."""
    return [escape_token(t) for t in tokens]


def as_mask(mask: np.ndarray | None, q: int, k: int) -> np.ndarray | None:
    """Bring a mask to a ``(q, k)`` bool array (True = may attend / visible).

    Accepts the shapes models usually produce: ``(q, k)``, ``(1, k)`` or ``(k,)``
    (key padding), or those with extra leading singleton axes such as
    ``(1, 1, q, k)``.
    """
    if mask is None:
        return None
    m = np.asarray(mask)
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    try:
        return np.broadcast_to(m.astype(bool), (q, k)).copy()
    except ValueError:
        raise ValueError(
            f"mask has shape {np.asarray(mask).shape}, which does not broadcast to "
            f"(q, k) = ({q}, {k}); pass a bool array with True where attention is allowed"
        ) from None


def check_tokens(z: np.ndarray, x_tokens, y_tokens, what: str = "z") -> None:
    """Raise a clear error when a ``(q, k)`` array and token lists disagree."""
    q, k = z.shape[-2:]
    if y_tokens is not None and len(y_tokens) != q:
        raise ValueError(
            f"{what} has shape {tuple(z.shape)} but {len(y_tokens)} query (row) tokens were "
            f"given; the second-to-last axis must have one entry per query token"
        )
    if x_tokens is not None and len(x_tokens) != k:
        raise ValueError(
            f"{what} has shape {tuple(z.shape)} but {len(x_tokens)} key (column) tokens were "
            f"given; the last axis must have one entry per key token"
        )


def style(fig: go.Figure, title: str | None = None, height: int | None = None,
          width: int | None = None) -> go.Figure:
    """Apply the lecture-room styling (large fonts, white template) in place."""
    fig.update_layout(
        template="plotly_white",
        font=dict(size=BASE_FONT),
        title=dict(text=title, font=dict(size=TITLE_FONT)) if title else None,
        margin=dict(l=20, r=20, t=70 if title else 30, b=20),
        hoverlabel=dict(font_size=15),
    )
    if height:
        fig.update_layout(height=int(height))
    if width:
        fig.update_layout(width=int(width))
    return fig


def hover_labels(tokens, n: int, word: str) -> tuple[list[str], list[str] | None]:
    """Hover labels ``"tok (pos)"`` and escaped tick texts (None = numeric axis)."""
    if tokens is None:
        return [f"{word} {i}" for i in range(n)], None
    ticks = escape_tokens(tokens)
    return [f"{t} ({i})" for i, t in enumerate(ticks)], ticks


def hover_customdata(y_hover: list[str], x_hover: list[str]) -> np.ndarray:
    """(q, k, 2) object array of per-cell hover labels: [query label, key label]."""
    q, k = len(y_hover), len(x_hover)
    cd = np.empty((q, k, 2), dtype=object)
    cd[:, :, 0] = np.asarray(y_hover, dtype=object)[:, None]
    cd[:, :, 1] = np.asarray(x_hover, dtype=object)[None, :]
    return cd


def axis_ticks(tokens, n: int, angle: int | None = None, reverse: bool = False) -> dict:
    """Integer axis settings: tickvals 0..n-1 with token tick text, range exactly the cells.

    ``reverse`` puts position 0 at the top (query axes); the explicit range
    keeps the mask's "x" markers from padding the axis.
    """
    out: dict = dict(tickfont=dict(size=TICK_FONT))
    if reverse:
        out.update(autorange="reversed")
    if tokens is None:
        return out
    out.update(tickmode="array", tickvals=list(range(n)), ticktext=escape_tokens(tokens),
               range=[n - 0.5, -0.5] if reverse else [-0.5, n - 0.5])
    if angle is not None:
        out["tickangle"] = angle
    return out


def _traces(z, mask, x_tokens, y_tokens, x_name, y_name, value_name, fmt):
    """Value heatmap trace plus optional mask overlay traces for one panel."""
    z = np.asarray(z, dtype=np.float32)
    q, k = z.shape
    y_hover, _ = hover_labels(y_tokens, q, y_name)
    x_hover, _ = hover_labels(x_tokens, k, x_name)
    cd = hover_customdata(y_hover, x_hover)  # (q, k, 2)
    m = as_mask(mask, q, k)
    shown = z.copy()
    masked_cd = None
    if m is not None:
        shown[~m] = np.nan
        # Each cell's labels live in exactly one trace: smaller JSON for the browser.
        masked_cd = np.where(~m, y_name + ": " + cd[:, :, 0] + "<br>" + x_name + ": "
                             + cd[:, :, 1], "").astype(object)  # (q, k)
        cd[~m] = ""
    xs = np.arange(k, dtype=np.int32)
    ys = np.arange(q, dtype=np.int32)
    value = go.Heatmap(
        z=shown, x=xs, y=ys, customdata=cd, hoverongaps=False, name=value_name,
        hovertemplate=(f"{y_name}: %{{customdata[0]}}<br>{x_name}: %{{customdata[1]}}"
                       f"<br>{value_name}: %{{z:{fmt}}}<extra></extra>"),
    )
    traces = [value]
    if m is not None and (~m).any():
        grey = np.where(m, np.nan, 1.0).astype(np.float32)
        traces.append(go.Heatmap(
            z=grey, x=xs, y=ys, customdata=masked_cd, name=MASK_TRACE_NAME, showscale=False,
            colorscale=[[0, MASK_COLOUR], [1, MASK_COLOUR]], zmin=0, zmax=1, hoverongaps=False,
            hovertemplate="%{customdata}<br>masked<extra></extra>",
        ))
        if (~m).sum() <= MAX_MASK_MARKERS and max(q, k) <= 30:
            yy, xx = np.nonzero(~m)
            traces.append(go.Scatter(
                x=xx.astype(np.int32), y=yy.astype(np.int32), mode="markers",
                name=MASK_TRACE_NAME + " (x)", showlegend=False, hoverinfo="skip",
                marker=dict(symbol="x-thin", size=9 if max(q, k) <= 15 else 6,
                            line=dict(width=1.5, color="#555555")),
            ))
    return traces


def heatmap(z: np.ndarray, x_tokens: Sequence[str] | None, y_tokens: Sequence[str] | None,
            x_title: str, y_title: str, mask: np.ndarray | None = None,
            zmin: float | None = 0.0, zmax: float | None = 1.0, colorscale=PROB_SCALE,
            title: str | None = None, value_name: str = "weight",
            x_name: str = "key", y_name: str = "query", fmt: str = ".3f",
            colorbar_title: str | None = None) -> go.Figure:
    """One heatmap of ``z`` (q, k): rows = y tokens top to bottom, columns = x tokens.

    ``mask`` (q, k) bool: True = may attend / visible, False = masked. Masked
    cells become NaN in the value trace and are covered by a grey trace named
    ``"masked"`` (z = 1 at masked cells, NaN elsewhere) plus "x" markers.
    ``x_tokens``/``y_tokens`` = None gives a plain numbered axis (e.g. dimensions).
    ``title`` and axis titles are plotly text: escape user text with
    :func:`escape_token` before putting it there.
    """
    z = np.asarray(z, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D (q, k) array, got shape {z.shape}")
    check_tokens(z, x_tokens, y_tokens)
    q, k = z.shape
    traces = _traces(z, mask, x_tokens, y_tokens, x_name, y_name, value_name, fmt)
    traces[0].update(zmin=zmin, zmax=zmax, colorscale=colorscale,
                     colorbar=dict(title=dict(text=colorbar_title or value_name),
                                   tickfont=dict(size=TICK_FONT)))
    if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
        traces[0].update(zmid=0)
    fig = go.Figure(traces)
    fig.update_xaxes(title=dict(text=x_title), showgrid=False, zeroline=False,
                     **axis_ticks(x_tokens, k, angle=-45 if x_tokens is not None else None))
    fig.update_yaxes(title=dict(text=y_title), showgrid=False, zeroline=False,
                     **axis_ticks(y_tokens, q, reverse=True))
    cell = 46 if q <= 12 else (32 if q <= 24 else 22)
    height = min(950, max(360, 150 + cell * q)) if y_tokens is not None else None
    return style(fig, title, height=height)


def facet_heatmaps(zs: np.ndarray, titles: Sequence[str], x_tokens, y_tokens,
                   x_title: str, y_title: str, mask: np.ndarray | None = None,
                   zmin: float | None = 0.0, zmax: float | None = 1.0,
                   colorscale=PROB_SCALE, title: str | None = None, value_name: str = "weight",
                   x_name: str = "key", y_name: str = "query", max_cols: int = 4,
                   fmt: str = ".3f", shared_scale: bool = True,
                   colorbar_title: str | None = None) -> go.Figure:
    """ONE figure with n heatmap panels of ``zs`` (n, q, k), up to ``max_cols`` per row.

    All panels share one colour axis (``layout.coloraxis``, one colourbar) with
    range ``zmin``..``zmax``; ``shared_scale=False`` gives every panel its own
    symmetric range instead (no colourbar). ``mask`` is (q, k), shared by all
    panels. Y tick labels are shown on the first column only.
    """
    zs = np.asarray(zs, dtype=np.float32)
    if zs.ndim != 3:
        raise ValueError(f"facet_heatmaps expects (n, q, k), got shape {zs.shape}")
    n, q, k = zs.shape
    if len(titles) != n:
        raise ValueError(f"got {len(titles)} titles for {n} panels")
    check_tokens(zs, x_tokens, y_tokens)
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    longest = max((len(str(t)) for t in (x_tokens or [])), default=2)
    # Pixels: panel body, rotated x tick labels below it, subplot title above.
    panel = min(420, max(200, 16 * q + 60))
    label_px = 75 + 7 * min(longest, 14) if x_tokens is not None else 50
    height = rows * (panel + label_px) + 100
    v_space = min(0.9 / max(rows - 1, 1), label_px / height) if rows > 1 else 0.0
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles),
                        horizontal_spacing=0.04 if y_tokens is None else 0.05,
                        vertical_spacing=v_space)
    for i in range(n):
        r, c = i // cols + 1, i % cols + 1
        for j, tr in enumerate(_traces(zs[i], mask, x_tokens, y_tokens, x_name, y_name,
                                       value_name, fmt)):
            if j == 0:
                if shared_scale:
                    tr.update(coloraxis="coloraxis", zmin=zmin, zmax=zmax)
                else:
                    lim = float(np.nanmax(np.abs(zs[i]))) or 1.0
                    tr.update(zmin=-lim, zmax=lim, colorscale=colorscale, showscale=False)
            fig.add_trace(tr, row=r, col=c)
        fig.update_xaxes(showgrid=False, zeroline=False, row=r, col=c,
                         **axis_ticks(x_tokens, k, angle=-60 if x_tokens is not None else None))
        y_ticks = axis_ticks(y_tokens, q, reverse=True)
        if c > 1 and y_tokens is not None:
            y_ticks["showticklabels"] = False
        fig.update_yaxes(showgrid=False, zeroline=False, row=r, col=c, **y_ticks)
        if r == rows or i + cols >= n:
            fig.update_xaxes(title=dict(text=x_title), row=r, col=c)
        if c == 1:
            fig.update_yaxes(title=dict(text=y_title), row=r, col=c)
    if shared_scale:
        fig.update_layout(coloraxis=dict(
            colorscale=colorscale, cmin=zmin, cmax=zmax,
            colorbar=dict(title=dict(text=colorbar_title or value_name),
                          tickfont=dict(size=TICK_FONT))))
        if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
            fig.update_layout(coloraxis_cmid=0)
    fig.update_annotations(font_size=16)
    return style(fig, title, height=height)
