"""Heatmap builders every view shares: one heatmap, a grid of facet panels, and the grid figure under both.

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

import math
import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.layout import figure, styled_figure, title_wrap_chars, top_margin
from viz.rows import (
    label_room,
    pan_layout,
    row_window,
    rows_as_drawn,
    short_labels_on_long_axes,
    tick_px,
    window_axis,
    windowed_title,
)
from viz.scales import PROB_SCALE, SIGNED_SCALE, resolve_scale
from viz.text import PROB_D3, title_lines
from viz.theme import theme
from viz.token_axes import (
    FACET_ROW_PX,
    MAX_PANEL_PX,
    MIN_PANEL_PX,
    axis_ticks,
    cell_names,
    heatmap_height,
    label_px,
    panels_that_fit,
    plot_rows_px,
    plot_width_px,
    token_axis,
)

MASK_COLOUR = "#b0b0b0"
MASK_TRACE_NAME = "masked"
# Above this many masked cells (or 30 tokens a side) the "x" markers would be a
# grey smear; the grey fill alone then carries the message.
MAX_MASK_MARKERS = 900


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


def heatmap_traces(z, mask, row_tokens, col_tokens, row_name, col_name, value_name, fmt, as_shown=False):
    """Value heatmap trace plus optional mask overlay traces for one panel.

    A token axis is a category axis (:func:`token_axis`) whose categories are the hover labels ``"tok (pos)"``:
    unique, so repeated tokens never merge, and hover reads them (``%{x}``, ``%{y}``) with no label per cell.
    Chromium drew a 30-token heatmap 2–2.5× faster than with two labels per cell as customdata, and its
    JSON is half the size. A numbered axis (no tokens) stays numeric; its hover says ``"dim 17"`` as before.
    ``as_shown``: the values go to the browser as the hover shows them (:func:`as_shown_values`).
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
    if as_shown:
        shown = as_shown_values(shown, fmt)
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
        crosses = mask_crosses(m, xs, ys)
        if crosses is not None:
            traces.append(crosses)
    return traces


def mask_crosses(m: np.ndarray, xs, ys) -> dict | None:
    """An "x" on every masked cell of ``m`` (i, j) (False = masked), so that grey is not the only sign of a masked
    cell; None when there are too many cells to mark (see MAX_MASK_MARKERS) or none."""
    n_rows, n_cols = m.shape
    if not (~m).any() or (~m).sum() > MAX_MASK_MARKERS or max(n_rows, n_cols) > 30:
        return None
    yy, xx = np.nonzero(~m)
    return dict(type="scatter", x=_at(xs, xx), y=_at(ys, yy), mode="markers",
                name=MASK_TRACE_NAME + " (x)", showlegend=False, hoverinfo="skip",
                marker=dict(symbol="x-thin", size=9 if max(n_rows, n_cols) <= 15 else 6,
                            line=dict(width=1.5, color="#555555")))


def _cells(tokens, n: int, word: str, var: str) -> tuple[list[str] | np.ndarray, str]:
    """The coordinates of ``n`` cells along an axis and how hover names one: the labels ``"tok (pos)"`` of a
    token axis (its categories), or positions 0..n-1 on a numbered axis (``"query 3"``)."""
    if tokens is None:
        return np.arange(n, dtype=np.int32), f"{word} %{{{var}}}"
    return cell_names(tokens), f"%{{{var}}}"


def _at(coords, idx: np.ndarray):
    """The coordinates ``coords[idx]``: category names on a token axis (a number there would be a new category)."""
    return [coords[i] for i in idx] if isinstance(coords, list) else idx.astype(np.int32)


def as_shown_values(z: np.ndarray, fmt: str) -> np.ndarray:
    """``z`` rounded to the decimals of its hover format ``fmt`` (".3f"), as float64: the browser gets "0.841" where
    float32 text is "0.841470957", half the JSON, and the hover shows the very same number. For figures a reader
    reads through the hover and the colour only (a change under half a unit of the last decimal is no colour a
    screen shows); a figure whose numbers are compared elsewhere keeps every digit. Another format: ``z`` as is."""
    digits = re.fullmatch(r"\.(\d)f", fmt)
    return np.round(z.astype(np.float64), int(digits.group(1))) if digits else z


