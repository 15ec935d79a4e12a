"""Decoding views: next-token candidates, where a step looked, and the step table.

Shape letters (see :mod:`viz`): ``s`` source positions (the keys of cross-attention).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import heatmap
from viz.kinds import axis_titles, resolve_languages
from viz.layout import PAGE_WIDTH_PX, styled_figure, text_px, top_margin
from viz.text import escape_token, escape_tokens, fmt_prob, title_lines
from viz.theme import fit_height, theme
from viz.token_axes import axis_ticks, label_px, plot_width_px

if TYPE_CHECKING:
    import pandas as pd

VALUE_TEXT = "0.000"  # the widest value a bar is labelled with (fmt_prob)


def bar_marker(n: int, highlight: int) -> dict:
    """Bar colours of the theme in force: bar ``highlight`` stands out, by its colour and by a hatch (colour alone
    is lost in greyscale and to some colour-vision deficiencies). Each bar is outlined in its own colour, so a
    weight of 0.002 still shows as a sliver (the look's white outline would hide it)."""
    t = theme()
    colours = [t.highlight_colour if i == highlight else t.bar_colour for i in range(n)]
    hatch = dict(shape=["/" if i == highlight else "" for i in range(n)], fillmode="overlay", fgcolor="#ffffff",
                 size=10, solidity=0.25)
    return dict(color=colours, line=dict(color=colours, width=1), pattern=hatch)


def candidates_figure(tokens: Sequence[str], probs: Sequence[float], chosen_index: int = 0,
                      title: str = "next-token candidates") -> go.Figure:
    """Horizontal bars of the top-k next-token probabilities (x range 0..1).

    ``tokens`` and ``probs`` are in display order (first at the top); the bar
    at ``chosen_index`` is highlighted and every bar shows its value as text
    (:func:`viz.text.fmt_prob`, as does the hover): inside a bar long enough to hold it, else just after it.
    No grid lines: the values are written on the bars, and a value written after a long bar crossed the line at 1.
    """
    p = np.asarray(probs, dtype=np.float32)
    if len(tokens) != len(p):
        raise ValueError(f"{len(tokens)} candidate tokens but {len(p)} probabilities")
    if not 0 <= chosen_index < len(p):
        raise ValueError(f"chosen_index {chosen_index} is outside 0..{len(p) - 1}")
    ys = np.arange(len(p), dtype=np.int32)
    labels = escape_tokens(tokens)
    values = [fmt_prob(v) for v in p]
    bar = dict(type="bar", x=p, y=ys, orientation="h", marker=bar_marker(len(p), chosen_index), name="probability",
               text=values, textposition="auto", insidetextanchor="end", textangle=0, textfont=dict(size=15),
               cliponaxis=False, constraintext="none",
               customdata=np.stack([np.asarray(labels, dtype=str), np.asarray(values, dtype=str)], axis=-1),  # (n, 2)
               hovertemplate="%{customdata[0]}<br>probability %{customdata[1]}<extra></extra>")
    layout = dict(xaxis=dict(range=[0, 1.18], title=dict(text="probability"), tickfont=dict(size=theme().tick),
                             tickvals=[0, 0.25, 0.5, 0.75, 1.0], showgrid=False),
                  yaxis=dict(tickmode="array", tickvals=ys.tolist(), ticktext=labels, autorange="reversed",
                             tickfont=dict(size=16), title=dict(text="candidate")))
    return styled_figure([bar], layout, title, height=max(260, 110 + 42 * len(p)))


def step_cross_attention_figure(weights: np.ndarray, source_tokens: Sequence[str],
                                title: str = "where this step looked in the source", *,
                                src_lang: str | None = None, tgt_lang: str | None = None,
                                width_px: int | None = None) -> go.Figure:
    """Bars of one decoding step's cross-attention ``weights`` (s,) over the source.

    x = source position (integer axis with token tick labels, thinned as in
    :func:`viz.token_axes.axis_ticks` when crowded for ``width_px``, the most-attended token's label always
    kept), y = weight on a fixed 0..1 range; the most-attended token is highlighted. Every bar is
    labelled with its weight when the labels fit side by side at ``width_px``,
    otherwise only the highlighted one; hover always gives every weight. The axes leave room for the labels: above
    a bar of 1, and beside the first and last bar, so a label never runs into a tick label.
    """
    w = np.asarray(weights, dtype=np.float32).reshape(-1)
    if len(w) != len(source_tokens):
        raise ValueError(f"{len(w)} weights but {len(source_tokens)} source tokens; pass the "
                         f"(s,) row of the cross-attention for one step (averaged over heads)")
    t = theme()
    xs = np.arange(len(w), dtype=np.int32)
    labels = escape_tokens(source_tokens)
    top = int(np.nanargmax(w)) if len(w) else -1
    values = [fmt_prob(v) for v in w]
    plot_px = plot_width_px(width_px, colorbar=False)
    label_w = text_px(VALUE_TEXT, t.tick) + 8  # a value label and a little room on each side
    every = len(w) * label_w <= plot_px
    shown = [v if every or i == top else "" for i, v in enumerate(values)]
    bar = dict(type="bar", x=xs, y=w, name="weight",
               marker=bar_marker(len(w), top),
               customdata=np.stack([np.asarray([f"{tok} ({i})" for i, tok in enumerate(labels)], dtype=str),
                                    np.asarray(values, dtype=str)], axis=-1).reshape(len(w), 2),
               text=shown, textposition="outside", textangle=0, cliponaxis=False, constraintext="none",
               textfont=dict(size=t.tick),
               hovertemplate="key: %{customdata[0]}<br>weight %{customdata[1]}<extra></extra>")
    # The most-attended key keeps its label when the others are thinned: it is the bar the figure is about.
    x_ticks = axis_ticks(source_tokens, len(w), angle=-45, axis_px=plot_px, keep=[top] if top >= 0 else [])
    height = fit_height(380)
    ticked = [source_tokens[j] for j in x_ticks.get("tickvals", [])]
    plot_h = max(40, height - top_margin(title_lines(title)) - label_px(ticked, x_ticks.get("tickangle", -45)) - 20)
    # Slots are plot_px / n wide: a label wider than its slot reaches past the first (or last) bar's edge.
    pad = max(0.0, (label_w / (plot_px / max(len(w), 1)) - 1) / 2)
    x_ticks["range"] = [-0.5 - pad, len(w) - 0.5 + pad]
    layout = dict(xaxis=dict(**x_ticks, title=dict(text=axis_titles("cross", src_lang, tgt_lang)[1])),
                  yaxis=dict(range=[0, max(1.1, 1 + 1.5 * t.tick / plot_h)], tickvals=[0, 0.5, 1], showgrid=False,
                             title=dict(text="attention weight"), tickfont=dict(size=t.tick)))
    return styled_figure([bar], layout, title, height=height)


def decoding_table(steps: Sequence[dict]) -> pd.DataFrame:
    """:func:`decoding_rows` as a DataFrame."""
    import pandas as pd  # where a table is made: importing viz/ needs no pandas
    return pd.DataFrame(decoding_rows(steps), columns=["step", "prefix", "chosen", "prob"])


def decoding_rows(steps: Sequence[dict]) -> list[dict]:
    """Rows of a table of decoding steps; each dict has "step", "prefix", "chosen", "prob".

    ``prefix`` may be a token list (joined with spaces) or a string. Columns:
    step, prefix, chosen, prob (text by :func:`viz.text.fmt_prob`, 3
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
    return rows


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
                  col_title=f"source token ({escape_token(resolve_languages(src_lang, None)[0])}) →", zmin=0.0,
                  zmax=1.0, title=title,
                  value_name="share", row_name="method", col_name="source token", colorbar_title="share",
                  width_px=width_px)
    if hover_notes is not None:  # one note per cell: the only per-cell hover text (the axes name the cell)
        trace = fig.data[0]
        trace.customdata = np.asarray(hover_notes, dtype=str)  # (m, s)
        trace.hovertemplate = trace.hovertemplate.replace("<extra>", "<br>%{customdata}<extra>")
    return fig


def source_share_figure(tokens: Sequence[str], shares: Sequence[float], step_index: int,
                        title: str = "how much of each output token came from the source (ALTI+)") -> go.Figure:
    """Bars of each output token's source share (n,): the part of it that came from the source sentence, the rest
    from the translation so far (ALTI+'s rollout, docs/contributions.md). The step shown is highlighted."""
    s = np.asarray(shares, dtype=np.float32)
    if len(tokens) != len(s):
        raise ValueError(f"{len(tokens)} tokens but {len(s)} shares")
    xs = np.arange(len(s), dtype=np.int32)
    labels = escape_tokens(tokens)
    bar = dict(type="bar", x=xs, y=s, marker=bar_marker(len(s), step_index), name="source share",
               customdata=np.asarray(labels, dtype=str),
               hovertemplate="step %{x}: %{customdata}<br>source share %{y:.2f}<extra></extra>")
    ticks = axis_ticks(tokens, len(s), angle=-45, axis_px=plot_width_px(PAGE_WIDTH_PX, colorbar=False),
                       keep=[step_index])
    layout = dict(xaxis=dict(title=dict(text="output token →"), **ticks),
                  yaxis=dict(range=[0, 1], tickvals=[0, 0.5, 1], title=dict(text="source share"),
                             tickfont=dict(size=theme().tick)), showlegend=False)
    return styled_figure([bar], layout, title, height=300)
