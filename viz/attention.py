"""Attention heatmaps: one head, all heads of a layer, and a layer × head overview.

Shape letters: ``L`` layers, ``h`` heads, ``q`` query positions, ``k`` key positions.
``kind`` is one of ``"enc_self"`` (DE→DE), ``"dec_self"`` (EN→EN) and ``"cross"``
(EN queries over DE keys). Masks are bool with True = may attend.
Heads and layers are shown 1-based ("layer 1", "head 1") for humans; the
``layer`` argument is the 0-based index into the model's trace.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.common import (KIND_NAMES, PROB_SCALE, TICK_FONT, axis_titles, facet_heatmaps,
                        heatmap, style)


def _zmax(zmax: float | None) -> float:
    """``None`` means the full probability range 0..1."""
    return 1.0 if zmax is None else float(zmax)


def _colorbar_title(zmax: float) -> str:
    """Say on the colourbar when the scale is clipped, so nobody misreads it."""
    return "weight" if zmax >= 1.0 else f"weight<br>(clipped at {zmax:.2f})"


def row_sums(probs: np.ndarray) -> np.ndarray:
    """Sum over keys: (..., q, k) -> (..., q) float32; ~1 everywhere after softmax."""
    return np.asarray(probs, dtype=np.float32).sum(axis=-1)


def rows_sum_to_one(probs: np.ndarray, atol: float = 1e-3) -> bool:
    """True when every query row of ``probs`` (..., q, k) sums to 1 within ``atol``."""
    return bool(np.allclose(row_sums(probs), 1.0, atol=atol))


def sink_key(probs: np.ndarray) -> int:
    """Key position that receives the most attention on average ((..., q, k) -> int).

    That column is the usual "attention sink" (often the first token or the
    final "." / end token) that washes out the colour scale.
    """
    p = np.asarray(probs, dtype=np.float32)
    return int(np.nanmean(p.reshape(-1, p.shape[-1]), axis=0).argmax())


def robust_zmax(probs: np.ndarray, ignore_key: int | None = None, floor: float = 0.05) -> float:
    """Colour-scale maximum that ignores key column ``ignore_key``.

    ``probs`` (..., q, k). Returns the largest weight among the other key
    columns (at least ``floor``, at most 1), to be passed as ``zmax=`` so the
    rest of the map is visible when one key (a sink) takes most of the weight.
    """
    p = np.asarray(probs, dtype=np.float32)
    if ignore_key is not None:
        keep = np.ones(p.shape[-1], dtype=bool)
        keep[ignore_key] = False
        p = p[..., keep]
    if p.size == 0 or np.all(np.isnan(p)):
        return 1.0
    return float(np.clip(np.nanmax(p), floor, 1.0))


def attention_figure(probs: np.ndarray, query_tokens: Sequence[str],
                     key_tokens: Sequence[str], kind: str, mask: np.ndarray | None = None,
                     zmax: float | None = None, title: str | None = None) -> go.Figure:
    """Heatmap of one head's attention ``probs`` (q, k) with axis titles for ``kind``.

    ``mask`` (q, k) or broadcastable (e.g. (k,) key padding), True = may attend.
    ``zmax=None`` means 1.0; a smaller value clips (see :func:`robust_zmax`).
    """
    q_title, k_title = axis_titles(kind)
    zmax = _zmax(zmax)
    return heatmap(probs, key_tokens, query_tokens, x_title=k_title, y_title=q_title,
                   mask=mask, zmin=0.0, zmax=zmax, colorscale=PROB_SCALE,
                   title=title or KIND_NAMES[kind], value_name="weight",
                   colorbar_title=_colorbar_title(zmax))


def heads_figure(probs: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str],
                 kind: str, layer: int, mask: np.ndarray | None = None,
                 zmax: float | None = None) -> go.Figure:
    """All heads of one layer as ONE faceted figure; ``probs`` (h, q, k).

    Panels are titled "head 1".."head h" (1-based); ``layer`` is the 0-based
    index and is shown as ``layer + 1``. One shared colourbar, 0..zmax.
    """
    probs = np.asarray(probs, dtype=np.float32)
    if probs.ndim != 3:
        raise ValueError(f"heads_figure expects probs of shape (h, q, k), got {probs.shape}")
    q_title, k_title = axis_titles(kind)
    zmax = _zmax(zmax)
    titles = [f"head {i + 1}" for i in range(probs.shape[0])]
    return facet_heatmaps(probs, titles, key_tokens, query_tokens, x_title=k_title,
                          y_title=q_title, mask=mask, zmin=0.0, zmax=zmax,
                          colorscale=PROB_SCALE, value_name="weight",
                          title=f"{KIND_NAMES[kind]}: layer {layer + 1}, all heads",
                          colorbar_title=_colorbar_title(zmax))


def overview_figure(probs: np.ndarray, kind: str, zmax: float | None = None) -> go.Figure:
    """Thumbnail grid of every layer × head; ``probs`` (L, h, q, k).

    Rows are layers, columns heads (both labelled 1-based), no tick labels;
    hover gives layer, head, query/key positions and the weight. One figure,
    one shared 0..zmax colour axis.
    """
    probs = np.asarray(probs, dtype=np.float32)
    if probs.ndim != 4:
        raise ValueError(f"overview_figure expects probs of shape (L, h, q, k), got {probs.shape}")
    n_layers, n_heads, q, k = probs.shape
    q_title, k_title = axis_titles(kind)
    zmax = _zmax(zmax)
    fig = make_subplots(rows=n_layers, cols=n_heads, horizontal_spacing=0.012,
                        vertical_spacing=min(0.03, 0.5 / max(n_layers - 1, 1)),
                        column_titles=[f"head {j + 1}" for j in range(n_heads)],
                        row_titles=[f"layer {i + 1}" for i in range(n_layers)])
    xs, ys = np.arange(k, dtype=np.int32), np.arange(q, dtype=np.int32)
    for i in range(n_layers):
        for j in range(n_heads):
            fig.add_trace(go.Heatmap(
                z=probs[i, j], x=xs, y=ys, coloraxis="coloraxis", zmin=0.0, zmax=zmax,
                name=f"layer {i + 1}, head {j + 1}", hoverongaps=False,
                hovertemplate=(f"layer {i + 1}, head {j + 1}<br>query %{{y}} → key %{{x}}"
                               "<br>weight %{z:.3f}<extra></extra>"),
            ), row=i + 1, col=j + 1)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    fig.update_layout(coloraxis=dict(colorscale=PROB_SCALE, cmin=0.0, cmax=zmax, colorbar=dict(
        title=dict(text=_colorbar_title(zmax)), tickfont=dict(size=TICK_FONT))))
    fig.update_annotations(font_size=15)
    title = (f"{KIND_NAMES[kind]}: every layer × head<br><sup>in each thumbnail: rows = "
             f"{q_title}, columns = {k_title}</sup>")
    fig = style(fig, title, height=170 + 115 * n_layers)
    return fig.update_layout(margin=dict(t=110))
