"""Embedding views: token × dimension maps, √d_model scaling, stages, vocabulary map.

Shape letters (see :mod:`viz`): ``s`` positions of one sentence (source; a target
sentence works the same with ``t``), ``V`` vocabulary size, ``d`` = d_model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import facet_heatmaps, heatmap
from viz.layout import PAGE_WIDTH_PX, styled_figure
from viz.scales import SIGNED_SCALE
from viz.text import escape_tokens, visible_len
from viz.theme import figure_width, fit_height, theme
from viz.token_axes import axis_ticks, plot_width_px

if TYPE_CHECKING:
    import pandas as pd


def _sym_limit(*arrays: np.ndarray) -> float:
    """Symmetric colour limit: the 99th percentile of |values| (robust to outliers)."""
    vals = np.concatenate([np.abs(np.asarray(a, dtype=np.float32)).ravel() for a in arrays])
    lim = float(np.nanpercentile(vals, 99)) if vals.size else 1.0
    return lim if lim > 0 else 1.0


def embedding_heatmap(matrix: np.ndarray, tokens: Sequence[str],
                      title: str = "token embeddings") -> go.Figure:
    """Heatmap of ``matrix`` (s, d): one row per token (top to bottom), one column per dimension.

    Diverging colour scale centred at 0, symmetric range (99th percentile of |value|).
    """
    m = np.asarray(matrix, dtype=np.float32)
    lim = _sym_limit(m)
    return heatmap(m, tokens, None, row_title="token ↓", col_title="embedding dimension →",
                   zmin=-lim, zmax=lim, colorscale=SIGNED_SCALE, title=title,
                   value_name="value", row_name="token", col_name="dim", fmt=".3f", as_shown=True)


def scaling_figure(token_emb: np.ndarray, scaled: np.ndarray, d_model: int,
                   tokens: Sequence[str] | None = None, *,
                   width_px: int | None = None) -> go.Figure:
    """Values before and after multiplying by √d_model; both inputs (s, d).

    Left: box plots of all values per stage. Right: per-token standard
    deviation before and after (grouped bars; x = token position, labelled
    with ``tokens`` when given, thinned when crowded for ``width_px``).
    """
    a = np.asarray(token_emb, dtype=np.float32)
    b = np.asarray(scaled, dtype=np.float32)
    if a.shape != b.shape:
        raise ValueError(f"token_emb {a.shape} and scaled {b.shape} must have the same "
                         f"(s, d) shape")
    factor = float(np.sqrt(d_model))
    # Two plots side by side, as make_subplots(column_widths=[0.4, 0.6], horizontal_spacing=0.1) places them.
    left, right = [0.0, 0.36], [0.46, 1.0]
    top, low = [0.0, 1.0], [0.0, 1.0]
    if theme().figure_px:  # a phone: one above the other, each as wide as the screen
        left, right, top, low = [0.0, 1.0], [0.0, 1.0], [0.62, 1.0], [0.0, 0.4]
    data = [box_of(arr, name, colour) for arr, name, colour in ((a, "token embedding", "#7f7f7f"),
                                                               (b, f"× √{d_model} = × {factor:.1f}", "#1f77b4"))]
    xs = np.arange(a.shape[0], dtype=np.int32)
    labels = escape_tokens(tokens) if tokens is not None else [str(i) for i in xs]
    for arr, name, colour in ((a, "before", "#7f7f7f"), (b, "after", "#1f77b4")):
        std = arr.std(axis=1).astype(np.float32)
        data.append(dict(type="bar", x=xs, y=std, name=f"std {name}", marker=dict(color=colour),
                         customdata=np.asarray(labels, dtype=object), xaxis="x2", yaxis="y2",
                         hovertemplate=("%{customdata} (%{x})<br>std " + name + " %{y:.3f}<extra></extra>")))
    # Presenter mode has no room for a legend below the token labels: the title names the bars' colours instead.
    legend = not theme().height_px
    bars = "standard deviation per token" + ("" if legend else ": grey before, blue after")
    titles = [dict(text=text, x=sum(dom) / 2, y=rows[1], xref="paper", yref="paper", xanchor="center",
                   yanchor="bottom", showarrow=False, font=dict(size=16))
              for text, dom, rows in (("all values", left, top), (bars, right, low))]
    layout = dict(
        xaxis=dict(domain=left, anchor="y"), yaxis=dict(domain=top, anchor="x", title=dict(text="value")),
        xaxis2=dict(domain=right, anchor="y2", title=dict(text="token"),
                    **axis_ticks(tokens if tokens is not None else labels, len(xs), angle=-45,
                                 axis_px=(right[1] - right[0]) * plot_width_px(width_px, colorbar=False))),
        yaxis2=dict(domain=low, anchor="x2", title=dict(text="std over dimensions")),
        annotations=titles, barmode="group",
        # The legend sits at the figure's bottom edge, under the axis titles: fit_margins leaves it room, so
        # plotly need not draw the figure a second time to make some (as for a legend placed below the plots).
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"), showlegend=legend)
    return styled_figure(data, layout, f"Scaling by √d_model = √{d_model} ≈ {factor:.1f}",
                         height=720 if theme().figure_px else 480,
                         subplot_titles=True)


def box_of(values: np.ndarray, name: str, colour: str) -> dict:
    """A box of all ``values`` drawn from its five numbers, computed here as Plotly computes them from the values
    (quartiles by its default linear method, NumPy's "hazen"; whiskers to the furthest values within 1.5
    interquartile ranges of the box). The browser gets five numbers instead of every value (s × d of them), which
    it would otherwise receive, sort and measure on a page's first visit."""
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    v = v[np.isfinite(v)]
    if not v.size:
        v = np.zeros(1)
    q1, med, q3 = np.percentile(v, [25, 50, 75], method="hazen").tolist()
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    fences = [min(q1, float(v[v >= low].min())), max(q3, float(v[v <= high].max()))]
    return dict(type="box", x=[name], name=name, q1=[q1], median=[med], q3=[q3], lowerfence=fences[:1],
                upperfence=fences[1:], marker=dict(color=colour), boxpoints=False, showlegend=False, xaxis="x",
                yaxis="y")


