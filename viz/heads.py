"""The Heads page's figures: a report card of every head over a corpus (model/analysis/analyze.py's report).

Everything here takes plain NumPy arrays, lists and strings read from the report; nothing is recomputed.
Layers and heads are 0-based in the arrays and shown 1-based, as everywhere in the app.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz.decoding import bar_marker
from viz.heatmap import cell_axes, grid_figure
from viz.kinds import KIND_NAMES
from viz.layout import PAGE_WIDTH_PX, style, text_px
from viz.scales import PROB_SCALE, effect_legend, effect_scale, effect_words, line_dash, resolve_scale
from viz.theme import figure_width, theme

KIND_ORDER = tuple(KIND_NAMES)  # viz knows no model: its one list of the kinds is KIND_NAMES
# Short forms of the report's role labels, written in the grid's cells (the hover gives the full label).
ROLE_SHORT = {"positional -1": "pos −1", "positional 0": "pos 0", "positional +1": "pos +1",
              "previous-token": "prev", "next-token": "next", "aligner": "align", "rare-word": "rare",
              "sink": "sink", "diffuse": "diffuse", "mixed": "·"}
# The chosen head's outline: near-black with a white line inside it, legible on pale and on saturated cells alike,
# and never red, which on these grids means worse for the translation.
CHOSEN_LINE, CHOSEN_INNER = "#111827", "#ffffff"


def chosen_outline(x_ref: str, y_ref: str, x: float, y: float) -> list[dict]:
    """The two rectangles that outline cell (x, y) of a grid's axes as the chosen one."""
    cell = dict(type="rect", xref=x_ref, yref=y_ref, x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5)
    return [dict(cell, line=dict(color=CHOSEN_LINE, width=4)), dict(cell, line=dict(color=CHOSEN_INNER, width=1.5))]
LINE_COLOURS = {"enc_self": "#1f77b4", "dec_self": "#2ca02c", "cross": "#ff7f0e", "all": "#333333"}
GROUP_NAMES = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention", "cross": "cross-attention",
               "all": "all heads together"}
# measure -> (label, d3/format spec, an effect on the translation: drawn on the effect scale, higher = worse). The
# order is the select box's: the measured effect of switching a head off first, the page's default.
MEASURES = {
    "ablation_loss_increase": ("loss increase when switched off (nats/token)", ".4f", True),
    "importance": ("importance (normalised)", ".3f", False),
    "confidence": ("confidence", ".3f", False),
    "entropy_fraction": ("entropy / uniform entropy", ".3f", False),
    "entropy": ("entropy (nats)", ".3f", False),
    "mean_distance": ("mean distance (tokens)", ".2f", False),
    "prev_share": ("weight on the previous token", ".3f", False),
    "same_share": ("weight on the token itself", ".3f", False),
    "next_share": ("weight on the next token", ".3f", False),
    "best_offset_share": ("share of argmax at its best offset", ".3f", False),
    "sink_share": ("sink share", ".3f", False),
    "eos_share": ("weight on <eos>", ".3f", False),
    "punct_share": ("weight on the final punctuation", ".3f", False),
    "bos_share": ("weight on <bos>", ".3f", False),
    "rare_share": ("argmax on the rarest word", ".3f", False),
    "aer": ("AER on the annotated pairs (%, lower aligns)", ".1f", False),
    "aer_value_norm": ("AER from value norms (%, lower aligns)", ".1f", False),
    "agreement": ("agreement with the best layer", ".3f", False),
    "monotonicity": ("monotonicity (Spearman)", ".3f", False),
    "forward_share": ("argmax never moving back", ".3f", False),
    "importance_raw": ("importance (raw gradient)", ".4f", False),
}

# The orders a pruning curve switches heads off in: key -> (the order in words, which heads go first); the
# measured one first, the page's default.
PRUNING_ORDERS = {"loss_increase": ("by measured loss increase", "smallest loss increase when switched off first"),
                  "importance": ("by importance", "least important first")}

# One way to name a head across the app: in words in running text, short where space is tight (lists, figure
# titles, the ablation chooser), and kind-layer-head only in URLs.
SHORT_KINDS = {"enc_self": "encoder self", "dec_self": "decoder self", "cross": "cross"}


def head_name(kind: str, layer: int, head: int) -> str:
    """A head in words, 0-based in, 1-based out: 'cross-attention layer 2, head 3'."""
    return f"{GROUP_NAMES[kind]} layer {layer + 1}, head {head + 1}"