@short_labels_on_long_axes("col_tokens")
def heatmap(z: np.ndarray, row_tokens: Sequence[str] | None, col_tokens: Sequence[str] | None,
            *, row_title: str, col_title: str, mask: np.ndarray | None = None,
            zmin: float | None = 0.0, zmax: float | None = 1.0, colorscale=PROB_SCALE,
            title: str | None = None, value_name: str = "weight",
            row_name: str = "query", col_name: str = "key", fmt: str = PROB_D3,
            colorbar_title: str | None = None, colorbar: dict | None = None,
            width_px: int | None = None, as_shown: bool = False, keep_rows: Sequence[int] = (),
            keep_cols: Sequence[int] = ()) -> go.Figure:
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
    titles are plotly text: escape user text with :func:`escape_token`. ``keep_rows``/``keep_cols``: rows and
    columns whose labels are never thinned away (highlighted cells; :func:`viz.token_axes.kept_ticks`).
    """
    z = np.asarray(z, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D (i, j) array, got shape {z.shape}")
    check_tokens(z, row_tokens, col_tokens)
    n_rows, n_cols = z.shape
    traces = heatmap_traces(z, mask, row_tokens, col_tokens, row_name, col_name, value_name, fmt, as_shown)
    traces[0].update(zmin=zmin, zmax=zmax, colorscale=resolve_scale(colorscale),
                     colorbar=dict(title=dict(text=colorbar_title or value_name),
                                   tickfont=dict(size=theme().tick), **(colorbar or {})))
    if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
        traces[0].update(zmid=0)
    x_ticks = axis_ticks(col_tokens, n_cols, angle=-45 if col_tokens is not None else None,
                         axis_px=plot_width_px(width_px, row_tokens), keep=keep_cols)
    angle = x_ticks.get("tickangle", -45)
    title, wrap, height, rows_px, shown = sized(title, width_px, n_rows, row_tokens, col_tokens, angle)
    y_axis = dict(title=dict(text=row_title), showgrid=False, zeroline=False,
                  **axis_ticks(row_tokens, n_rows, reverse=True, keep=keep_rows,
                               axis_px=tick_px(rows_px, n_rows, shown) if rows_px else None),
                  **token_axis(row_tokens))
    layout = dict(xaxis=dict(title=dict(text=col_title), showgrid=False, zeroline=False, **x_ticks,
                             **token_axis(col_tokens), **({"fixedrange": True} if shown else {})),
                  yaxis=window_axis(y_axis, shown), **pan_layout(shown))
    fig = styled_figure(traces, layout, title, height=height, wrap_chars=wrap,
                        margin=label_room(height, rows_px, title, wrap))
    return rows_as_drawn(fig, n_rows, 1, 0.0) if theme().height_px and row_tokens is not None else fig


def sized(title: str | None, width_px: int | None, n_rows: int, row_tokens, col_tokens, angle: int):
    """(title, its wrap, height, the rows' pixels, rows shown at once or None) of a one-panel heatmap or mask: in
    presenter mode, rows that would be squeezed below a readable height are a window (viz.rows), said in the title."""
    def size(text):
        wrap = title_wrap_chars(text, width_px)
        height = heatmap_height(n_rows, col_tokens, title_lines(text, wrap), angle) if row_tokens is not None else None
        return wrap, height, (plot_rows_px(height, col_tokens, title_lines(text, wrap), angle) if height else None)

    wrap, height, rows_px = size(title)
    shown = row_window(n_rows, rows_px) if row_tokens is not None else None
    if shown is None:
        return title, wrap, height, rows_px, None
    # the title says which rows show, and may take a line more: the rows' room is measured again
    wrap, height, rows_px = size(windowed_title(title, shown, n_rows))
    shown = row_window(n_rows, rows_px) or n_rows
    return windowed_title(title, shown, n_rows), wrap, height, rows_px, shown


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


def _screen_panels(title, wrap, width_px, rows: int, labels: int, n_rows: int, row_tokens):
    """A presenter facet's rows of panels in the screen's height below the titles: (title, wrap, panel px, the rows
    shown or None for all, height); rows too short to read are a window of them (viz.rows), said in the title."""
    above = top_margin(title_lines(title, wrap)) + 40
    panel = max(MIN_PANEL_PX // 4, (theme().height_px - above) // rows - labels)
    shown = row_window(n_rows, panel) if row_tokens is not None else None
    if shown is not None:
        title = windowed_title(title, shown, n_rows)
        wrap = title_wrap_chars(title, width_px)
        above = top_margin(title_lines(title, wrap)) + 40
        panel = max(MIN_PANEL_PX // 4, (theme().height_px - above) // rows - labels)
        shown = row_window(n_rows, panel) or n_rows
    return title, wrap, panel, shown, rows * (panel + labels) + above


@short_labels_on_long_axes("col_tokens")
def facet_heatmaps(zs: np.ndarray, titles: Sequence[str], row_tokens, col_tokens, *,
                   row_title: str, col_title: str, mask: np.ndarray | None = None,
                   zmin: float | None = 0.0, zmax: float | None = 1.0,
                   colorscale=PROB_SCALE, title: str | None = None, value_name: str = "weight",
                   row_name: str = "query", col_name: str = "key", max_cols: int = 4,
                   fmt: str = PROB_D3, shared_scale: bool = True,
                   colorbar_title: str | None = None, colorbar: dict | None = None,
                   width_px: int | None = None, as_shown: bool = False) -> go.Figure:
    """ONE figure with h heatmap panels of ``zs`` (h, i, j), up to ``max_cols`` per row (on a laptop fewer, down to
    two, where that labels every key; on a phone one).

    All panels share one colour axis (``layout.coloraxis``, one colourbar) with range ``zmin``..``zmax``;
    ``shared_scale=False`` gives every panel its own symmetric range instead (no colourbar). ``mask`` is (i, j),
    shared by all panels. Y tick labels are shown on the first column only. A panel is FACET_ROW_PX per row
    (clamped), and labels are thinned as in :func:`heatmap`. Everything after the token lists is keyword-only."""
    zs = np.asarray(zs, dtype=np.float32)
    if zs.ndim != 3:
        raise ValueError(f"facet_heatmaps expects (h, i, j), got shape {zs.shape}")
    n, n_rows, n_cols = zs.shape
    if len(titles) != n:
        raise ValueError(f"got {len(titles)} titles for {n} panels")
    check_tokens(zs, row_tokens, col_tokens)
    cols = min(theme().max_cols or max_cols, n)
    if col_tokens is not None and not theme().height_px and cols > 2:
        cols = max(2, panels_that_fit(cols, col_tokens, row_tokens, width_px))
    rows = math.ceil(n / cols)
    # Pixels: panel body, rotated x tick labels below it, subplot title above.
    panel = min(MAX_PANEL_PX, max(MIN_PANEL_PX, FACET_ROW_PX * n_rows))
    panel_w = plot_width_px(width_px, row_tokens, colorbar=shared_scale, cols=cols)
    x_ticks = axis_ticks(col_tokens, n_cols, angle=-60 if col_tokens is not None else None,
                         axis_px=panel_w)
    wrap = title_wrap_chars(title, width_px)
    shown = None if col_tokens is None else [col_tokens[j] for j in x_ticks["tickvals"]]  # thinned labels
    labels = label_px(shown, angle=x_ticks.get("tickangle", -60)) + 20
    height, shown = rows * (panel + labels) + 100, None
    if theme().height_px:  # presenter: the panels share the screen's height below the titles
        title, wrap, panel, shown, height = _screen_panels(title, wrap, width_px, rows, labels, n_rows, row_tokens)
    v_space = min(0.9 / max(rows - 1, 1), labels / height) if rows > 1 else 0.0
    data, axes = [], {}
    y_ticks = axis_ticks(row_tokens, n_rows, reverse=True, axis_px=tick_px(panel, n_rows, shown))
    for p in range(n):
        r, c = p // cols + 1, p % cols + 1
        x_ref, y_ref = cell_axes(p)
        for t, tr in enumerate(heatmap_traces(zs[p], mask, row_tokens, col_tokens, row_name, col_name,
                                              value_name, fmt, as_shown)):
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
        if shown is not None:  # every panel shows the same rows and pans with the first
            x_set["fixedrange"] = True
            y_set = window_axis(y_set, shown, **({"matches": "y"} if p else {}))
        if c > 1 and row_tokens is not None:
            y_set["showticklabels"] = False
        if r == rows or p + cols >= n:
            x_set["title"] = dict(text=col_title)
        if c == 1:
            y_set["title"] = dict(text=row_title)
        axes[p] = (x_set, y_set)
    layout = pan_layout(shown)
    if shared_scale:
        layout["coloraxis"] = dict(
            colorscale=resolve_scale(colorscale), cmin=zmin, cmax=zmax,
            colorbar=dict(title=dict(text=colorbar_title or value_name),
                          tickfont=dict(size=theme().tick), **(colorbar or {})))
        if colorscale == SIGNED_SCALE and zmin is None and zmax is None:
            layout["coloraxis"]["cmid"] = 0
    fig = grid_figure(data, axes, rows, cols, 0.04 if row_tokens is None else 0.05, v_space,
                       cell_titles=list(titles), title_font=max(16, theme().base),
                       # presenter: the key labels' room below the last row is known (a figure cut to the screen
                       # is too short for plotly's estimate to widen the margin)
                       style=dict(title=title, height=height, subplot_titles=True, wrap_chars=wrap,
                                  margin=dict(b=labels) if theme().height_px else None), **layout)
    return rows_as_drawn(fig, n_rows, rows, v_space) if theme().height_px and row_tokens is not None else fig