def embedding_stages_figure(token_emb: np.ndarray, scaled: np.ndarray, positional: np.ndarray,
                            total: np.ndarray, tokens: Sequence[str],
                            shared_scale: bool = True) -> go.Figure:
    """Four panels (each (s, d), rows = tokens): embedding, ×√d_model, positional, sum.

    With ``shared_scale`` all panels use one symmetric colour range, so the
    relative sizes of embedding and positional encoding are visible (which is
    the point of the √d_model factor); otherwise each panel has its own range.
    """
    titles = ("token embedding", "× √d_model", "+ positional encoding", "= input to layer 1")
    return stages_figure(titles, [token_emb, scaled, positional, total], tokens, shared_scale)


POSITION_STAGE = {"sinusoidal": "+ positional encoding", "learned": "+ learned position vector"}
NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm"}


def embedding_stages(emb: dict[str, np.ndarray], scaled: bool = True, positions: str = "sinusoidal",
                     norm: str = "layer") -> tuple[tuple[str, ...], list[np.ndarray]]:
    """(panel titles, (s, d) arrays) of the stages a model has, from a trace's embedding dict ``emb``: the token
    rows; × √d_model only where the model ``scaled`` them; the position vectors only where it added some (a trace
    of a model with relative positions has none); the sum and then its ``norm`` where the model has an embedding
    norm (``emb`` holds "sum"); what enters layer 1 last."""
    stages = [("token embedding", emb["token"])]
    if scaled:
        stages.append(("× √d_model", emb["scaled"]))
    if "positional" in emb:
        stages.append((POSITION_STAGE.get(positions, "+ position vector"), emb["positional"]))
    if "sum" in emb:
        stages += [("= sum", emb["sum"]), (f"{NORM_NAMES.get(norm, norm)} = input to layer 1", emb["total"])]
    else:
        stages.append(("= input to layer 1", emb["total"]))
    return tuple(t for t, _ in stages), [a for _, a in stages]