def head_short(kind: str, layer: int, head: int) -> str:
    """The same head where space is tight: 'cross L2 H3'."""
    return f"{SHORT_KINDS[kind]} L{layer + 1} H{head + 1}"


def short_role(labels: Sequence[str]) -> str:
    """The main (first) role label in its short form; '·' for 'mixed' (no role applies)."""
    if not labels:
        return "·"
    return ROLE_SHORT.get(labels[0], labels[0])


def grid_layout(n_kinds: int, n_heads: int) -> tuple[int, int]:
    """(rows, cols) of the kinds' panels: side by side while a row stays readable (never on a phone), else one above
    the other."""
    return (1, n_kinds) if n_kinds * n_heads <= 16 and theme().max_cols != 1 else (n_kinds, 1)


# A phone's panels one above the other: between two, the upper one's "head" and the lower one's title (px).
PHONE_GAP_PX = 40


def stacked_gap(rows: int) -> float:
    """The vertical gap between rows of layer × head panels, as a share of the plots' height."""
    return 0.0 if rows == 1 else 0.2 if theme().figure_px else 0.12


def texts_fit_cells(texts, n_heads: int, cols: int, size: float) -> bool:
    """Whether the widest of ``texts`` at ``size`` px fits a cell of a layer × head panel (``n_heads`` cells wide,
    ``cols`` panels to a row of the page's width; its margins, row labels and colour bar off). A laptop's page has
    room for the grids' numbers; a phone's may not, and there the hover still gives them."""
    if not theme().figure_px:
        return True
    cell = (figure_width(PAGE_WIDTH_PX) - 110) / cols / max(1, n_heads)
    return max((text_px(t, size) for t in texts), default=0) + 4 <= cell


