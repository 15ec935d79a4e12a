"""Decoding views: next-token candidates, where a step looked, and the step table.

Shape letters: ``k`` source (key) positions.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.common import TICK_FONT, escape_tokens, style

CHOSEN_COLOUR = "#ff7f0e"
OTHER_COLOUR = "#9ecae1"


def candidates_figure(tokens: Sequence[str], probs: Sequence[float], chosen_index: int = 0,
                      title: str = "next-token candidates") -> go.Figure:
    """Horizontal bars of the top-k next-token probabilities (x range 0..1).

    ``tokens`` and ``probs`` are in display order (first at the top); the bar
    at ``chosen_index`` is highlighted and every bar shows its value as text.
    """
    p = np.asarray(probs, dtype=np.float32)
    if len(tokens) != len(p):
        raise ValueError(f"{len(tokens)} candidate tokens but {len(p)} probabilities")
    if not 0 <= chosen_index < len(p):
        raise ValueError(f"chosen_index {chosen_index} is outside 0..{len(p) - 1}")
    ys = np.arange(len(p), dtype=np.int32)
    labels = escape_tokens(tokens)
    colours = [CHOSEN_COLOUR if i == chosen_index else OTHER_COLOUR for i in range(len(p))]
    fig = go.Figure(go.Bar(
        x=p, y=ys, orientation="h", marker_color=colours, name="probability",
        text=[f"{v:.3f}" for v in p], textposition="outside", textfont=dict(size=15),
        customdata=np.asarray(labels, dtype=object),
        hovertemplate="%{customdata}<br>probability %{x:.3f}<extra></extra>"))
    fig.update_xaxes(range=[0, 1.08], title=dict(text="probability"), tickfont=dict(size=TICK_FONT))
    fig.update_yaxes(tickmode="array", tickvals=ys.tolist(), ticktext=labels, autorange="reversed",
                     tickfont=dict(size=16), title=dict(text="candidate"))
    return style(fig, title, height=max(260, 110 + 42 * len(p)))


def step_cross_attention_figure(weights: np.ndarray, source_tokens: Sequence[str],
                                title: str = "where this step looked in the source"
                                ) -> go.Figure:
    """Bars of one decoding step's cross-attention ``weights`` (k,) over the source.

    x = source position (integer axis with token tick labels), y = weight on a
    fixed 0..1 range; the most-attended token is highlighted.
    """
    w = np.asarray(weights, dtype=np.float32).reshape(-1)
    if len(w) != len(source_tokens):
        raise ValueError(f"{len(w)} weights but {len(source_tokens)} source tokens; pass the "
                         f"(k,) row of the cross-attention for one step (averaged over heads)")
    xs = np.arange(len(w), dtype=np.int32)
    labels = escape_tokens(source_tokens)
    top = int(np.nanargmax(w)) if len(w) else -1
    fig = go.Figure(go.Bar(
        x=xs, y=w, name="weight",
        marker_color=[CHOSEN_COLOUR if i == top else OTHER_COLOUR for i in range(len(w))],
        customdata=np.asarray([f"{t} ({i})" for i, t in enumerate(labels)], dtype=object),
        text=[f"{v:.2f}" for v in w], textposition="outside",
        hovertemplate="key: %{customdata}<br>weight %{y:.3f}<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=xs.tolist(), ticktext=labels, tickangle=-45,
                     tickfont=dict(size=TICK_FONT), title=dict(text="key (DE, source) →"))
    fig.update_yaxes(range=[0, 1.1], title=dict(text="attention weight"),
                     tickfont=dict(size=TICK_FONT))
    return style(fig, title, height=380)


def decoding_table(steps: Sequence[dict]) -> pd.DataFrame:
    """Table of decoding steps; each dict has "step", "prefix", "chosen", "prob".

    ``prefix`` may be a token list (joined with spaces) or a string. Columns:
    step, prefix, chosen, prob (float). Text is plain, not escaped.
    """
    needed = ("step", "prefix", "chosen", "prob")
    rows = []
    for i, s in enumerate(steps):
        missing = [key for key in needed if key not in s]
        if missing:
            raise ValueError(f"step {i} is missing {missing}; each step needs keys {list(needed)}")
        prefix = s["prefix"] if isinstance(s["prefix"], str) else " ".join(map(str, s["prefix"]))
        rows.append({"step": int(s["step"]), "prefix": prefix, "chosen": str(s["chosen"]),
                     "prob": float(s["prob"])})
    return pd.DataFrame(rows, columns=list(needed))
