"""Several built figures side by side as ONE figure: one chart for a row of panels instead of one chart each.

A page's first visit costs the browser a fixed amount per chart (Streamlit's element, Plotly's setup of a plot,
its own layout pass), so a row of panels drawn as one figure is drawn in about half the time of the same panels
as separate charts (`python benchmarks/bench_pages.py --profile`). :func:`panel_row` keeps every panel exactly
as its own builder made it: the same traces (values, hover text, colour range and colour bar), the same axes and
tick labels, the same notes and lines; only the axes get new names and each panel a share of the width. Its title
becomes a note centred above it, as in a grid of facets (:func:`viz.heatmap.grid_figure`). With ``one_scale`` the
panels' colour ranges become one and only the last panel keeps its colour bar: fewer bars to draw, and a colour
that means the same number across the row.
"""

from __future__ import annotations

import copy
import html
import math
import re
from collections.abc import Sequence

import plotly.graph_objects as go

from viz import plotly_internals
from viz.layout import PAGE_WIDTH_PX, TITLE_LINE_PX, TITLE_PAD_PX, enforce_min_font, figure, title_wrap_chars
from viz.rows import MIN_ROW_PX, windowed_title
from viz.text import title_lines, wrap_title
from viz.theme import figure_width, fit_height, theme
from viz.token_axes import axis_ticks, label_px

# A vertical colour bar beside a panel takes its padding and thickness plus its tick labels (measured in Chromium:
# 66-74 px for the bars of the head and mask figures at 14 px ticks, 4 px right of the plot); the next panel starts
# after it. Per tick font pixel, room for about three characters of a label such as "−40" or "0.8".
COLORBAR_BASE_PX, COLORBAR_PER_TICK_PX = 46, 3
GAP_PX = 24  # between two panels whose y axis shows no labels
RIGHT_PX = 20  # the figure's right margin after the last panel's colour bar
_AXIS = re.compile(r"^([xy])(\d*)( domain)?$")