def head_grid_figure(values: Mapping[str, np.ndarray | None], roles: Mapping[str, Sequence], measure_label: str, *,
                     zmin: float | None = None, zmax: float | None = None, signed: bool = False, fmt: str = ".3f",
                     chosen: tuple[str, int, int] | None = None, title: str | None = None) -> go.Figure:
    """One layer × head panel per attention kind, coloured by one measure, the role written in each cell.

    ``values[kind]``: (L, h) floats (NaN where the measure has no value) or None when the measure is not defined
    for that kind (the panel says so). ``roles[kind]``: [layer][head] lists of labels, main label first.
    All panels share one colour axis (``zmin``..``zmax``, by default the range of the values shown). ``signed``:
    the measure is an effect on the translation that is worse the higher it is (the loss increase when a head is
    switched off), drawn on the effect scale (viz.scales.effect_scale) centred on 0, its colour bar saying in words
    that the warm end is worse. ``chosen`` = (kind, layer, head), 0-based: that cell is outlined.
    """
    kinds = [k for k in KIND_ORDER if k in values]
    shown = [np.asarray(values[k], dtype=np.float64) for k in kinds if values[k] is not None]
    finite = np.concatenate([v[np.isfinite(v)] for v in shown]) if shown else np.zeros(0)
    if zmin is None:
        zmin = float(finite.min()) if finite.size else 0.0
    if zmax is None:
        zmax = float(finite.max()) if finite.size else 1.0
    if signed:
        lim = max(abs(zmin), abs(zmax)) or 1.0
        zmin, zmax = -lim, lim
    if zmax <= zmin:
        zmax = zmin + 1e-9
    n_heads = max(len(roles[k][0]) for k in kinds)
    rows, cols = grid_layout(len(kinds), n_heads)
    data, axes, shapes, notes = [], {}, [], []
    tick = theme().tick
    for p, kind in enumerate(kinds):
        x_ref, y_ref = cell_axes(p)
        role = roles[kind]
        n_layers, n_h = len(role), len(role[0])
        xs, ys = np.arange(1, n_h + 1), np.arange(1, n_layers + 1)
        x_set = dict(tickvals=list(xs), ticktext=[str(h) for h in xs], title=dict(text="head"), showgrid=False,
                     zeroline=False, tickfont=dict(size=tick), range=[0.5, n_h + 0.5])
        first = p == 0 or cols == 1  # side by side, one "layer" title: the next panel's would sit on these ticks
        y_set = dict(tickvals=list(ys), ticktext=[str(l) for l in ys], title=dict(text="layer" if first else ""),
                     showgrid=False,
                     zeroline=False, tickfont=dict(size=tick), range=[n_layers + 0.5, 0.5])
        axes[p] = (x_set, y_set)
        if values[kind] is None:
            notes.append((p, f"not defined for<br>{KIND_NAMES[kind].split(' (')[0]}"))
            data.append(dict(type="scatter", x=[], y=[], xaxis=x_ref, yaxis=y_ref, showlegend=False,
                             hoverinfo="skip"))
            continue
        z = np.asarray(values[kind], dtype=np.float64)
        text = [[short_role(role[l][h]) for h in range(n_h)] for l in range(n_layers)]
        if not texts_fit_cells([t for row in text for t in row], n_h, cols, max(11, tick - 2)):
            text = [["" for _ in row] for row in text]  # the role stays in the hover
        full = [[", ".join(role[l][h]) or "mixed" for h in range(n_h)] for l in range(n_layers)]
        value_text = [[("n/a" if not np.isfinite(z[l, h]) else format(z[l, h], fmt)) for h in range(n_h)]
                      for l in range(n_layers)]
        custom = np.dstack([np.asarray(full, dtype=object), np.asarray(value_text, dtype=object)])
        data.append(dict(
            type="heatmap", z=np.where(np.isfinite(z), z, np.nan).tolist(), x=xs.tolist(), y=ys.tolist(),
            coloraxis="coloraxis", text=text, texttemplate="%{text}", textfont=dict(size=max(11, tick - 2)),
            customdata=custom, xaxis=x_ref, yaxis=y_ref, hoverongaps=False, xgap=2, ygap=2,
            name=KIND_NAMES[kind],
            hovertemplate=(f"{GROUP_NAMES[kind]} layer %{{y}}, head %{{x}}<br>{measure_label}: "
                           "%{customdata[1]}<br>role: %{customdata[0]}<extra></extra>")))
        if chosen is not None and chosen[0] == kind and chosen[1] < n_layers and chosen[2] < n_h:
            l, h = chosen[1] + 1, chosen[2] + 1
            shapes += chosen_outline(x_ref, y_ref, h, l)
    fig = grid_figure(data, axes, rows, cols, 0.07, stacked_gap(rows),
                      # the short names: with the long ones, side by side panels' titles ran into each other
                      cell_titles=[GROUP_NAMES[k] for k in kinds], title_font=max(15, theme().base),
                      coloraxis=_grid_colours(zmin, zmax, signed, measure_label))
    for p, text in notes:
        x_ref, y_ref = cell_axes(p)
        fig.add_annotation(text=text, x=0.5, y=0.5, xref=f"{x_ref} domain", yref=f"{y_ref} domain",
                           showarrow=False, font=dict(size=theme().base, color="#777"))
    fig.update_layout(shapes=shapes)
    n_layers = max(len(roles[k]) for k in kinds)
    panel = 60 + 48 * n_layers + (PHONE_GAP_PX if theme().figure_px else 0)
    return style(fig, title, height=rows * panel + 140, subplot_titles=True)


def _grid_colours(zmin: float, zmax: float, signed: bool, measure_label: str) -> dict:
    """The report grid's colour axis: probabilities' scale, or for an effect (``signed``) the effect scale, red where
    switching the head off made the translation worse. Its bar names the measure (in presenter mode the measure's
    box above does) and, for an effect, says what red means."""
    if not theme().height_px:
        title = effect_legend(measure_label) if signed else measure_label
    else:  # the measure's box above names it
        title = effect_words() if signed else "value"
    bar = dict(tickfont=dict(size=theme().tick), title=dict(text=title, side="right"))
    scale = effect_scale(higher_is_worse=True) if signed else resolve_scale(PROB_SCALE)
    return dict(colorscale=scale, cmin=zmin, cmax=zmax, colorbar=bar)


