"""Attention heatmaps: one head, all heads of a layer, and a layer × head overview.

Shape letters (see :mod:`viz`): ``L`` layers, ``h`` heads, ``i`` query positions,
``j`` key positions. ``kind`` is one of ``"enc_self"`` (source→source),
``"dec_self"`` (target→target) and ``"cross"`` (target queries over source
keys). Masks are bool with True = may attend.
Heads and layers are shown 1-based ("layer 1", "head 1") for humans; the
``layer`` argument is the 0-based index into the model's trace.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.alt import grid_alt, plain, with_alt
from viz.heatmap import as_mask, facet_heatmaps, heatmap
from viz.kinds import KIND_NAMES, axis_titles
from viz.layout import PAGE_WIDTH_PX, styled_figure, title_wrap_chars
from viz.scales import PROB_SCALE, resolve_scale
from viz.text import PROB_D3, fmt_prob, fmt_share
from viz.theme import theme


def weight_zmax(zmax: float | None) -> float:
    """The top of the weights' colour scale: ``None`` means the full probability range 0..1."""
    return 1.0 if zmax is None else float(zmax)


def weight_colorbar_title(zmax: float) -> str:
    """Say on the colourbar when colours saturate, so nobody misreads the scale."""
    if zmax >= 1.0:
        return "weight"
    z = fmt_prob(zmax)
    return f"weight<br>colours saturate<br>at {z} (values<br>above drawn<br>as {z})"


def scale_words(measure: str, zmax: float) -> tuple[str, dict]:
    """(colour bar title, its ticks) of a figure of ``measure``: the weights say when colours saturate; another
    measure (a value norm, an ALTI+ share) is named as it is, its scale 0..``zmax``."""
    if measure == "weight":
        return weight_colorbar_title(zmax), weight_colorbar_ticks(zmax)
    return measure, {}


def weight_colorbar_ticks(zmax: float) -> dict:
    """Colourbar ticks 0..zmax; the top one reads "≥ zmax" when colours saturate."""
    if zmax >= 1.0:
        return {}
    vals = np.linspace(0.0, zmax, 5).tolist()
    return dict(tickmode="array", tickvals=vals,
                ticktext=[fmt_prob(v) for v in vals[:-1]] + [f"≥ {fmt_prob(zmax)}"])


def row_sums(probs: np.ndarray) -> np.ndarray:
    """Sum over keys: (..., i, j) -> (..., i) float32; ~1 everywhere after softmax."""
    return np.asarray(probs, dtype=np.float32).sum(axis=-1)


def rows_sum_to_one(probs: np.ndarray, atol: float = 1e-3) -> bool:
    """True when every query row of ``probs`` (..., i, j) sums to 1 within ``atol``."""
    return bool(np.allclose(row_sums(probs), 1.0, atol=atol))


def sink_key(probs: np.ndarray) -> int:
    """Key position that receives the most attention on average ((..., i, j) -> int).

    That column is the usual "attention sink" (often the first token or the
    final "." / end token) that washes out the colour scale.
    """
    p = np.asarray(probs, dtype=np.float32)
    return int(np.nanmean(p.reshape(-1, p.shape[-1]), axis=0).argmax())