def panel_row(figs: Sequence[go.Figure], shares: Sequence[float] | None = None, *,
              width_px: int = PAGE_WIDTH_PX, one_scale: bool = False) -> go.Figure:
    """ONE figure with ``figs`` (built by viz/, each with its own axes) side by side, left to right.

    ``shares``: each panel's part of the width (equal by default), for a figure ``width_px`` wide (the width the
    page gives it: gaps for tick labels and colour bars are that many pixels). A panel keeps its own height of
    plot (rows stay as tall as in its own figure, top-aligned). A panel whose rows are the previous panel's rows
    (the same y labels) shows no y tick labels and no y title: the panel on its left names them.
    ``one_scale``: the panels' colour scales become one (from the lowest bottom to the highest top of their
    colour ranges), shown by one colour bar, the last panel's: a colour is the same number in every panel.
    """
    if not figs:
        raise ValueError("panel_row needs at least one figure")
    if theme().max_cols == 1:  # a phone: one panel to a row
        return panel_column(figs, one_scale=one_scale)
    n = len(figs)
    width_px = figure_width(width_px)  # presenter mode's page is wider than a laptop's (viz.theme.width_scale)
    shares = [1 / n] * n if shares is None else [float(s) for s in shares]
    if len(shares) != n:
        raise ValueError(f"got {len(shares)} shares for {n} figures")
    total = sum(shares)
    layouts = [plotly_internals.layout(f) for f in figs]
    own_rows = [i == 0 or _rows(figs[i]) != _rows(figs[i - 1]) for i in range(n)]
    bar = COLORBAR_BASE_PX + COLORBAR_PER_TICK_PX * max(theme().tick, theme().min_font)
    # Room for each panel's own colour bar, also where one_scale hides it: the panels' titles are wrapped for
    # their own figures' widths and would run into each other on a narrow screen (1280 px) without it.
    bars = [bar if _has_colorbar(f) else 0 for f in figs]
    lefts = [lay["margin"]["l"] if own_rows[i] else GAP_PX for i, lay in enumerate(layouts)]
    # Each panel's key labels for the width its plot gets here, then the same keys labelled in panels that share them
    room = width_px - sum(lefts) - sum(bars) - RIGHT_PX
    layouts = _same_key_labels(figs, [_rethinned(lay, fig, share / total * room)
                                      for lay, fig, share in zip(layouts, figs, shares)])
    tops = [lay["margin"]["t"] for lay in layouts]
    bottoms = [lay["margin"]["b"] for lay in layouts]
    # each panel's plot height (450 px: plotly's own figure height, for a figure that sets none)
    plots = [(lay.get("height") or 450) - t - b for lay, t, b in zip(layouts, tops, bottoms)]
    start = 0  # panels that share their rows show them at one height, so that the rows line up
    for i in range(1, n + 1):
        if i == n or own_rows[i]:
            plots[start:i] = [max(plots[start:i])] * (i - start)
            start = i
    left, right = lefts[0], bars[-1] + RIGHT_PX
    plot_w = width_px - left - right
    # What is not plot (the labels of a panel that names its rows, a colour bar) comes off first; the panels'
    # plots share the rest by their shares.
    inner = plot_w - sum(lefts[1:]) - sum(bars[:-1])
    top, bottom = max(tops), max(bottoms)
    # no taller than a presenter figure may be (each panel is; their largest margins together can be more)
    plot_h = fit_height(top + max(plots) + bottom) - top - bottom
    layouts = [_rewindowed(lay, figs[i], p / max(plots) * plot_h) for i, (lay, p) in enumerate(zip(layouts, plots))]
    data, layout, notes, shapes, titles = [], {}, [], [], []
    cursor, offset = 0.0, 0
    for i, fig in enumerate(figs):
        x0 = cursor + (lefts[i] if i else 0)
        x1 = x0 + shares[i] / total * inner
        cursor = x1 + bars[i]
        x_dom = [max(0.0, x0 / plot_w), min(1.0, x1 / plot_w)]
        y_dom = [max(0.0, 1.0 - plots[i] / max(plots)), 1.0]
        names = _axis_names(fig, offset)
        offset += _axis_count(fig)
        _place_axes(layouts[i], names, x_dom, y_dom, own_rows[i], layout)
        data += _place_traces(fig, names, x_dom, y_dom, 4 / plot_w, (y_dom[1] - y_dom[0]) * plot_h)
        shapes += [_place_ref(s, names, x_dom, y_dom) for s in layouts[i].get("shapes", ())]
        notes += [_place_ref(a, names, x_dom, y_dom) for a in layouts[i].get("annotations", ())]
        title = (layouts[i].get("title") or {}).get("text")
        if title:  # wrapped again for the panel's room in the row (its plot and its colour bar's place)
            titles.append((title, _rewrapped(title, round(x1 - x0 + bars[i])), tops[i], sum(x_dom) / 2, y_dom[1]))
    titles, top = _fitted_titles(titles, top, max(plots), bottom, plot_h)
    # Each title hangs from the figure's top as in its own figure, above any note at the top of its plot.
    notes += [dict(text=t, x=x, y=y, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                   yshift=top - TITLE_PAD_PX - title_lines(t, None) * TITLE_LINE_PX, showarrow=False,
                   font=dict(size=theme().title)) for t, x, y in titles]
    if one_scale:
        _one_scale(data)
    first = layouts[0]
    layout.update(margin=dict(first["margin"], l=left, r=right, t=top, b=bottom), height=top + plot_h + bottom,
                  font=first.get("font"), hoverlabel=first.get("hoverlabel"), showlegend=False,
                  annotations=notes or None, shapes=shapes or None,
                  dragmode=next((lay["dragmode"] for lay in layouts if lay.get("dragmode")), None))  # a row window
    return enforce_min_font(figure(data, {k: v for k, v in layout.items() if v is not None}))


