"""Sinusoidal positional encoding and its views.

Shape letters (see :mod:`viz`): ``i``, ``j`` positions, ``d`` = d_model.
PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import heatmap
from viz.layout import style, styled_figure
from viz.scales import SIGNED_SCALE, line_dash, resolve_scale
from viz.theme import fit_height, theme


def sinusoidal_encoding(n_positions: int, d_model: int, layout: str = "interleaved", offset: int = 0) -> np.ndarray:
    """Positional encoding of "Attention Is All You Need" -> (n_positions, d_model) float32: rows ``offset`` ..
    ``offset + n_positions - 1`` of the table (M2M100's position p reads row p + 2: its ``pos_offset``).

    ``layout`` "interleaved" (the paper): sines in the even dimensions, cosines in the odd ones;
    "sin_then_cos" (Marian): the same sines in dimensions 0..⌈d/2⌉-1, then the cosines;
    "fairseq" (M2M100, NLLB): sines then cosines at wavelengths 10000^(i/(d/2 - 1)), i < d/2 (a zero column last
    when d is odd).
    """
    pos = np.arange(offset, offset + n_positions, dtype=np.float64)[:, None]  # (i, 1)
    if layout == "fairseq":
        half = d_model // 2
        angles = pos * np.exp(np.arange(half, dtype=np.float64) * -(np.log(10000.0) / max(half - 1, 1)))
        pe = np.zeros((n_positions, d_model), dtype=np.float64)
        pe[:, :half], pe[:, half:2 * half] = np.sin(angles), np.cos(angles)
        return pe.astype(np.float32)
    two_i = np.arange(0, d_model, 2, dtype=np.float64)  # (ceil(d/2),)
    angles = pos / np.power(10000.0, two_i / d_model)  # (i, ceil(d/2))
    pe = np.zeros((n_positions, d_model), dtype=np.float64)
    if layout == "sin_then_cos":
        half = angles.shape[1]
        pe[:, :half] = np.sin(angles)
        pe[:, half:] = np.cos(angles[:, : d_model - half])
    elif layout == "interleaved":
        pe[:, 0::2] = np.sin(angles)
        pe[:, 1::2] = np.cos(angles[:, : d_model // 2])
    else:
        raise ValueError(f"unknown positional-encoding layout {layout!r}")
    return pe.astype(np.float32)


def is_sine(dim: int, d_model: int, layout: str = "interleaved") -> bool:
    """Whether dimension ``dim`` of the table holds a sine (else a cosine, or fairseq's zero column of an odd d)."""
    if layout == "sin_then_cos":
        return dim < (d_model + 1) // 2
    if layout == "fairseq":
        return dim < d_model // 2
    return dim % 2 == 0


LEGEND_PER_ROW = 7  # names like "dim 16 (sin)" in one row of a projector's legend at 1280 px (measured: 7)
PHONE_LEGEND_PER_ROW = 2  # and of a phone's at 356 px (at 13 px, a name and its line take about 130 px)


def waves_figure(pe: np.ndarray, dims: Sequence[int] = (0, 1, 4, 5, 16, 17),
                 layout: str = "interleaved") -> go.Figure:
    """Lines of ``pe[:, dim]`` (pe: (i, d)) over positions, one line per chosen dimension.

    With the paper's ``layout`` even dimensions are sines and odd ones cosines; with "sin_then_cos" and "fairseq"
    the first half are sines. Dimensions of short wavelength oscillate fast, the others slowly.
    """
    pe = np.asarray(pe, dtype=np.float32)
    bad = [d for d in dims if not 0 <= d < pe.shape[1]]
    if bad:
        raise ValueError(f"dims {bad} are outside 0..{pe.shape[1] - 1} (d_model = {pe.shape[1]})")
    x = np.arange(pe.shape[0], dtype=np.int32)
    fig = go.Figure()
    for n, d in enumerate(dims):
        wave = "sin" if is_sine(d, pe.shape[1], layout) else "cos"
        fig.add_trace(go.Scatter(
            x=x, y=pe[:, d], mode="lines", name=f"dim {d} ({wave})", line=dict(width=2.5, dash=line_dash(n)),
            hovertemplate=(f"dim {d} ({wave})<br>position %{{x}}<br>value %{{y:.3f}}"
                           "<extra></extra>")))
    fig.update_xaxes(title=dict(text="position →"), tickfont=dict(size=theme().tick))
    fig.update_yaxes(title=dict(text="PE value"), range=[-1.1, 1.1], tickfont=dict(size=theme().tick))
    if not (theme().height_px or theme().figure_px):
        return style(fig, "Sine and cosine waves per dimension", height=450)
    # A projector's figure is too short for a column of names (its legend scrolled and hid some), and a phone's too
    # narrow (the column took half its width): the names go in rows between the title and the plot.
    per_row = PHONE_LEGEND_PER_ROW if theme().figure_px else LEGEND_PER_ROW
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    fig.update_yaxes(tickvals=[-1, 0, 1])  # a short plot: the ends and 0, apart at 20 px
    fig = style(fig, "Sine and cosine waves per dimension", height=450)
    fig.layout.margin.t = (fig.layout.margin.t or 0) + int(1.5 * theme().base) * -(-len(dims) // per_row)
    return fig


def pe_heatmap(pe: np.ndarray, title: str = "Positional encoding matrix", limit: float | None = 1.0) -> go.Figure:
    """Heatmap of ``pe`` (i, d): rows = positions (0 at top), columns = dimensions, range -limit..limit (None: the
    largest |value|, for learned position vectors, which are not bounded by 1)."""
    pe = np.asarray(pe, dtype=np.float32)
    if limit is None:
        limit = float(np.abs(pe).max()) if pe.size else 1.0
        limit = limit if limit > 0 else 1.0
    fig = heatmap(pe, None, None, row_title="position ↓", col_title="dimension →", zmin=-limit,
                  zmax=limit, colorscale=SIGNED_SCALE, title=title, value_name="value",
                  row_name="position", col_name="dim", fmt=".3f", as_shown=True)
    return fig.update_layout(height=fit_height(min(900, max(380, 120 + 6 * pe.shape[0]))))


# The pair map and the offset curve side by side, the map's colour bar in the gap between them: its tick labels
# and its title (written along the bar, so it is no wider than the labels) end before the curve's axis begins.
MAP_X, BAR_X, CURVE_X = [0.0, 0.38], 0.40, [0.62, 1.0]


def cosine_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (i, d) scaled to unit length (a zero row stays zero): their dot products are cosines."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def position_similarity_figure(pe: np.ndarray, ref_position: int | None = None, cosine: bool = False) -> go.Figure:
    """Dot-product similarity between every pair of positions; ``pe`` (i, d) -> (i, j) map.

    With ``ref_position`` a second panel plots the similarity of that position
    to every other one against the offset (pos - ref_position): for the sinusoids it peaks at 0
    and falls off with distance, symmetrically. ``cosine``: the cosine similarity instead (learned position
    vectors, whose lengths differ).
    """
    pe = cosine_rows(pe) if cosine else np.asarray(pe, dtype=np.float32)
    sim = (pe @ pe.T).astype(np.float32)  # (i, j)
    n = pe.shape[0]
    measure, pair = ("cosine", "cos(P_i, P_j)") if cosine else ("dot product", "PE·PEᵀ")
    if ref_position is None:
        return heatmap(sim, None, None, row_title="position ↓", col_title="position →",
                       zmin=None, zmax=None, colorscale="Viridis", value_name=measure,
                       row_name="position", col_name="position", fmt=".2f",
                       title=f"Similarity of positions: {pair}").update_layout(
                           height=fit_height(min(800, max(420, 140 + 6 * n))))
    if not 0 <= ref_position < n:
        raise ValueError(f"ref_position {ref_position} is outside 0..{n - 1}")
    t = theme()
    positions = np.arange(n, dtype=np.int32)
    data = [dict(type="heatmap", z=sim, x=positions, y=positions, colorscale=resolve_scale("Viridis"),
                 colorbar=dict(title=dict(text=measure, side="right"), x=BAR_X, xanchor="left",
                               thickness=15, len=1.0, tickfont=dict(size=t.tick)),
                 hovertemplate=f"position %{{y}} · position %{{x}}<br>{measure} %{{z:.2f}}<extra></extra>"),
            dict(type="scatter", x=positions - ref_position, y=sim[ref_position], mode="lines+markers",
                 name="similarity", showlegend=False, xaxis="x2", yaxis="y2",
                 hovertemplate=f"offset %{{x}}<br>{measure} %{{y:.2f}}<extra></extra>")]
    titles = [dict(text=text, x=sum(dom) / 2, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                   showarrow=False, font=dict(size=t.base))
              for text, dom in ((f"{pair} for every pair of positions", MAP_X),
                                (f"similarity to position {ref_position}", CURVE_X))]
    ticks = dict(tickfont=dict(size=t.tick))
    layout = dict(
        xaxis=dict(domain=MAP_X, anchor="y", title=dict(text="position →"), showgrid=False, **ticks),
        yaxis=dict(autorange="reversed", anchor="x", title=dict(text="position ↓"), **ticks),
        xaxis2=dict(domain=CURVE_X, anchor="y2", title=dict(text=f"offset from position {ref_position}"),
                    showgrid=False, **ticks),
        yaxis2=dict(anchor="x2", title=dict(text=measure), **ticks),
        annotations=titles)
    return styled_figure(data, layout, f"Similarity of positions: {pair}", height=500, subplot_titles=True)