def stages_figure(titles: Sequence[str], stages: Sequence[np.ndarray], tokens: Sequence[str],
                  shared_scale: bool = True) -> go.Figure:
    """One panel per stage (each (s, d), rows = tokens), titled ``titles``; ``shared_scale``: one symmetric colour
    range for all, so the stages' sizes compare (as :func:`embedding_stages_figure`)."""
    arrays = [np.asarray(m, dtype=np.float32) for m in stages]
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"all {len(arrays)} stages must have the same (s, d) shape, got {sorted(shapes)}")
    if len(titles) != len(arrays):
        raise ValueError(f"{len(titles)} titles for {len(arrays)} stages")
    lim = _sym_limit(*arrays)
    return facet_heatmaps(np.stack(arrays), list(titles), tokens, None, row_title="token ↓",
                          col_title="dimension →", zmin=-lim, zmax=lim, colorscale=SIGNED_SCALE,
                          value_name="value", row_name="token", col_name="dim", max_cols=max(4, len(arrays)),
                          fmt=".3f", shared_scale=shared_scale, as_shown=True,
                          # presenter mode: the panels' titles tell the stages; the rows get the title's line
                          title=None if theme().height_px else "From token to layer input")


PCA_FIT_ROWS = 60_000  # a larger table's principal axes are fitted on a sample (opus-mt's 58,101 rows are not)
PCA_SAMPLE = 10_000  # evenly spaced rows: the scatter of all 256,206 rows of 1024 took most of a minute