def panel_column(figs: Sequence[go.Figure], *, one_scale: bool = False) -> go.Figure:
    """ONE figure with ``figs`` one above the other, each as its own figure drew it (its title, its plot's height,
    its labels and colour bar); the panels share the widest left and right margins. ``one_scale`` as in
    :func:`panel_row`: one colour range, one colour bar (beside the last panel)."""
    layouts = [plotly_internals.layout(f) for f in figs]
    heights = [lay.get("height") or 450 for lay in layouts]
    tops = [lay["margin"]["t"] for lay in layouts]
    bottoms = [lay["margin"]["b"] for lay in layouts]
    plot_h = sum(heights) - tops[0] - bottoms[-1]  # the paper's height: from the first plot's top to the last's bottom
    data, layout, notes, shapes = [], {}, [], []
    cursor, offset = -tops[0], 0  # the top of panel i's own figure, in px below the paper's top
    for i, fig in enumerate(figs):
        y_dom = [1 - (cursor + heights[i] - bottoms[i]) / plot_h, 1 - (cursor + tops[i]) / plot_h]
        cursor += heights[i]
        names = _axis_names(fig, offset)
        offset += _axis_count(fig)
        _place_axes(layouts[i], names, [0.0, 1.0], y_dom, True, layout)
        data += _place_traces(fig, names, [0.0, 1.0], y_dom, 0.02, (y_dom[1] - y_dom[0]) * plot_h)
        shapes += [_place_ref(s, names, [0.0, 1.0], y_dom) for s in layouts[i].get("shapes", ())]
        notes += [_place_ref(a, names, [0.0, 1.0], y_dom) for a in layouts[i].get("annotations", ())]
        title = (layouts[i].get("title") or {}).get("text")
        if title:  # where its own figure hung it: TITLE_PAD_PX below the panel's top
            notes.append(dict(text=title, x=0.5, y=y_dom[1], xref="paper", yref="paper", xanchor="center",
                              yanchor="top", yshift=tops[i] - TITLE_PAD_PX,
                              showarrow=False, font=dict(size=theme().title)))
    if one_scale:
        _one_scale(data)
    first = layouts[0]
    layout.update(margin=dict(first["margin"], l=max(lay["margin"]["l"] for lay in layouts),
                              r=max(lay["margin"]["r"] for lay in layouts), t=tops[0], b=bottoms[-1]),
                  height=sum(heights), font=first.get("font"), hoverlabel=first.get("hoverlabel"), showlegend=False,
                  annotations=notes or None, shapes=shapes or None)
    return enforce_min_font(figure(data, {k: v for k, v in layout.items() if v is not None}))


def _fitted_titles(titles: list, top: int, plot: int, bottom: int, plot_h: int) -> tuple[list, int]:
    """[(title, x, y)] and the figure's top margin: each title wrapped for its panel's room where the lines it adds
    fit above the plots (a figure not already as tall as it may be); else, where wrapping it again adds lines, as
    its own figure wrapped it (a shorter plot would squeeze the rows' labels, which were thinned for its height)."""
    grown = max([top] + [t + (title_lines(new, None) - title_lines(own, None)) * TITLE_LINE_PX
                         for own, new, t, _, _ in titles])
    if fit_height(grown + plot + bottom) - grown - bottom >= plot_h:
        return [(new, x, y) for _, new, _, x, y in titles], grown
    return [(new if title_lines(new, None) <= title_lines(own, None) else own, x, y)
            for own, new, _, x, y in titles], top


def _rewrapped(title: str, room_px: int) -> str:
    """``title`` wrapped for ``room_px``: the lines its own figure's width broke it into are joined again first (a
    line that starts with a tag, such as a ``<sup>`` subtitle, keeps its own line)."""
    text = re.sub(r"<br>(?!<)", " ", title)
    return wrap_title(text, title_wrap_chars(text, room_px))


_CELL = re.compile(r"^(.*) \((\d+)\)$", re.S)  # a token's cell on a heatmap's axis: "token (position)", escaped


def _rethinned(layout: dict, fig: go.Figure, plot_px: float) -> dict:
    """A panel whose key labels were thinned for a figure of its own (its margins and colour bar taken off its
    width) labelled again for the ``plot_px`` its plot gets in the row, where that shows more of them; its bottom
    margin, and its height, grow by what the new labels need more."""
    axis = layout.get("xaxis") or {}
    cols = (plotly_internals.traces(fig) or [{}])[0].get("x")
    if axis.get("tickvals") is None or axis.get("ticktext") is None or cols is None:
        return layout
    cells = [_CELL.match(str(c)) for c in cols]
    if not all(cells) or [int(m[2]) for m in cells] != list(range(len(cells))):
        return layout  # not a token axis (dimensions, positions)
    tokens = [html.unescape(m[1]) for m in cells]  # as viz.token_axes.cell_names escaped them
    ticks = axis_ticks(tokens, len(tokens), angle=-45, axis_px=plot_px)
    if len(ticks["tickvals"]) <= len(axis["tickvals"]):
        return layout
    old = [tokens[i] for i in axis["tickvals"]]
    grow = max(0, label_px([tokens[i] for i in ticks["tickvals"]], ticks.get("tickangle", -45))
               - label_px(old, axis.get("tickangle", -45)))
    new_axis = dict(axis, **{k: ticks[k] for k in ("tickvals", "ticktext", "tickfont", "tickangle") if k in ticks})
    return dict(layout, xaxis=new_axis, margin=dict(layout["margin"], b=layout["margin"]["b"] + grow),
                height=(layout.get("height") or 450) + grow)


