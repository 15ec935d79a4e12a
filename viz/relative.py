"""Relative positions (T5): the bias each head adds to its self-attention scores, by the key's distance from the
query, read from the (h, i, j) matrices a trace recorded.

Shape letters (see :mod:`viz`): ``h`` heads, ``i`` query positions, ``j`` key positions; a distance is j − i
(key − query): negative for a key before the query. T5 gives every distance one bucket and every bucket one
learned number per head, so each diagonal of a recorded matrix (one distance) holds one value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import heatmap
from viz.layout import styled_figure
from viz.scales import SIGNED_SCALE, line_dash
from viz.theme import theme

# The two panels of the by-distance figure: encoder (bidirectional) left, decoder (causal) right.
ENC_X, DEC_X = [0.0, 0.46], [0.54, 1.0]


def bias_by_distance(bias: np.ndarray, causal: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """(distances (n,), values (h, n), spread) of a recorded bias ``bias`` (h, i, j).

    Distance k = j − i is the matrix's diagonal at offset k; its value is read from the matrix (the diagonal's
    first cell), and ``spread`` is the largest max − min along any diagonal: 0 where every cell of a distance
    holds the same number, as T5's buckets make it. ``causal`` keeps only k ≤ 0 (keys at or before the query:
    a causal decoder masks the others).
    """
    b = np.asarray(bias, dtype=np.float32)
    if b.ndim != 3:
        raise ValueError(f"bias must be (h, i, j), got shape {b.shape}")
    _, n_q, n_k = b.shape
    last = 0 if causal else n_k - 1
    distances = np.arange(-(n_q - 1), last + 1, dtype=np.int64)
    values, spread = np.zeros((b.shape[0], len(distances)), dtype=np.float32), 0.0
    for n, k in enumerate(distances):
        diag = np.diagonal(b, offset=int(k), axis1=1, axis2=2)  # (h, cells at this distance)
        values[:, n] = diag[:, 0]
        spread = max(spread, float((diag.max(axis=1) - diag.min(axis=1)).max()))
    return distances, values, spread


def _lines(distances: np.ndarray, values: np.ndarray, axis: str, stack: str) -> list[dict]:
    return [dict(type="scatter", x=distances, y=values[h], mode="lines+markers", name=f"head {h + 1}",
                 legendgroup=f"head {h + 1}", showlegend=axis == "", xaxis="x" + axis, yaxis="y" + axis,
                 line=dict(width=2, dash=line_dash(h)), marker=dict(size=4),
                 hovertemplate=f"{stack}, head {h + 1}<br>distance %{{x}}<br>bias %{{y:.3f}}<extra></extra>")
            for h in range(values.shape[0])]


def bias_distance_figure(encoder: tuple[np.ndarray, np.ndarray], decoder: tuple[np.ndarray, np.ndarray] | None,
                         title: str = "Position bias each head adds, by distance key − query") -> go.Figure:
    """One line per head of the bias against the distance: ``encoder`` and ``decoder`` are (distances (n,),
    values (h, n)) as :func:`bias_by_distance` returns them (``decoder`` None: the encoder's panel alone)."""
    t = theme()
    ticks = dict(tickfont=dict(size=t.tick), zeroline=True)
    data = _lines(*encoder, "", "encoder")
    layout = dict(xaxis=dict(domain=ENC_X if decoder is not None else [0.0, 1.0], anchor="y",
                             title=dict(text="distance key − query (encoder)"), **ticks),
                  yaxis=dict(anchor="x", title=dict(text="bias added to the score"), **ticks),
                  legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"))
    notes = [("encoder self-attention (bidirectional)", layout["xaxis"]["domain"])]
    if decoder is not None:
        data += _lines(*decoder, "2", "decoder")
        layout["xaxis2"] = dict(domain=DEC_X, anchor="y2", title=dict(text="distance key − query (decoder)"), **ticks)
        layout["yaxis2"] = dict(anchor="x2", matches="y", **ticks)
        notes.append(("decoder self-attention (causal: keys up to the query)", DEC_X))
    layout["annotations"] = [dict(text=text, x=sum(dom) / 2, y=1.0, xref="paper", yref="paper", xanchor="center",
                                  yanchor="bottom", showarrow=False, font=dict(size=t.base)) for text, dom in notes]
    return styled_figure(data, layout, title, height=480, subplot_titles=True)


def bias_matrix_figure(bias: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str], title: str,
                       mask: np.ndarray | None = None, side: str = "") -> go.Figure:
    """Heatmap of one head's recorded bias ``bias`` (i, j): queries down, keys across, a signed scale centred at
    0; ``mask`` (i, j) bool, True = may attend: the cells the model masked are drawn grey."""
    b = np.asarray(bias, dtype=np.float32)
    lim = float(np.abs(b).max()) if b.size else 1.0
    lim = lim if lim > 0 else 1.0
    where = f" ({side})" if side else ""
    return heatmap(b, query_tokens, key_tokens, row_title=f"query{where} ↓", col_title=f"key{where} →", mask=mask,
                   zmin=-lim, zmax=lim, colorscale=SIGNED_SCALE, title=title, value_name="bias", fmt=".3f")