def _pca_2d_sampled(m: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """pca_2d of rows `keep` of a table too large to scatter whole on a page's first visit: the axes of PCA_SAMPLE
    evenly spaced kept rows (their scatter in float32, the eigenvectors in float64), every kept row projected on
    them (float32). The table itself is never copied (NLLB's is 1 GB)."""
    dropped = np.ones(m.shape[0], dtype=bool)
    dropped[keep] = False
    mean = (m.sum(axis=0, dtype=np.float64) - m[dropped].sum(axis=0, dtype=np.float64)) / len(keep)  # (d,)
    fit = m[keep[np.linspace(0, len(keep) - 1, PCA_SAMPLE).astype(np.int64)]] - mean.astype(np.float32)
    _, vecs = np.linalg.eigh((fit.T @ fit).astype(np.float64))  # (d, d)
    comps = vecs[:, ::-1][:, :2].T
    comps = comps * np.sign(comps[np.arange(2), np.abs(comps).argmax(axis=1)])[:, None]
    w = np.ascontiguousarray(comps.T, dtype=np.float32)  # (d, 2)
    coords = m.astype(np.float32, copy=False) @ w  # (V, 2): every row, then the kept ones (a small copy)
    return (coords[keep] - mean.astype(np.float32) @ w).astype(np.float32)  # centred


def pca_2d(matrix: np.ndarray, exclude: Sequence[int] = ()) -> np.ndarray:
    """Project the rows of ``matrix`` (V, d) not in ``exclude`` onto their first two principal components ->
    (V - len(set(exclude)), 2) float32, in row order.

    Centred; column 0 has the largest variance. The components are the top eigenvectors of the (d, d) scatter
    matrix, the right singular vectors an SVD of the centred (V, d) matrix would give: for an 8,000 × 256 table
    that is a tenth of an SVD's time, and the map is drawn on a page's first visit. Signs are fixed so the
    largest-magnitude loading of each component is positive (stable plots). ``exclude`` (e.g. the special tokens:
    <pad> is all zeros and would pull the map) is left out without copying a large table.
    """
    m = np.asarray(matrix)
    kept = np.ones(m.shape[0] if m.ndim == 2 else 0, dtype=bool)
    kept[np.asarray(list(exclude), dtype=np.int64)] = False  # a mask, not setdiff1d: no sort of 256,206 ids
    keep = np.flatnonzero(kept)
    if m.ndim != 2 or len(keep) < 2:
        raise ValueError(f"pca_2d expects (V, d) with at least 2 rows kept, got {m.shape} less {len(exclude)}")
    if len(keep) > PCA_FIT_ROWS:  # NLLB's 256,206 × 1024: the axes from a sample, every row projected on them
        return _pca_2d_sampled(m, keep)
    m = m[keep].astype(np.float64)
    centred = m - m.mean(axis=0, keepdims=True)
    _, vecs = np.linalg.eigh(centred.T @ centred)  # (d, d), eigenvalues ascending
    comps = vecs[:, ::-1][:, :2].T  # (2, d): the two of largest variance, largest first
    signs = np.sign(comps[np.arange(comps.shape[0]), np.abs(comps).argmax(axis=1)])
    comps = comps * signs[:, None]
    coords = centred @ comps.T  # (V, 2)
    if coords.shape[1] < 2:
        coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
    return coords.astype(np.float32)


def vocab_map_figure(coords: np.ndarray, vocab_tokens: Sequence[str],
                     highlight_idx: Sequence[int] = (),
                     highlight_labels: Sequence[str] | None = None,
                     title: str = "Vocabulary embeddings (PCA, 2-D)", *,
                     n_dots: int = 1000, bins: tuple[int, int] = (120, 60)) -> go.Figure:
    """The whole vocabulary ``coords`` (V, 2) as a density, its first ``n_dots`` entries as dots.

    Every point is counted into a ``bins`` (x, y) grid drawn as grey shading (hover: how many
    entries fall in that cell), so a 58k-piece vocabulary costs the browser no more than a 6k one;
    the first ``n_dots`` entries (for a vocabulary listed most frequent first: the most frequent
    words) are drawn as dots that name themselves on hover. Points ``highlight_idx`` (e.g. the
    sentence's token ids) are always drawn large and labelled with ``highlight_labels``
    (default: their vocabulary tokens). Why not one WebGL scatter of every point: Chromium without a
    GPU draws that several times slower than the density and dots (measured by a script since removed: `git show
    8180d3c:benchmarks/bench_vocab_map.py`).
    """
    c = np.asarray(coords, dtype=np.float32)
    if c.ndim != 2 or c.shape[1] != 2 or c.shape[0] != len(vocab_tokens):
        raise ValueError(f"coords must be (V, 2) with V = len(vocab_tokens) = "
                         f"{len(vocab_tokens)}, got {c.shape}")
    idx = np.asarray(list(highlight_idx), dtype=np.int64)
    labels = (list(highlight_labels) if highlight_labels is not None
              else [vocab_tokens[i] for i in idx])
    if len(labels) != len(idx):
        raise ValueError(f"{len(labels)} highlight labels for {len(idx)} highlighted points")
    data = []
    if len(c):
        counts, xe, ye = np.histogram2d(c[:, 0], c[:, 1], bins=bins)  # (bx, by)
        shown = np.where(counts > 0, counts, np.nan).T.astype(np.float32)  # (by, bx): rows are y; empty cells clear
        data.append(dict(
            type="heatmap", z=shown, x=(xe[:-1] + xe[1:]) / 2, y=(ye[:-1] + ye[1:]) / 2, name="all entries",
            colorscale=[[0, "rgb(225,225,225)"], [1, "rgb(90,90,90)"]], showscale=False, hoverongaps=False,
            hovertemplate="%{z:.0f} vocabulary entries here<extra></extra>"))
    n = min(n_dots, len(c))
    if n:
        # Positions to 1/5,000 of the map's span (a fraction of a pixel): the hover names the entry, not its
        # coordinates, and the browser gets a third of the text of every float32 digit.
        span = float(np.ptp(c[:n])) or 1.0
        at = np.round(c[:n].astype(np.float64), max(0, math.ceil(math.log10(5000 / span))))
        data.append(dict(
            type="scatter", x=at[:, 0], y=at[:, 1], mode="markers", name=f"first {n:,} entries",
            marker=dict(size=4, color="rgba(60,60,60,0.45)"),
            text=escape_tokens(vocab_tokens[:n]), hovertemplate="%{text}<extra></extra>"))
    if len(idx):
        names = escape_tokens(labels)
        data.append(dict(
            type="scatter", x=c[idx, 0], y=c[idx, 1], mode="markers+text", name="sentence",
            text=spaced_labels(c[idx], names, c, 16, (int(figure_width(PAGE_WIDTH_PX)) - 200,
                                                      (fit_height(600) or 600) - 190)),
            hovertext=names, textposition="top center",
            textfont=dict(size=16), marker=dict(size=13, color="#d62728", line=dict(width=1, color="white")),
            hovertemplate="%{hovertext}<extra></extra>"))
    layout = dict(xaxis=dict(title=dict(text="principal component 1"), tickfont=dict(size=theme().tick),
                             showgrid=False),
                  yaxis=dict(title=dict(text="principal component 2"), tickfont=dict(size=theme().tick),
                             showgrid=False),
                  showlegend=False)
    return styled_figure(data, layout, title, height=600)


def spaced_labels(points: np.ndarray, labels: Sequence[str], extent: np.ndarray, font: int,
                  plot_px: tuple[int, int] = (1100, 440)) -> list[str]:
    """The labels of ``points`` (n, 2) that can be written above their points without touching one written before
    (in order; a repeated label once), on a plot about ``plot_px`` (width, height) showing ``extent`` (m, 2); the
    others are "" (each point still names itself on hover). A sentence's words crowd where their vectors do."""
    t = theme()
    font = max(font, t.min_font)
    lo, span = extent.min(0), np.ptp(extent, axis=0)
    span = np.where(span > 0, span, 1.0)
    xy = (points - lo) / span * np.asarray(plot_px)  # (n, 2) pixels, y up
    placed, seen, out = [], set(), []
    for (x, y), label in zip(xy, labels):
        w, h = 0.6 * font * max(1, visible_len(label)), 1.25 * font
        box = (x - w / 2, y + 6, x + w / 2, y + 6 + h)
        free = label not in seen and all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1]
                                          for b in placed)
        out.append(label if free else "")
        if free:
            placed.append(box)
            seen.add(label)
    return out