def _same_key_labels(figs: Sequence[go.Figure], layouts: list[dict]) -> list[dict]:
    """Panels whose columns are the same tokens label the same ones: those of the panel that labels fewest (each
    thinned its labels for its own width), at the smallest of their label sizes."""
    groups: dict[tuple, list[int]] = {}
    for i, fig in enumerate(figs):
        axis = layouts[i].get("xaxis") or {}
        cols = (plotly_internals.traces(fig) or [{}])[0].get("x")
        if cols is not None and axis.get("tickvals") is not None:
            groups.setdefault(tuple(str(v) for v in cols), []).append(i)
    out = list(layouts)
    for members in (m for m in groups.values() if len(m) > 1):
        fewest = min(members, key=lambda i: len(layouts[i]["xaxis"]["tickvals"]))
        chosen = layouts[fewest]["xaxis"]
        size = min(((layouts[i]["xaxis"].get("tickfont") or {}).get("size") or theme().tick) for i in members)
        for i in members:
            out[i] = dict(layouts[i], xaxis=dict(layouts[i]["xaxis"], tickvals=chosen["tickvals"],
                                                 ticktext=chosen.get("ticktext"), tickangle=chosen.get("tickangle"),
                                                 tickfont=dict(layouts[i]["xaxis"].get("tickfont") or {}, size=size)))
    return out


def _rows(fig: go.Figure):
    """The y categories of a figure's first trace (its rows), to tell whether two panels share their rows."""
    y = (plotly_internals.traces(fig) or [{}])[0].get("y")
    return None if y is None else tuple(str(v) for v in y)


def _has_colorbar(fig: go.Figure) -> bool:
    return any(_scaled_trace(t) for t in plotly_internals.traces(fig))


def _scaled_trace(trace) -> bool:
    return trace.get("colorbar") is not None and trace.get("showscale", True) is not False


def _one_scale(data: list) -> None:
    """The colour traces of a row (each panel's, with a colour bar) on one range; only the last shows its bar (its
    own tick labels dropped if the range grew: they were written for its own range)."""
    scaled = [t for t in data if _scaled_trace(t)]
    if not scaled:
        return
    lo, hi = min(t["zmin"] for t in scaled), max(t["zmax"] for t in scaled)
    last = scaled[-1]
    if (last["zmin"], last["zmax"]) != (lo, hi):
        last["colorbar"] = {k: v for k, v in last["colorbar"].items() if k not in ("tickmode", "tickvals", "ticktext")}
    for t in scaled:
        t.update(zmin=lo, zmax=hi)
        t.pop("zmid", None)
    for t in scaled[:-1]:
        t["showscale"] = False


def _axis_names(fig: go.Figure, offset: int) -> dict[str, str]:
    """The panel's axis references ("x", "x2", "y") -> their names in the row, numbered after ``offset``."""
    names = {}
    for key in plotly_internals.layout(fig):
        m = re.fullmatch(r"([xy])axis(\d*)", key)
        if m:
            names[m[1] + m[2]] = _ref(m[1], offset + int(m[2] or 1))
    for letter in "xy":
        names.setdefault(letter, _ref(letter, offset + 1))
    return names


def _ref(letter: str, number: int) -> str:
    return letter if number == 1 else f"{letter}{number}"


def _axis_count(fig: go.Figure) -> int:
    return max([1] + [int(k[5:] or 1) for k in plotly_internals.layout(fig) if re.fullmatch(r"[xy]axis\d*", k)])


def _scaled(domain, into: list[float]) -> list[float]:
    d0, d1 = domain or (0.0, 1.0)
    return [into[0] + d0 * (into[1] - into[0]), into[0] + d1 * (into[1] - into[0])]


