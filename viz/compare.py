"""Two traces side by side, head by head: two sentences on one model, or one sentence on two models.

Each side keeps its own token axes (the sentences, or the tokenizations, differ); rows are heads, so head
h of side A sits beside head h of side B, and both share one colour axis, so equal colours are equal weights.
Shapes as in :mod:`viz`: a side's attention is (h, i, j).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.attention import weight_colorbar_ticks, weight_colorbar_title, weight_zmax
from viz.heatmap import cell_axes, check_tokens, grid_figure, heatmap_traces
from viz.kinds import KIND_NAMES, axis_titles
from viz.scales import PROB_SCALE, resolve_scale
from viz.text import cut_token, escape_token
from viz.theme import theme
from viz.token_axes import FACET_ROW_PX, MIN_PANEL_PX, axis_ticks, label_px, plot_width_px, token_axis


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its attention for one layer and its own axes."""

    label: str  # e.g. "A · Der Hund beißt den Mann." (plain text; escaped here)
    probs: np.ndarray  # (h, i, j)
    query_tokens: Sequence[str]
    key_tokens: Sequence[str]
    mask: np.ndarray | None = None  # (i, j) True = may attend, as the model used it


def side_by_side_figure(a: Side, b: Side, kind: str, layer: int, heads: Sequence[int] | None = None,
                        zmax: float | None = None, *, src_lang: str | None = None, tgt_lang: str | None = None,
                        width_px: int | None = None) -> go.Figure:
    """ONE figure: a row per head (``heads``, 0-based; default all), side A left and side B right.

    Both sides must have the same number of heads (that is what "aligned" means); ``layer`` is 0-based and
    shown 1-based. Key labels are thinned for half of ``width_px`` each, as in :func:`viz.token_axes.axis_ticks`.
    """
    pa, pb = (np.asarray(s.probs, dtype=np.float32) for s in (a, b))
    if pa.ndim != 3 or pb.ndim != 3:
        raise ValueError(f"each side needs probs of shape (h, i, j); got {pa.shape} and {pb.shape}")
    if pa.shape[0] != pb.shape[0]:
        raise ValueError(f"the sides have {pa.shape[0]} and {pb.shape[0]} heads; head-by-head alignment needs "
                         "the same number")
    for s, p in ((a, pa), (b, pb)):
        check_tokens(p, s.query_tokens, s.key_tokens, f"{s.label}: probs")
    heads = list(range(pa.shape[0])) if heads is None else list(heads)
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    zmax = weight_zmax(zmax)
    t = theme()
    n_rows = max(pa.shape[1], pb.shape[1])
    panel = max(MIN_PANEL_PX, FACET_ROW_PX * n_rows)
    labels = max(label_px(a.key_tokens), label_px(b.key_tokens)) + 10
    if t.height_px and len(heads) == 1:  # presenter: one head as tall as the screen allows
        panel = max(MIN_PANEL_PX // 2, t.height_px - 110 - labels)
    # A phone: one panel to a row, A above B for each head, each named above it (30 px for that name).
    stacked = t.max_cols == 1
    rows = 2 * len(heads) if stacked else len(heads)
    labels += 30 if stacked else 0
    height = rows * (panel + labels) + 110
    half = (width_px or 940) // 2
    data, axes = [], {}
    for col, (side, p) in enumerate(((a, pa), (b, pb)), start=1):
        panel_w = plot_width_px(None if stacked else half, side.query_tokens, colorbar=col == 2 and not stacked)
        for row, h in enumerate(heads, start=1):
            cell = (row - 1) * 2 + col - 1
            x_ref, y_ref = cell_axes(cell)
            for k, tr in enumerate(heatmap_traces(p[h], side.mask, side.query_tokens, side.key_tokens, "query", "key",
                                           "weight", ".3f")):
                if k == 0:
                    tr.update(coloraxis="coloraxis")
                tr.update(xaxis=x_ref, yaxis=y_ref)
                data.append(tr)
            x_set = dict(showgrid=False, zeroline=False, **token_axis(side.key_tokens),
                         **axis_ticks(side.key_tokens, p.shape[2], angle=-45, axis_px=panel_w))
            y_set = dict(showgrid=False, zeroline=False, **token_axis(side.query_tokens),
                         **axis_ticks(side.query_tokens, p.shape[1], reverse=True, axis_px=panel))
            if row == len(heads) and (col == 2 or not stacked):
                x_set["title"] = dict(text=k_title)
            if col == 1 or stacked:
                y_set["title"] = dict(text=q_title)
            axes[cell] = (x_set, y_set)
    v_space = min(0.9 / max(rows - 1, 1), labels / height) if rows > 1 else 0
    which = f"head {heads[0] + 1}" if len(heads) == 1 else "all heads"
    names = [escape_token(cut_token(a.label, 26)), escape_token(cut_token(b.label, 26))]
    return grid_figure(data, axes, rows, 1 if stacked else 2, 0.12, v_space,
                       column_titles=None if stacked else [escape_token(a.label), escape_token(b.label)],
                       row_titles=None if stacked else [f"head {h + 1}" for h in heads],
                       cell_titles=[f"{n}, head {h + 1}" for h in heads for n in names] if stacked else None,
                       title_font=max(16, t.base) if not stacked else t.base,
                       coloraxis=dict(colorscale=resolve_scale(PROB_SCALE), cmin=0.0, cmax=zmax, colorbar=dict(
                          title=dict(text=weight_colorbar_title(zmax)), tickfont=dict(size=t.tick),
                          **weight_colorbar_ticks(zmax))),
                       style=dict(title=f"{KIND_NAMES[kind]}, layer {layer + 1}, {which}: side by side",
                                 height=height, subplot_titles=True))
