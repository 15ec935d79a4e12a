"""Decoding views: next-token candidates, where a step looked, and the step table.

Shape letters (see :mod:`viz`): ``s`` source positions (the keys of cross-attention).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.common import (axis_ticks, axis_titles, escape_token, escape_tokens, fmt_prob, heatmap, plot_width_px,
                        resolve_languages, styled_figure, theme)

CHOSEN_COLOUR = "#ff7f0e"
OTHER_COLOUR = "#9ecae1"
BAR_LABEL_PX = 44  # a "0.123" label needs this much width; narrower bars: only the top one


def candidates_figure(tokens: Sequence[str], probs: Sequence[float], chosen_index: int = 0,
                      title: str = "next-token candidates") -> go.Figure:
    """Horizontal bars of the top-k next-token probabilities (x range 0..1).

    ``tokens`` and ``probs`` are in display order (first at the top); the bar
    at ``chosen_index`` is highlighted and every bar shows its value as text
    (:func:`viz.common.fmt_prob`, as does the hover).
    """
    p = np.asarray(probs, dtype=np.float32)
    if len(tokens) != len(p):
        raise ValueError(f"{len(tokens)} candidate tokens but {len(p)} probabilities")
    if not 0 <= chosen_index < len(p):
        raise ValueError(f"chosen_index {chosen_index} is outside 0..{len(p) - 1}")
    ys = np.arange(len(p), dtype=np.int32)
    labels = escape_tokens(tokens)
    values = [fmt_prob(v) for v in p]
    colours = [CHOSEN_COLOUR if i == chosen_index else OTHER_COLOUR for i in range(len(p))]
    bar = dict(type="bar", x=p, y=ys, orientation="h", marker=dict(color=colours), name="probability",
               text=values, textposition="outside", textfont=dict(size=15), cliponaxis=False,
               constraintext="none", customdata=np.stack([np.asarray(labels, dtype=str),
                                                          np.asarray(values, dtype=str)], axis=-1),  # (n, 2)
               hovertemplate="%{customdata[0]}<br>probability %{customdata[1]}<extra></extra>")
    layout = dict(xaxis=dict(range=[0, 1.18], title=dict(text="probability"), tickfont=dict(size=theme().tick),
                             tickvals=[0, 0.25, 0.5, 0.75, 1.0]),
                  yaxis=dict(tickmode="array", tickvals=ys.tolist(), ticktext=labels, autorange="reversed",
                             tickfont=dict(size=16), title=dict(text="candidate")))
    return styled_figure([bar], layout, title, height=max(260, 110 + 42 * len(p)))


def step_cross_attention_figure(weights: np.ndarray, source_tokens: Sequence[str],
                                title: str = "where this step looked in the source", *,
                                src_lang: str | None = None, tgt_lang: str | None = None,
                                width_px: int | None = None) -> go.Figure:
    """Bars of one decoding step's cross-attention ``weights`` (s,) over the source.

    x = source position (integer axis with token tick labels, thinned as in
    :func:`viz.common.axis_ticks` when crowded for ``width_px``), y = weight on
    a fixed 0..1 range; the most-attended token is highlighted. Every bar is
    labelled with its weight when the labels fit side by side (BAR_LABEL_PX
    each at ``width_px``), otherwise only the highlighted one; hover always
    gives every weight.
    """
    w = np.asarray(weights, dtype=np.float32).reshape(-1)
    if len(w) != len(source_tokens):
        raise ValueError(f"{len(w)} weights but {len(source_tokens)} source tokens; pass the "
                         f"(s,) row of the cross-attention for one step (averaged over heads)")
    xs = np.arange(len(w), dtype=np.int32)
    labels = escape_tokens(source_tokens)
    top = int(np.nanargmax(w)) if len(w) else -1
    values = [fmt_prob(v) for v in w]
    plot_px = plot_width_px(width_px, colorbar=False)
    every = len(w) * BAR_LABEL_PX <= plot_px
    shown = [v if every or i == top else "" for i, v in enumerate(values)]
    bar = dict(type="bar", x=xs, y=w, name="weight",
               marker=dict(color=[CHOSEN_COLOUR if i == top else OTHER_COLOUR for i in range(len(w))]),
               customdata=np.stack([np.asarray([f"{t} ({i})" for i, t in enumerate(labels)], dtype=str),
                                    np.asarray(values, dtype=str)], axis=-1).reshape(len(w), 2),
               text=shown, textposition="outside", cliponaxis=False, constraintext="none",
               textfont=dict(size=theme().tick),
               hovertemplate="key: %{customdata[0]}<br>weight %{customdata[1]}<extra></extra>")
    layout = dict(xaxis=dict(**axis_ticks(source_tokens, len(w), angle=-45, axis_px=plot_px),
                             title=dict(text=axis_titles("cross", src_lang, tgt_lang)[1])),
                  yaxis=dict(range=[0, 1.1], title=dict(text="attention weight"), tickfont=dict(size=theme().tick)))
    return styled_figure([bar], layout, title, height=380)


def decoding_table(steps: Sequence[dict]) -> pd.DataFrame:
    """Table of decoding steps; each dict has "step", "prefix", "chosen", "prob".

    ``prefix`` may be a token list (joined with spaces) or a string. Columns:
    step, prefix, chosen, prob (text by :func:`viz.common.fmt_prob`, 3
    decimals, as in every figure). Text is plain, not escaped.
    """
    needed = ("step", "prefix", "chosen", "prob")
    rows = []
    for n, s in enumerate(steps):
        missing = [key for key in needed if key not in s]
        if missing:
            raise ValueError(f"step {n} is missing {missing}; each step needs keys {list(needed)}")
        prefix = s["prefix"] if isinstance(s["prefix"], str) else " ".join(map(str, s["prefix"]))
        rows.append({"step": int(s["step"]), "prefix": prefix, "chosen": str(s["chosen"]),
                     "prob": fmt_prob(s["prob"])})
    return pd.DataFrame(rows, columns=list(needed))


def attribution_figure(shares: np.ndarray, method_labels: Sequence[str], source_tokens: Sequence[str],
                       title: str, *, hover_notes: Sequence[Sequence[str]] | None = None,
                       src_lang: str | None = None, width_px: int | None = None) -> go.Figure:
    """Which source tokens one output token came from, one row per attribution method; ``shares`` (m, s).

    Every row is a method's normalised attribution (non-negative, summing to 1), so all rows share one 0..1
    colour scale. ``hover_notes[m][j]`` adds a line to a cell's hover (e.g. the signed input × gradient).
    """
    z = np.asarray(shares, dtype=np.float32)
    if z.ndim != 2 or z.shape != (len(method_labels), len(source_tokens)):
        raise ValueError(f"shares {z.shape} do not match {len(method_labels)} methods × {len(source_tokens)} tokens")
    fig = heatmap(z, list(method_labels), list(source_tokens), row_title="method",
                  col_title=f"source token ({escape_token(resolve_languages(src_lang, None)[0])}) →", zmin=0.0, zmax=1.0, title=title,
                  value_name="share", row_name="method", col_name="source token", colorbar_title="share",
                  width_px=width_px)
    if hover_notes is not None:  # one note per cell: the only per-cell hover text (the axes name the cell)
        trace = fig.data[0]
        trace.customdata = np.asarray(hover_notes, dtype=str)  # (m, s)
        trace.hovertemplate = trace.hovertemplate.replace("<extra>", "<br>%{customdata}<extra>")
    return fig