def _place_axes(layout: dict, names: dict, x_dom: list[float], y_dom: list[float], own_rows: bool, out: dict) -> None:
    for ref, new in names.items():
        axis = copy.deepcopy(layout.get(ref[0] + "axis" + ref[1:], {}))
        axis["domain"] = _scaled(axis.get("domain"), x_dom if ref[0] == "x" else y_dom)
        anchor = axis.get("anchor", "y" if ref[0] == "x" else "x")
        axis["anchor"] = names.get(anchor, anchor)  # "free" stays free
        if ref[0] == "y" and not own_rows:
            axis["showticklabels"] = False
            axis.pop("title", None)
        out[new[0] + "axis" + new[1:]] = axis


def _rewindowed(layout: dict, fig: go.Figure, rows_px: float) -> dict:
    """A panel as the row's plot height leaves it (the row can be shorter than the panel's own figure): in presenter
    mode its rows keep MIN_ROW_PX, as a window where they no longer all fit (viz.rows; the title says so), and its
    row labels are thinned again to stay a label's height apart."""
    y_axis = layout.get("yaxis") or {}
    rows = _rows(fig)
    vals = list(y_axis.get("tickvals") or ())
    if not rows or y_axis.get("type") != "category" or not vals or not theme().height_px:
        return layout
    n = len(rows)
    windowed = y_axis.get("autorange") is False and y_axis.get("fixedrange") is False
    shown = int(round(y_axis["range"][0] + 0.5)) if windowed else n
    fits = min(shown, max(1, int(rows_px // MIN_ROW_PX)))
    step = vals[1] - vals[0] if len(vals) > 1 else 1
    every = math.ceil(math.ceil(theme().min_tick_px / (rows_px / fits)) / step)  # keep every `every`-th label
    if fits == shown and every <= 1:
        return layout
    out = copy.deepcopy(layout)
    y_out = out["yaxis"]
    if every > 1:
        y_out["tickvals"] = vals[::every]
        y_out["ticktext"] = list(y_axis.get("ticktext") or vals)[::every]
    if fits < shown:
        y_out.update(range=[fits - 0.5, -0.5], autorange=False, fixedrange=False)
        out.setdefault("xaxis", {})["fixedrange"] = True
        out["dragmode"] = "pan"
        title = (out.get("title") or {}).get("text")
        if title:
            out["title"]["text"] = (re.sub(r"rows 1–\d+ of", f"rows 1–{fits} of", title) if windowed
                                    else windowed_title(title, fits, n))
    return out


def _place_traces(fig: go.Figure, names: dict, x_dom: list[float], y_dom: list[float], pad: float,
                  plot_px: float) -> list[dict]:
    out = []
    for trace in plotly_internals.traces(fig):
        t = copy.copy(trace)
        t["xaxis"], t["yaxis"] = names[t.get("xaxis") or "x"], names[t.get("yaxis") or "y"]
        if t.get("colorbar") is not None:  # beside its panel, as tall as the panel's plot
            t["colorbar"] = dict(t["colorbar"], x=x_dom[1] + pad, xanchor="left", xref="paper",
                                 len=y_dom[1] - y_dom[0], lenmode="fraction", y=y_dom[1], yanchor="top")
            if "tickvals" not in t["colorbar"]:  # a short bar: no more tick labels than fit apart
                t["colorbar"]["nticks"] = max(2, int(plot_px // (2.5 * theme().tick)))
        out.append(t)
    return out


def _place_ref(item: dict, names: dict, x_dom: list[float], y_dom: list[float]) -> dict:
    """A shape or note of a panel with its references renamed; where it is placed on the paper, on the panel's."""
    item = copy.deepcopy(item)
    for letter, dom in (("x", x_dom), ("y", y_dom)):
        ref = item.get(letter + "ref", "paper")
        if ref == "paper":
            for key in (letter, letter + "0", letter + "1"):
                if isinstance(item.get(key), (int, float)):
                    item[key] = dom[0] + item[key] * (dom[1] - dom[0])
            continue
        m = _AXIS.match(ref)
        if m:
            item[letter + "ref"] = names.get(m[1] + m[2], m[1] + m[2]) + (m[3] or "")
    return item
