"""Inside one attention head: Q, K, V, scores, scaling, position bias (T5), mask, softmax, dropout, output.

Shape letters (see :mod:`viz`): ``i`` query positions, ``j`` key positions, ``d_k``
per-head size. Masks are bool (i, j) with True = may attend.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import MASK_TRACE_NAME, as_mask, heatmap
from viz.kinds import axis_titles, kind_sides
from viz.layout import FIGURE_WIDTH_PX, PAGE_WIDTH_PX, enforce_min_font
from viz.panels import panel_row
from viz.scales import PROB_SCALE, SIGNED_SCALE
from viz.text import fmt_prob
from viz.theme import theme

# Widths the Inside-one-head page gives its figures (three, two or one per row);
# they only decide how many key labels fit.
THIRD_WIDTH_PX, HALF_WIDTH_PX = PAGE_WIDTH_PX // 3 - 10, PAGE_WIDTH_PX // 2 - 8
# Row-sum panel: bars in the first part, their labels right of the bars and of
# the reference line, so a label never covers the line.
LABEL_GAP = 1.06  # labels start at this × max(largest sum, reference line)
RANGE_PAD = 2.0  # the panel's x range ends at this × the same

# Scores at or below this are a model's masked_fill value (-1e9, -inf), not data.
MASKED_FILL_BELOW = -1e4


def _clean(scores: np.ndarray) -> np.ndarray:
    """float32 copy with masked_fill values (-inf, -1e9) replaced by NaN."""
    s = np.array(scores, dtype=np.float32)
    s[~np.isfinite(s) | (s <= MASKED_FILL_BELOW)] = np.nan
    return s


def _limit(m: np.ndarray) -> float:
    """Largest |value| ignoring NaN (1.0 for an all-zero or all-NaN array)."""
    if m.size == 0 or np.all(np.isnan(m)):
        return 1.0
    return float(np.nanmax(np.abs(m))) or 1.0


def matrix_figure(m: np.ndarray, row_tokens: Sequence[str] | None,
                  col_tokens: Sequence[str] | None, title: str, row_title: str,
                  col_title: str, signed: bool = True, mask: np.ndarray | None = None,
                  value_name: str = "value", row_name: str = "row", col_name: str = "col",
                  zmin: float | None = None, zmax: float | None = None, *,
                  width_px: int | None = None) -> go.Figure:
    """Heatmap of any matrix ``m`` (rows, cols); rows top to bottom, columns left to right.

    ``signed`` uses a diverging scale centred at 0 with a symmetric range
    (±max|m| unless ``zmin``/``zmax`` are given); otherwise 0..max (or given).
    ``col_tokens=None`` numbers the columns (e.g. dimensions of d_k).
    """
    m = np.asarray(m, dtype=np.float32)
    if signed:
        lim = _limit(m)
        zmin, zmax = (-lim if zmin is None else zmin), (lim if zmax is None else zmax)
        scale = SIGNED_SCALE
    else:
        zmin = 0.0 if zmin is None else zmin
        zmax = _limit(m) if zmax is None else zmax
        scale = PROB_SCALE
    return heatmap(m, row_tokens, col_tokens, row_title=row_title, col_title=col_title, mask=mask,
                   zmin=zmin, zmax=zmax, colorscale=scale, title=title, value_name=value_name,
                   row_name=row_name, col_name=col_name, fmt=".3f", width_px=width_px)


# Q, K and V's titles: on a laptop, and in presenter mode (one line a third of a projector wide, d_k named in it
# rather than under the dimensions' numbers: the rows keep that line's height).
QKV_TITLES = {False: ("Q: one query vector per token", "K: one key vector per token", "V: one value vector per token"),
              True: ("Q: queries × d_k", "K: keys × d_k", "V: values × d_k")}
ROTATED_TITLES = {False: ("Q, rotated by its position: one query per token", "K, rotated by its position: one key "
                          "per token"), True: ("Q rotated × d_k", "K rotated × d_k")}


def vectors_figure(m: np.ndarray, tokens: Sequence[str], side: str, role: str,
                   title: str, width_px: int | None = None) -> go.Figure:
    """Per-token vectors ``m`` (i, d_k) or (j, d_k) such as Q, K, V or the output; rows = tokens.

    ``role`` is "query" or "key" (which token axis the rows belong to) and
    ``side`` its language label, e.g. "EN, decoder input". ``width_px``: the width the page gives the figure
    (its title wraps to fit).
    """
    return matrix_figure(m, tokens, None, title=title, row_title=f"{role} token ({side}) ↓",
                         col_title="" if theme().height_px else "dimension of d_k →", row_name=role, col_name="dim",
                         width_px=width_px)


def with_row_sums(fig: go.Figure, sums: np.ndarray, expected: float | None = 1.0) -> go.Figure:
    """Add a narrow bar panel of per-row sums (i,) to the right of a heatmap figure.

    The bars share the heatmap's y axis, so bar i sits next to query row i.
    ``expected`` draws a dashed reference line (1.0 after softmax). Each sum is
    written right of both the longest bar and the line (a text trace named
    "row sum labels", anchored "middle right"), so no label covers the line.
    """
    sums = np.asarray(sums, dtype=np.float32)
    biggest = float(np.nanmax(sums)) if sums.size and not np.all(np.isnan(sums)) else 0.0
    right = max(biggest, expected or 0.0) or 1.0
    ticks = [0.0, float(expected)] if expected else [0.0, round(right, 2)]
    if theme().height_px or theme().figure_px:  # large type, or a phone: the "0" would sit on the last key's
        ticks = ticks[1:]  # slanted label, which ends there
    split = 0.6 if theme().figure_px else 0.74  # a phone's bars and their sums need a larger share of 356 px
    fig.update_layout(showlegend=False, xaxis=dict(domain=[0.0, split]),
                      xaxis2=dict(domain=[split + 0.03, 1.0], anchor="y", title=dict(text="row sum"),
                                  range=[0, right * RANGE_PAD], tickmode="array", tickvals=ticks,
                                  ticktext=[f"{t:g}" for t in ticks],
                                  tickfont=dict(size=theme().tick), showgrid=True))
    ys = fig.data[0].y  # the heatmap's rows: its category names on a token axis, else positions
    ys = list(ys) if ys is not None and len(ys) == len(sums) else np.arange(len(sums), dtype=np.int32)
    fig.add_trace(go.Bar(x=sums, y=ys, orientation="h", xaxis="x2", yaxis="y", name="row sum",
                         marker_color=theme().highlight_colour,
                         customdata=np.asarray([fmt_prob(v) for v in sums], dtype=object),
                         hovertemplate="row %{y}: sum %{customdata}<extra></extra>"))
    # A sum is written beside the rows whose tokens are labelled (the rest are too close for a label of their own);
    # not where the rows are a window (viz.rows): a label beside a row dragged out of view would still be drawn.
    y_axis = fig.layout.yaxis
    labelled = None if y_axis.tickvals is None else {int(v) for v in y_axis.tickvals}
    if y_axis.autorange is not False:
        fig.add_trace(go.Scatter(x=np.full(len(sums), right * LABEL_GAP, dtype=np.float32), y=ys,
                                 mode="text", text=[fmt_prob(v) if labelled is None or i in labelled else ""
                                                    for i, v in enumerate(sums)],
                                 textposition="middle right", textfont=dict(size=12),
                                 xaxis="x2", yaxis="y", name="row sum labels", hoverinfo="skip",
                                 cliponaxis=False))
    if expected is not None:
        fig.add_shape(type="line", x0=expected, x1=expected, y0=0, y1=1, xref="x2",
                      yref="y domain", line=dict(dash="dash", color="#333333"))
    return enforce_min_font(fig)


def probs_figure(probs: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str],
                 kind: str, mask: np.ndarray | None = None, title: str | None = None,
                 zmax: float | None = None, show_row_sums: bool = True, *,
                 src_lang: str | None = None, tgt_lang: str | None = None,
                 width_px: int | None = None) -> go.Figure:
    """Softmax weights (i, j) on the fixed 0..1 scale, with a row-sum bar panel."""
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    p = np.asarray(probs, dtype=np.float32)
    sums = p.sum(axis=-1)
    ok = bool(np.allclose(sums, 1.0, atol=1e-3))
    fig = heatmap(p, query_tokens, key_tokens, row_title=q_title, col_title=k_title, mask=mask,
                  zmin=0.0, zmax=1.0 if zmax is None else zmax, colorscale=PROB_SCALE,
                  title=title or ("softmax: " + ("every row sums to 1 ✓" if ok
                                                 else "rows do NOT sum to 1")),
                  width_px=_bars_width(width_px) if show_row_sums else width_px)
    return with_row_sums(fig, sums) if show_row_sums else fig


def dropout_figure(dropout_probs: np.ndarray, query_tokens: Sequence[str],
                   key_tokens: Sequence[str], kind: str, mask: np.ndarray | None = None,
                   p_drop: float | None = None, *, src_lang: str | None = None, tgt_lang: str | None = None,
                   width_px: int | None = None) -> go.Figure:
    """Weights after dropout (i, j): zeros where dropped, survivors scaled by 1/(1-p).

    Rows no longer sum to 1, so the row-sum panel is always shown; the colour
    range is 0..max(1, largest weight) because survivors can exceed 1.
    """
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    d = np.asarray(dropout_probs, dtype=np.float32)
    top = max(1.0, _limit(d))
    rate = f" (p = {p_drop:g})" if p_drop is not None else ""
    fig = heatmap(d, query_tokens, key_tokens, row_title=q_title, col_title=k_title, mask=mask,
                  zmin=0.0, zmax=top, colorscale=PROB_SCALE,
                  title=f"after dropout{rate}: rows no longer sum to 1",
                  width_px=_bars_width(width_px))
    return with_row_sums(fig, d.sum(axis=-1))


def _bars_width(width_px: int | None) -> int:
    """Width left to the heatmap when the row-sum panel takes its share."""
    return int(0.74 * (width_px or FIGURE_WIDTH_PX))


def head_pipeline_figures(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                          raw_scores: np.ndarray | None, mask: np.ndarray | None,
                          probs: np.ndarray, out: np.ndarray, query_tokens: Sequence[str],
                          key_tokens: Sequence[str], kind: str,
                          dropout_probs: np.ndarray | None = None, *, scaled_scores: np.ndarray | None = None,
                          src_lang: str | None = None, tgt_lang: str | None = None,
                          pos_bias: np.ndarray | None = None, scaled: bool = True, scale: float | None = None,
                          capped: np.ndarray | None = None, cap: float = 0.0,
                          rotated: bool = False) -> dict[str, go.Figure]:
    """Every step of one head as an ordered dict of figures.

    ``scaled_scores`` (i, j): the scores the model recorded before the mask, Q·Kᵀ/√d_k (+ ``pos_bias`` where the
    model adds one). When given, the "summed"/"masked" panels draw exactly these numbers, "scaled" shows them less
    the bias, and the raw panel that × √d_k (pass None for ``raw_scores`` then). ``pos_bias`` (i, j): the position
    bias B the model added to this head's scores (T5's relative positions), or None. ``scaled=False``: the model
    does not divide by √d_k (T5): no "scaled" step, and the raw scores are the recorded ones less the bias.
    ``scale``: what the scores are divided by when it is not √d_k (Gemma's √query_pre_attn_scalar). ``capped``
    (i, j): the scores after the model's soft-capping ``cap``·tanh(s / ``cap``) (T5Gemma), which the mask and the
    softmax then read: a "capped" step between the scaled and the masked scores. ``rotated``: ``q`` and ``k`` are the
    rotated ones (rotary positions), whose product the scores are.

    Inputs: ``q`` (i, d_k), ``k`` (j, d_k), ``v`` (j, d_k), ``raw_scores`` the
    UNSCALED Q·Kᵀ (i, j) or None to compute it here (recommended; masked_fill
    values such as -1e9 or -inf are shown as NaN), ``mask`` (i, j) bool or
    broadcastable (True = may attend) or None, ``probs`` softmax weights
    (i, j), ``out`` = probs·V (i, d_k), ``dropout_probs`` (i, j) or None.

    Keys in order: "Q", "K", "V", "scores", "scaled" (only where the model scales), "bias" (only with a bias),
    "summed" (with a bias and no mask: the scores plus the bias), "capped" (only with ``capped``), "masked" (only
    with a mask), "softmax",
    "dropout" (only with dropout_probs), "output". Key labels are thinned for the page's layout: score maps a
    third of the page wide, softmax and dropout half.
    """
    q_arr, k_arr, v_arr = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    d_k = q_arr.shape[-1]
    if k_arr.shape[-1] != d_k or v_arr.shape[0] != k_arr.shape[0]:
        raise ValueError(f"shapes disagree: Q {q_arr.shape}, K {k_arr.shape}, V {v_arr.shape}; "
                         f"expected Q (i, d_k), K (j, d_k), V (j, d_k)")
    bias = None if pos_bias is None else np.asarray(pos_bias, dtype=np.float32)  # (i, j)
    divisor = scale if scale else np.sqrt(d_k)
    factor = np.float32(divisor) if scaled else np.float32(1.0)
    if scaled_scores is not None:
        recorded = _clean(scaled_scores)  # (i, j) as the model recorded them
        before_bias = recorded if bias is None else recorded - bias
        raw = before_bias * factor
    else:
        raw = q_arr @ k_arr.T if raw_scores is None else _clean(raw_scores)  # (i, j)
        before_bias = raw / factor  # (i, j)
        recorded = before_bias if bias is None else before_bias + bias
    m = as_mask(mask, raw.shape[0], raw.shape[1])
    q_side, k_side = kind_sides(kind, src_lang, tgt_lang)
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang)
    langs = dict(src_lang=src_lang, tgt_lang=tgt_lang)

    def scores(z, title, with_mask=None, value_name="score"):
        return matrix_figure(z, query_tokens, key_tokens, title=title, row_title=q_title,
                             col_title=k_title, mask=with_mask, value_name=value_name,
                             row_name="query", col_name="key", width_px=THIRD_WIDTH_PX)

    # No-break spaces: a title wrapped for a third of the page keeps "max |s| 12.3" on one line.
    root = f"√{d_k}" if not scale else f"√{scale ** 2:g}"
    scaled_name = f"Q·Kᵀ / {root}" if scaled else "Q·Kᵀ"
    short = bool(theme().height_px)  # presenter mode: one line each, so that a row of 20 tokens keeps its labels
    qk_titles = QKV_TITLES[short][:2] if not rotated else ROTATED_TITLES[short]
    figs: dict[str, go.Figure] = {
        "Q": vectors_figure(q_arr, query_tokens, q_side, "query", qk_titles[0], THIRD_WIDTH_PX),
        "K": vectors_figure(k_arr, key_tokens, k_side, "key", qk_titles[1], THIRD_WIDTH_PX),
        "V": vectors_figure(v_arr, key_tokens, k_side, "key", QKV_TITLES[short][2], THIRD_WIDTH_PX),
        "scores": scores(raw, f"Q·Kᵀ, max\u00a0|s|\u00a0{_limit(raw):.1f}"),
    }
    figs |= _score_steps(scores, before_bias if scaled else None, bias, recorded, m, scaled_name,
                         None if capped is None else (_clean(capped), cap))
    figs["softmax"] = probs_figure(probs, query_tokens, key_tokens, kind, mask=m,
                                   width_px=HALF_WIDTH_PX, **langs)
    if dropout_probs is not None:
        figs["dropout"] = dropout_figure(dropout_probs, query_tokens, key_tokens, kind, mask=m,
                                         width_px=HALF_WIDTH_PX, **langs)
    figs["output"] = vectors_figure(out, query_tokens, q_side, "query",
                                    "output = weights · V, one row per query")
    return figs


def _score_steps(scores, before_bias: np.ndarray | None, bias: np.ndarray | None, recorded: np.ndarray,
                 m: np.ndarray | None, scaled_name: str, capped: tuple[np.ndarray, float] | None) -> dict:
    """The figures between the raw scores and the softmax: scaled (``before_bias``, where the model scales), the
    bias and the scores with it, the soft-capped scores (``capped``: them and the cap) and the masked ones, each
    drawn by ``scores(z, title, with_mask=None, value_name="score")``."""
    figs = {}
    if before_bias is not None:
        figs["scaled"] = scores(before_bias, f"{scaled_name}, max\u00a0|s|\u00a0{_limit(before_bias):.1f}")
    if bias is not None:
        figs["bias"] = scores(bias, f"+ position bias B, max\u00a0|b|\u00a0{_limit(bias):.1f}", value_name="bias")
        if m is None:
            figs["summed"] = scores(recorded, f"= {scaled_name} + B, max\u00a0|s|\u00a0{_limit(recorded):.1f}")
    if capped is not None:
        recorded, cap = capped  # (i, j) what the mask and the softmax read
        figs["capped"] = scores(recorded, f"soft-capped {cap:g}·tanh(s/{cap:g}), max\u00a0|s|\u00a0"
                                          f"{_limit(recorded):.1f}")
    if m is not None:
        figs["masked"] = scores(recorded, ("" if bias is None else f"{scaled_name} + B, ")
                                + ("capped, " if capped is not None else "") + "masked: grey = −∞", with_mask=m)
    return figs


# The steps of one head in reading order, row by row, as the Inside-one-head page lays them out.
PIPELINE_ROWS = (("Q", "K", "V"), ("scores", "scaled", "bias", "summed", "capped", "masked"), ("softmax", "dropout"),
                 ("output",))
# Steps whose numbers are comparable, drawn on one colour scale where they share a row: Q, K and V; the scaled
# scores and the masked ones (the same numbers); the weights before and after dropout. The raw scores keep a scale
# of their own: they are √d_k times the scaled ones, which on the raw scores' scale would be drawn nearly white.
# The position bias and the scores it makes keep scales of their own (T5; their sizes are worth seeing apart).
SCALE_GROUPS = (("Q", "K", "V"), ("scores",), ("scaled", "capped", "masked"), ("bias",), ("summed",),
                ("softmax", "dropout"), ("output",))


def head_pipeline_rows(*args, only: Sequence[str] | None = None, **kwargs) -> dict[tuple[str, ...], go.Figure]:
    """:func:`head_pipeline_figures` (same arguments) as ONE figure per row of the page: {steps of the row: figure}.
    ``only``: the steps drawn (presenter mode's screen may hold a part of a row); rows without any are left out.

    Rows in PIPELINE_ROWS' order, each with the steps that exist (no "masked" without a mask, no "dropout" without
    dropout weights); the panels of a row side by side across the page (:func:`viz.panels.panel_row`), each as
    wide as the page's column it had as a figure of its own. The steps of one SCALE_GROUPS group share one colour
    scale with one colour bar, the group's last: a colour is the same number in Q, K and V, in the scaled and the
    masked scores, and in the weights before and after dropout. The raw scores have their own scale and bar.
    """
    figs = head_pipeline_figures(*args, **kwargs)
    rows = {}
    for row in PIPELINE_ROWS:
        steps = tuple(name for name in row if name in figs and (only is None or name in only))
        if not steps:
            continue
        panels = [figs[name] for name in steps]
        if len(panels) == 1 and only is None:
            rows[steps] = panels[0]
        elif len(panels) == 1:  # a step of a row alone (presenter mode): its keys labelled for the page's width
            rows[steps] = panel_row(panels)
        elif any(set(steps) <= set(group) for group in SCALE_GROUPS):
            rows[steps] = panel_row(panels, one_scale=True)
        else:
            rows[steps] = _group_scales(panel_row(panels), steps, [len(p.data) for p in panels])
    return rows


def _group_scales(row: go.Figure, steps: tuple[str, ...], n_traces: list[int]) -> go.Figure:
    """A row of panels whose steps (``steps``, panel i holding ``n_traces[i]`` traces) are of several SCALE_GROUPS:
    each group's colour traces on one range (from its lowest bottom to its highest top), its last panel's colour
    bar the only one shown for it."""
    panel_of = np.repeat(np.arange(len(steps)), n_traces)  # the panel of each of the row's traces
    for group in SCALE_GROUPS:
        traces = [t for t, i in zip(row.data, panel_of) if steps[i] in group and t.type == "heatmap"
                  and t.showscale is not False and t.name != MASK_TRACE_NAME]
        if len(traces) < 2:
            continue
        lo, hi = min(t.zmin for t in traces), max(t.zmax for t in traces)
        for t in traces:
            t.update(zmin=lo, zmax=hi)
        for t in traces[:-1]:
            t.update(showscale=False)
    return row