def _unmasked(probs: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """(..., i, j) float32 copy with masked cells (mask False, NaN, or exactly 0) as NaN."""
    p = np.array(probs, dtype=np.float32)
    if mask is not None:
        p[..., ~as_mask(mask, p.shape[-2], p.shape[-1])] = np.nan
    p[p == 0] = np.nan  # softmax of -inf: a masked cell, never a real weight
    return p


def robust_zmax(probs: np.ndarray, ignore_key: int | None = None, floor: float = 0.05,
                quantile: float = 0.95, mask: np.ndarray | None = None) -> float:
    """Colour maximum that makes the weaker weights of ``probs`` (..., i, j) visible.

    The ``quantile`` (95th percentile) of the "secondary" weights: every
    unmasked weight except each row's largest one and the key column
    ``ignore_key`` (a sink, see :func:`sink_key`; usually the peak of most
    rows anyway), at least ``floor`` and at most 1. Larger weights saturate;
    say so with :func:`rescale_note`. Taking out each row's peak matters for
    sharp attention (cross-attention alignments): there the peaks would
    otherwise set the maximum to about 1 again and rescaling would change
    nothing. Returns 1.0 when no secondary weight exists
    (every row puts all its weight on one key).
    """
    p = _unmasked(probs, mask)
    if p.size == 0:
        return 1.0
    rows = p.reshape(-1, p.shape[-1])  # (rows, j)
    rows = rows[~np.all(np.isnan(rows), axis=1)]
    if rows.size:
        rows[np.arange(len(rows)), np.nanargmax(rows, axis=1)] = np.nan  # each row's peak
    if ignore_key is not None:
        rows[:, ignore_key] = np.nan
    rest = rows[~np.isnan(rows)]
    if rest.size == 0:
        return 1.0
    return float(np.clip(np.quantile(rest, quantile), floor, 1.0))


def saturated_share(probs: np.ndarray, zmax: float,
                    mask: np.ndarray | None = None) -> tuple[int, int]:
    """(cells above ``zmax``, unmasked cells) of ``probs`` (..., i, j)."""
    p = _unmasked(probs, mask)
    n = int((~np.isnan(p)).sum())
    return int((np.nan_to_num(p, nan=0.0) > zmax).sum()), n


def rescale_note(probs: np.ndarray, zmax: float | None, mask: np.ndarray | None = None) -> str:
    """One sentence saying what a colour maximum ``zmax`` does to ``probs`` (..., i, j).

    E.g. "Colours saturate at 0.120: 38 of 420 weights (9.0 %) are larger and are
    drawn as 0.120, so the weaker ones become visible."
    """
    zmax = weight_zmax(zmax)
    if zmax >= 1.0:
        return "Colours span the full range 0 to 1: no weight saturates."
    above, n = saturated_share(probs, zmax, mask)
    z = fmt_prob(zmax)
    return (f"Colours saturate at {z}: {above:,} of {n:,} weights ({fmt_share(above, n)}) are "
            f"larger and are drawn as {z}, so the weaker ones become visible.")


def attention_figure(probs: np.ndarray, query_tokens: Sequence[str],
                     key_tokens: Sequence[str], kind: str, mask: np.ndarray | None = None,
                     zmax: float | None = None, title: str | None = None, *,
                     src_lang: str | None = None, tgt_lang: str | None = None,
                     width_px: int | None = None, keep_rows: Sequence[int] = (),
                     keep_cols: Sequence[int] = (), key_note: str | None = None,
                     measure: str = "weight") -> go.Figure:
    """Heatmap of one head's attention ``probs`` (i, j) with axis titles for ``kind``; ``measure``: what the values
    are, when not the weights ("value norm ‖α·f‖", "ALTI+ share"; their colour bar and hover say so).

    ``mask`` (i, j) or broadcastable (e.g. (j,) key padding), True = may attend.
    ``zmax=None`` means 1.0; a smaller value saturates (see :func:`robust_zmax`).
    ``src_lang``/``tgt_lang`` name the languages in the axis titles;
    ``width_px`` is the width the page gives the figure (key label thinning); the labels of the queries
    ``keep_rows`` and keys ``keep_cols`` (a caller's highlighted cells) are never thinned away. ``key_note``: the
    title said after the keys' axis title instead of above the plot (a presenter figure whose rows need its line).
    """
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    if key_note:
        k_title, title = f"{k_title} · {key_note}", ""
    zmax = weight_zmax(zmax)
    bar_title, ticks = scale_words(measure, zmax)
    return heatmap(probs, query_tokens, key_tokens, row_title=q_title, col_title=k_title,
                   mask=mask, zmin=0.0, zmax=zmax, colorscale=PROB_SCALE,
                   title=KIND_NAMES[kind] if title is None else title, value_name=measure,
                   colorbar_title=bar_title, colorbar=ticks,
                   width_px=width_px, keep_rows=keep_rows, keep_cols=keep_cols)


def heads_figure(probs: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str],
                 kind: str, layer: int, mask: np.ndarray | None = None,
                 zmax: float | None = None, *, src_lang: str | None = None, tgt_lang: str | None = None,
                 width_px: int | None = None, heads: Sequence[int] | None = None,
                 measure: str = "weight", share: int = 1) -> go.Figure:
    """All heads of one layer as ONE faceted figure; ``probs`` (h, i, j) (or another ``measure``, as in
    :func:`attention_figure`).

    Panels are titled "head 1".."head h" (1-based); ``layer`` is the 0-based
    index and is shown as ``layer + 1``. One shared colourbar, 0..zmax. ``heads`` (0-based): only these heads
    (presenter mode shows as many as label every key), the title saying which of the h. ``share`` > 1: grouped-query
    attention, every ``share`` neighbouring query heads read one key/value head, named on each panel ("kv 1").
    """
    probs = np.asarray(probs, dtype=np.float32)
    if probs.ndim != 3:
        raise ValueError(f"heads_figure expects probs of shape (h, i, j), got {probs.shape}")
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    zmax = weight_zmax(zmax)
    shown = list(range(probs.shape[0])) if heads is None else list(heads)
    what = "all heads" if len(shown) == probs.shape[0] else f"{head_range(shown)} of {probs.shape[0]}"
    titles = [f"head {h + 1}" + (f" · kv {h // share + 1}" if share > 1 else "") for h in shown]
    if share > 1:
        what += f"; each {share} share one key/value head (kv)"
    return facet_heatmaps(probs[shown], titles, query_tokens, key_tokens, row_title=q_title,
                          col_title=k_title, mask=mask, zmin=0.0, zmax=zmax,
                          colorscale=PROB_SCALE, value_name=measure,
                          title=_layer_title(kind, layer, what),
                          colorbar_title=scale_words(measure, zmax)[0], colorbar=scale_words(measure, zmax)[1],
                          width_px=width_px)