def offset_pattern_figure(offsets: Sequence[int], weights: Sequence[float | None], kind: str, *,
                          title: str | None = None) -> go.Figure:
    """A head's mean attention weight by offset from a reference key (bars; None = no query had that key).

    Self-attention: offset from the query's own position (−1 = previous token). Cross-attention: offset from
    the proportional diagonal round(i·S/T), where a monotone aligner puts its weight.
    """
    w = np.asarray([np.nan if v is None else v for v in weights], dtype=np.float64)
    xs = np.asarray(offsets, dtype=np.int64)
    if len(w) != len(xs):
        raise ValueError(f"{len(w)} weights for {len(xs)} offsets")
    ref = "the proportional diagonal" if kind == "cross" else "the query's own position"
    x_title = ("source position − proportional diagonal round(i·S/T)" if kind == "cross"
               else "key position − query position (−1 = previous token)")
    top = int(np.nanargmax(w)) if np.isfinite(w).any() else -1
    fig = go.Figure(go.Bar(
        x=xs.tolist(), y=np.nan_to_num(w, nan=0.0).tolist(), name="mean weight",
        marker=bar_marker(len(w), top),  # the theme's bar colours (high contrast: dark blue, the peak orange)
        customdata=[("no query had a key there" if not np.isfinite(v) else f"{v:.3f}") for v in w],
        hovertemplate=f"offset %{{x}} from {ref}<br>mean weight %{{customdata}}<extra></extra>"))
    fig.update_xaxes(title=dict(text=x_title), tickvals=xs.tolist(), tickfont=dict(size=theme().tick), zeroline=False)
    fig.update_yaxes(title=dict(text="mean attention weight"), range=[0, max(0.05, float(np.nanmax(w)) * 1.15)
                                                                      if np.isfinite(w).any() else 1],
                     tickfont=dict(size=theme().tick))
    return style(fig, title or "average pattern by relative position", height=340)


def pruning_figure(curves: Mapping[str, Sequence[tuple[int, float]]], totals: Mapping[str, int], baseline: float,
                   drop: float, *, sentences: int, order: str = "importance", title: str | None = None,
                   split: str = "val") -> go.Figure:
    """BLEU with heads switched off in one order (Michel et al. 2019, Fig. 3), one line per group.

    ``curves[group]``: (heads off, BLEU) points in increasing heads off; ``totals[group]``: the group's heads.
    ``order``: a key of PRUNING_ORDERS, the order the heads went off in; the title, the legend and the x axis
    name it. x = share of the group's heads switched off. A dashed line marks ``baseline − drop``.
    ``sentences``, ``split``: the curve's BLEU was measured on the first ``sentences`` sentences of ``split``.
    """
    by, first = PRUNING_ORDERS[order]
    fig = go.Figure()
    for i, group in enumerate(g for g in (*KIND_ORDER, "all") if g in curves):
        pts = sorted(curves[group])
        n = max(totals[group], 1)
        fig.add_trace(go.Scatter(
            x=[100.0 * k / n for k, _ in pts], y=[b for _, b in pts], mode="lines+markers",
            name=GROUP_NAMES[group], line=dict(color=LINE_COLOURS[group], width=3 if group == "all" else 2,
                                               dash=line_dash(i)),
            customdata=[f"{k} of {n}" for k, _ in pts],
            hovertemplate=f"{GROUP_NAMES[group]}<br>%{{customdata}} heads off<br>BLEU %{{y:.2f}}<extra></extra>"))
    fig.add_hline(y=baseline - drop, line=dict(dash="dash", color="#888"),
                  annotation_text=f"every head on − {drop:g} BLEU", annotation_position="bottom left",
                  annotation_font_size=theme().base - 2)
    short = theme().short_axis_titles  # a projector's short plot: short titles, few BLEU ticks (the hover has them)
    fig.update_xaxes(title=dict(text="heads switched off (% of the group)" if short else
                                f"heads switched off (% of the group, {first})"), range=[-2, 102],
                     ticksuffix=" %", tickfont=dict(size=theme().tick))
    fig.update_yaxes(title=dict(text="BLEU" if short else f"greedy BLEU (first {sentences:,} {split} sentences)"),
                     tickfont=dict(size=theme().tick), **({"nticks": 3} if short else {}))
    # the legend names the order too, but not on a projector, whose figure title above it is on the same line
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0,
                                  **({} if theme().height_px else {"title": dict(text=f"{by}:")})))
    fig = style(fig, title or f"pruning heads {by}", height=430)
    if short:  # the legend's line stands between the title and the plot
        fig.layout.margin.t = (fig.layout.margin.t or 0) + int(1.4 * theme().tick)
    return fig


def sentence_label(src: str, max_chars: int = 70) -> str:
    """A corpus sentence, shortened for a radio label (plain text, not plotly markup)."""
    return src if len(src) <= max_chars else src[: max_chars - 1] + "…"
