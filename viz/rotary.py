"""Rotary position embeddings (RoPE; T5Gemma): no vector is added to the embeddings; each head's queries and keys
are rotated, pair of dimensions by pair, by an angle proportional to their position.

Shape letters (see :mod:`viz`): ``n`` positions, ``d`` = d_head, ``p`` = d / 2 dimension pairs. Pair i joins
dimensions i and i + d/2 (Hugging Face's rotate_half, as Gemma and T5Gemma pair them) and turns by p·θ_i at position
p, θ_i = base^(−2i/d): pair 0 fastest, the last pair slowest. Written as complex numbers, pair i of a query at
position m is (q_i + i·q_{i+d/2})·e^{i·m·θ_i}, so the dot product of a rotated query and key is
Σ_i Re[(q_i + i·q_{i+d/2})(k_i − i·k_{i+d/2})·e^{i(m − n)θ_i}]: it depends on the positions only through
m − n.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import heatmap
from viz.layout import styled_figure
from viz.scales import SIGNED_SCALE
from viz.theme import fit_height, theme


def frequencies(d_head: int, base: float) -> np.ndarray:
    """(p,) θ_i = base^(−2i/d_head), radians per position, in float64."""
    return base ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)


def angles(positions: np.ndarray, d_head: int, base: float) -> np.ndarray:
    """(n, p) the angle p·θ_i each pair of a vector at each position turns by."""
    return np.asarray(positions, dtype=np.float64)[:, None] * frequencies(d_head, base)[None, :]


def rotate(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """(n, d) vectors rotated as the model rotates a head's queries or keys at ``positions`` (n,)."""
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[-1] // 2
    a = angles(positions, x.shape[-1], base)  # (n, p)
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def pairs(x: np.ndarray) -> np.ndarray:
    """(..., p) the complex numbers x_i + i·x_{i+d/2} of vectors ``x`` (..., d)."""
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[-1] // 2
    return x[..., :half] + 1j * x[..., half:]


def turned(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """(p,) the angle each pair turned from ``before`` (d,) to ``after`` (d,), in (−π, π]."""
    return np.angle(pairs(after) * np.conj(pairs(before)))


def wrap(a: np.ndarray) -> np.ndarray:
    """Angles brought into (−π, π]."""
    return -np.angle(np.exp(-1j * np.asarray(a, dtype=np.float64)))


def score_by_distance(q: np.ndarray, k: np.ndarray, base: float, distances: np.ndarray) -> np.ndarray:
    """(len(distances),) the dot product of query ``q`` (d,) and key ``k`` (d,), both as they were before rotation,
    once rotated to positions m and n with m − n = each distance (any m: only the difference counts)."""
    c = pairs(q) * np.conj(pairs(k))  # (p,)
    theta = frequencies(len(q), base)
    return np.real(np.exp(1j * np.outer(np.asarray(distances, dtype=np.float64), theta)) @ c)


def frequency_figure(n_positions: int, d_head: int, base: float) -> go.Figure:
    """cos(p·θ_i) for every dimension pair (rows) and position (columns): how far each pair has turned."""
    turn = np.cos(angles(np.arange(n_positions), d_head, base)).astype(np.float32)  # (n, p)
    fig = heatmap(turn.T, None, None, row_title="dimension pair i ↓", col_title="position →", zmin=-1.0, zmax=1.0,
                  colorscale=SIGNED_SCALE, value_name="cos(p·θᵢ)", row_name="pair", col_name="position", fmt=".2f",
                  title=f"How far each dimension pair has turned: cos(p·θᵢ), θᵢ = {base:g}^(−2i/{d_head})",
                  as_shown=True)
    return fig.update_layout(height=fit_height(min(700, max(380, 140 + 3 * turn.shape[1]))))


def turn_figure(recorded: dict[str, np.ndarray], formula: np.ndarray, title: str) -> go.Figure:
    """The angle each dimension pair turned, as recorded (``recorded``: name -> (p,) angles, e.g. the query's and the
    key's) against the formula's (p,) angle, all in (−π, π]."""
    t = theme()
    idx = np.arange(len(formula))
    data = [dict(type="scatter", x=idx, y=wrap(formula), mode="lines", name="formula p·θᵢ",
                 line=dict(width=2, color=t.bar_colour),
                 hovertemplate="pair %{x}<br>formula %{y:.3f} rad<extra></extra>")]
    for n, (name, a) in enumerate(recorded.items()):
        data.append(dict(type="scatter", x=idx, y=a, mode="markers", name=name,
                         marker=dict(size=7 - 2 * n, symbol=("circle-open", "x")[n % 2]),
                         hovertemplate=f"pair %{{x}}<br>{name} %{{y:.3f}} rad<extra></extra>"))
    ticks = dict(tickfont=dict(size=t.tick))
    layout = dict(xaxis=dict(title=dict(text="dimension pair i (fast → slow)"), dtick=max(1, len(formula) // 16),
                             **ticks),
                  yaxis=dict(title=dict(text="angle turned (radians)"), range=[-3.3, 3.3], **ticks),
                  legend=dict(orientation="h", y=-0.25, x=0.0))
    return styled_figure(data, layout, title, height=420)


def distance_figure(distances: np.ndarray, scores: np.ndarray, shifts: np.ndarray, shifted: np.ndarray,
                    actual: int, title: str) -> go.Figure:
    """Left: the score of one query and key against their distance m − n (the recorded pair's marked); right: the
    same pair moved together by a shift (the distance kept), whose score stays put."""
    t = theme()
    ticks = dict(tickfont=dict(size=t.tick))
    at = int(np.flatnonzero(np.asarray(distances) == actual)[0]) if actual in distances else None
    data = [dict(type="scatter", x=distances, y=scores, mode="lines", name="score by distance", showlegend=False,
                 hovertemplate="m − n = %{x}<br>q·k %{y:.3f}<extra></extra>"),
            dict(type="scatter", x=shifts, y=shifted, mode="lines+markers", name="both moved", showlegend=False,
                 xaxis="x2", yaxis="y2", marker=dict(size=5),
                 hovertemplate="both moved by %{x}<br>q·k %{y:.3f}<extra></extra>")]
    if at is not None:
        data.append(dict(type="scatter", x=[actual], y=[scores[at]], mode="markers", name="this pair",
                         showlegend=False, marker=dict(size=12, symbol="diamond", color=t.highlight_colour),
                         hovertemplate="this pair: m − n = %{x}<br>q·k %{y:.3f}<extra></extra>"))
    # two short lines each: a phone's panels are a third of its width apart
    names = (("score against<br>the distance m − n", [0.0, 0.46]), ("both moved by s<br>(distance kept)", [0.56, 1.0]))
    notes = [dict(text=text, x=sum(dom) / 2, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                  showarrow=False, font=dict(size=t.base)) for text, dom in names]
    low, high = float(min(scores.min(), shifted.min())), float(max(scores.max(), shifted.max()))
    pad = 0.05 * (high - low or 1.0)
    span = [low - pad, high + pad]
    distance = dict(text="m − n (query − key position)")
    layout = dict(xaxis=dict(domain=names[0][1], anchor="y", title=distance, **ticks),
                  yaxis=dict(anchor="x", title=dict(text="q·k (before scaling)"), range=span, **ticks),
                  xaxis2=dict(domain=names[1][1], anchor="y2", title=dict(text="shift s"), **ticks),
                  yaxis2=dict(anchor="x2", range=span, **ticks), annotations=notes)
    return styled_figure(data, layout, title, height=440, subplot_titles=True)