def nearest_neighbours(matrix: np.ndarray, vocab_tokens: Sequence[str],
                       query_idx: Sequence[int], k: int = 5,
                       exclude_idx: Sequence[int] = ()) -> pd.DataFrame:
    """:func:`neighbour_rows` as a DataFrame."""
    import pandas as pd  # where a table is made: importing viz/ needs no pandas
    rows = neighbour_rows(matrix, vocab_tokens, query_idx, k, exclude_idx)
    k = min(k, len(vocab_tokens) - 1)
    return pd.DataFrame(rows, columns=["token"] + [f"neighbour {i}" for i in range(1, k + 1)])


def neighbour_rows(matrix: np.ndarray, vocab_tokens: Sequence[str], query_idx: Sequence[int], k: int = 5,
                   exclude_idx: Sequence[int] = ()) -> list[dict]:
    """Cosine nearest neighbours of rows ``query_idx`` of ``matrix`` (V, d).

    Returns one row per query token; keys ``token``, then ``neighbour 1``..
    ``neighbour k`` holding strings ``"word (0.83)"`` (cosine similarity, 2
    decimals), best first. The token itself and ``exclude_idx`` (e.g. padding
    and other special tokens) are never listed. Text is plain (not escaped).
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.shape[0] != len(vocab_tokens):
        raise ValueError(f"matrix has {m.shape[0]} rows but {len(vocab_tokens)} vocab tokens")
    # The norms once, not a normalised copy of the table (NLLB's is 1 GB): the cosine is the dot product over them.
    norms = np.maximum(np.sqrt(np.einsum("ij,ij->i", m, m)), 1e-8)  # (V,) (np.linalg.norm's axis form is far slower)
    qi = np.asarray(list(query_idx), dtype=np.int64)
    sims = (m[qi] @ m.T) / (norms[qi, None] * norms[None, :])  # (queries, V)
    sims[np.arange(len(qi)), qi] = -np.inf
    if len(exclude_idx):
        sims[:, np.asarray(list(exclude_idx), dtype=np.int64)] = -np.inf
    k = min(k, m.shape[0] - 1)
    rows = []
    for r, i in enumerate(qi):
        # the k best as a stable sort of the whole row would order them (ties: lower id first), without that sort
        floor = np.partition(sims[r], len(sims[r]) - k)[len(sims[r]) - k] if k else np.inf
        near = np.flatnonzero(sims[r] >= floor)
        order = near[np.argsort(-sims[r][near], kind="stable")][:k]
        row = {"token": str(vocab_tokens[i])}
        for rank, j in enumerate(order, start=1):
            row[f"neighbour {rank}"] = (f"{vocab_tokens[j]} ({sims[r, j]:.2f})"
                                        if np.isfinite(sims[r, j]) else "")
        rows.append(row)
    return rows