def head_range(heads: Sequence[int]) -> str:
    """0-based heads in words, 1-based: "head 3", "heads 1–2", "heads 1, 3"."""
    numbers = [h + 1 for h in heads]
    if len(numbers) == 1:
        return f"head {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"heads {numbers[0]}–{numbers[-1]}"
    return "heads " + ", ".join(map(str, numbers))


def _layer_title(kind: str, layer: int | None, what: str) -> str:
    """The title of a figure of several heads: the kind on its own line, or in presenter mode (whose controls
    name the kind right above the figure) one line with the kind's short name, so the plots keep the height."""
    where = f"layer {layer + 1}, {what}" if layer is not None else what
    if theme().height_px:
        return f"{KIND_NAMES[kind].split(' (')[0]}, {where}"
    return f"{KIND_NAMES[kind]}<br>{where}"


def overview_figure(probs: np.ndarray, kind: str, zmax: float | None = None, *,
                    src_lang: str | None = None, tgt_lang: str | None = None, measure: str = "weight",
                    columns: Sequence[str] | None = None) -> go.Figure:
    """Thumbnail grid of every layer × head; ``probs`` (L, h, i, j) (or another ``measure``, as in
    :func:`attention_figure`; ``columns``: the columns' names where they are not heads, e.g. a layer's ALTI+).

    Rows are layers, columns heads (both labelled 1-based), no tick labels; hover gives layer, head, query/key
    positions and the weight. One figure, one shared 0..zmax colour axis.

    Drawn as ONE heatmap: the thumbnails side by side with empty (NaN) cells between them, on category axes
    whose labels name each row (layer, query) and each column (head, key), so hover needs no per-cell labels.
    Chromium drew the earlier grid of L × h subplots 2× (3 × 4 heads) to 5× (6 × 8) slower: each subplot
    has its own axes, clip paths and image.
    """
    probs = np.asarray(probs, dtype=np.float32)
    if probs.ndim != 4:
        raise ValueError(f"overview_figure expects probs of shape (L, h, i, j), got {probs.shape}")
    n_layers, n_heads, n_q, n_k = probs.shape
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    zmax = weight_zmax(zmax)
    # Gaps between thumbnails, in cells: about 6 % of a thumbnail, at least one cell.
    gap_k, gap_q = max(1, round(0.06 * n_k)), max(1, round(0.06 * n_q))
    step_k, step_q = n_k + gap_k, n_q + gap_q
    width, height = n_heads * step_k - gap_k, n_layers * step_q - gap_q
    z = np.full((height, width), np.nan, dtype=np.float32)  # (L·i + gaps, h·j + gaps)
    for layer in range(n_layers):
        for h in range(n_heads):
            z[layer * step_q: layer * step_q + n_q, h * step_k: h * step_k + n_k] = probs[layer, h]
    # One label per column and row, unique (repeated category names would merge columns); gaps have no hover.
    names = list(columns) if columns is not None else [f"head {h + 1}" for h in range(n_heads)]
    cols = [f"{names[c // step_k]}, key {c % step_k}" if c % step_k < n_k else f"gap {c}" for c in range(width)]
    rows = [f"layer {r // step_q + 1}, query {r % step_q}" if r % step_q < n_q else f"gap {r}" for r in range(height)]
    data = [dict(type="heatmap", z=z, x=cols, y=rows, coloraxis="coloraxis", hoverongaps=False, name=measure,
                 hovertemplate=f"%{{y}}<br>%{{x}}<br>{measure} %{{z:{PROB_D3}}}<extra></extra>")]
    hidden = dict(type="category", showticklabels=False, ticks="", showgrid=False, zeroline=False)
    font = dict(size=15)
    # Titles in axis-domain fractions: the x axis spans cells -0.5 .. width - 0.5, the y axis runs top down.
    notes = [dict(text=names[h], x=(h * step_k + n_k / 2) / width, y=1, xref="x domain", yref="y domain",
                  xanchor="center", yanchor="bottom", showarrow=False, font=font) for h in range(n_heads)]
    notes += [dict(text=f"layer {layer + 1}", x=1, y=1 - (layer * step_q + n_q / 2) / height, xref="x domain",
                   yref="y domain", xanchor="left", yanchor="middle", xshift=4, textangle=90, showarrow=False,
                   font=font) for layer in range(n_layers)]
    # One pair of axis titles for the whole grid: every thumbnail has the same axes.
    notes += [dict(text=k_title, x=0.5, y=0, xref="paper", yref="paper", yanchor="top", yshift=-8, showarrow=False,
                   font=dict(size=theme().base)),
              dict(text=q_title, x=0, y=0.5, xref="paper", yref="paper", xanchor="right", xshift=-8, textangle=-90,
                   showarrow=False, font=dict(size=theme().base))]
    layout = dict(
        xaxis=dict(hidden, range=[-0.5, width - 0.5]), yaxis=dict(hidden, range=[height - 0.5, -0.5]),
        annotations=notes,
        coloraxis=dict(colorscale=resolve_scale(PROB_SCALE), cmin=0.0, cmax=zmax, colorbar=dict(
            title=dict(text=scale_words(measure, zmax)[0]), tickfont=dict(size=theme().tick),
            **scale_words(measure, zmax)[1])))
    title = _layer_title(kind, None, "every layer × head")
    fig = styled_figure(data, layout, title, height=190 + 115 * n_layers, subplot_titles=True,
                        # a phone's colour bar is below (viz.phone): the layers' names need their own room
                        margin=dict(l=45, b=45, **({"r": 40} if theme().figure_px else {})),
                        wrap_chars=title_wrap_chars(title, PAGE_WIDTH_PX))
    # One heatmap with gaps: read cell by cell it would mix the thumbnails, so it says what each one shows.
    return with_alt(fig, grid_alt(probs, plain(title)))
