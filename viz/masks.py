"""Mask views: which query may look at which key, causal and padding masks.

Shape letters (see :mod:`viz`): ``i`` query positions, ``j`` key positions.
Convention everywhere: True = may attend (visible), False = masked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.attention import attention_figure
from viz.heatmap import as_mask, check_tokens, mask_crosses, sized
from viz.kinds import axis_titles
from viz.layout import PAGE_WIDTH_PX, styled_figure
from viz.panels import panel_row
from viz.rows import label_room, pan_layout, short_labels_on_long_axes, tick_px, window_axis
from viz.theme import theme
from viz.token_axes import axis_ticks, cell_names, plot_width_px, token_axis

ALLOWED_COLOUR = "#2b7bba"
MASKED_COLOUR = "#d9d9d9"


@short_labels_on_long_axes("key_tokens")
def mask_figure(mask: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str],
                title: str = "attention mask", kind: str | None = None, *,
                src_lang: str | None = None, tgt_lang: str | None = None,
                width_px: int | None = None) -> go.Figure:
    """Two-colour map of ``mask`` (i, j) bool (or broadcastable): blue = may attend, grey = masked, and marked with an
    "x" as in every heatmap (up to 30 tokens a side), so colour is not the only sign.

    z is 1.0 where allowed and 0.0 where masked. There is no colour bar (two colours need none, and in a column
    of the page its labels were cut off): the note above the plot says grey = masked and counts the masked cells,
    the hover names each cell's state, and the title should say what blue is. ``kind`` (optional) sets language
    axis titles. The height grows with the query tokens and crowded labels are thinned as in
    :func:`viz.heatmap.heatmap` (``width_px``: the width the page gives it; the title wraps to fit it).
    """
    n_q, n_k = len(query_tokens), len(key_tokens)
    m = as_mask(mask, n_q, n_k)
    z = m.astype(np.float32)  # (i, j)
    check_tokens(z, query_tokens, key_tokens, what="mask")
    q_title, k_title = axis_titles(kind, src_lang, tgt_lang) if kind else ("query ↓", "key →")
    # Category axes named "tok (pos)", as in viz.heatmap.heatmap: hover reads the cell's query and key from them,
    # so the only per-cell text is its state.
    q_names, k_names = cell_names(query_tokens), cell_names(key_tokens)
    state = np.where(m, "may attend", "masked")  # (i, j)
    small = max(n_q, n_k) <= 40  # a 1 px gap between cells would eat thin cells
    trace = dict(
        type="heatmap", z=z, x=k_names, y=q_names, customdata=state,
        zmin=0.0, zmax=1.0, xgap=1 if small else 0, ygap=1 if small else 0, name="mask",
        colorscale=[[0.0, MASKED_COLOUR], [0.5, MASKED_COLOUR], [0.5, ALLOWED_COLOUR], [1.0, ALLOWED_COLOUR]],
        showscale=False,
        hovertemplate="query: %{y}<br>key: %{x}<br>%{customdata}<extra></extra>",
    )
    x_ticks = axis_ticks(key_tokens, n_k, angle=-45, axis_px=plot_width_px(width_px, query_tokens))
    n_masked = int((~m).sum())
    crosses = mask_crosses(m, k_names, q_names)
    note = f"grey{' ×' if crosses else ''} = masked: {n_masked:,} of {m.size:,} cells"
    title, wrap, height, rows_px, shown = sized(title, width_px, n_q, query_tokens, key_tokens, x_ticks["tickangle"])
    y_axis = dict(title=dict(text=q_title), showgrid=False, zeroline=False, **token_axis(query_tokens),
                  **axis_ticks(query_tokens, n_q, reverse=True, axis_px=tick_px(rows_px, n_q, shown)))
    layout = dict(
        xaxis=dict(title=dict(text=k_title), showgrid=False, zeroline=False, **x_ticks, **token_axis(key_tokens),
                   **({"fixedrange": True} if shown else {})),
        yaxis=window_axis(y_axis, shown), **pan_layout(shown),
        # presenter mode: no note (at 20 px it ran into the title); the title says what blue is, the page below it
        **({} if theme().height_px else {"annotations": [dict(
            text=note, showarrow=False, xref="paper", yref="paper", x=1.0, y=1.02, xanchor="right", yanchor="bottom",
            font=dict(size=14, color="#555555"))]}),
    )
    return styled_figure([trace] + ([crosses] if crosses else []), layout, title, height=height, wrap_chars=wrap,
                         margin=label_room(height, rows_px, title, wrap))


def padding_figure(probs: np.ndarray, mask: np.ndarray, tokens: Sequence[str], *, title: str, mask_title: str,
                   src_lang: str | None = None, tgt_lang: str | None = None,
                   only: Sequence[int] | None = None) -> go.Figure:
    """The Masks page's padding part as ONE figure: one encoder head's ``probs`` (s, s) in the padded batch
    (three fifths of the page) beside the ``mask`` (s, s) the model used (two fifths), both over ``tokens``.
    ``only``: the panels shown (0: the weights, 1: the mask; presenter mode's screen may hold one)."""
    langs = dict(src_lang=src_lang, tgt_lang=tgt_lang)
    alone = theme().height_px and only is not None and list(only) == [0]  # a projector: the rows get the title's line
    panels = [lambda w: attention_figure(probs, tokens, tokens, "enc_self", mask=mask, title=title, width_px=w,
                                         key_note=title if alone else None, **langs),
              lambda w: mask_figure(mask, tokens, tokens, title=mask_title, kind="enc_self", width_px=w, **langs)]
    return _some(panels, [3, 2], only)


def _some(panels: list, shares: list[int], only: Sequence[int] | None, one_scale: bool = False) -> go.Figure:
    """The panels ``only`` (all by default) of a row, each built for its share of the page: one alone is a figure
    of its own, as wide as the page."""
    keep = list(range(len(panels))) if only is None else list(only)
    if len(keep) == 1:
        return panels[keep[0]](PAGE_WIDTH_PX)
    total = sum(shares[i] for i in keep)
    return panel_row([panels[i](int(PAGE_WIDTH_PX * shares[i] / total)) for i in keep], [shares[i] for i in keep],
                     one_scale=one_scale)


def causal_figure(mask: np.ndarray, probs_on: np.ndarray, probs_off: np.ndarray, mask_off: np.ndarray,
                  tokens: Sequence[str], *, mask_title: str, on_title: str, off_title: str,
                  src_lang: str | None = None, tgt_lang: str | None = None,
                  only: Sequence[int] | None = None) -> go.Figure:
    """The Masks page's causal part as ONE figure of three panels over ``tokens`` (t): the causal ``mask`` (t, t)
    the model used, one decoder head's ``probs_on`` with it, and ``probs_off`` from the pass without it (whose
    recorded mask is ``mask_off``). The two passes' weights share one colour scale and one colour bar. ``only``:
    the panels shown (presenter mode's screen may hold fewer)."""
    langs = dict(src_lang=src_lang, tgt_lang=tgt_lang)
    panels = [lambda w: mask_figure(mask, tokens, tokens, title=mask_title, kind="dec_self", width_px=w, **langs),
              lambda w: attention_figure(probs_on, tokens, tokens, "dec_self", mask=mask, title=on_title, width_px=w,
                                         **langs),
              lambda w: attention_figure(probs_off, tokens, tokens, "dec_self", mask=mask_off, title=off_title,
                                         width_px=w, **langs)]
    return _some(panels, [1, 1, 1], only, one_scale=True)


def window_figure(local: np.ndarray, full: np.ndarray, tokens: Sequence[str], kind: str, *, local_title: str,
                  full_title: str, src_lang: str | None = None, tgt_lang: str | None = None,
                  only: Sequence[int] | None = None) -> go.Figure:
    """A local (sliding-window) layer's recorded mask ``local`` (n, n) beside a global layer's ``full`` (n, n) of
    the same stack (``kind`` enc_self or dec_self), over ``tokens``: one figure of two panels (``only``: those)."""
    langs = dict(src_lang=src_lang, tgt_lang=tgt_lang)
    panels = [lambda w: mask_figure(local, tokens, tokens, title=local_title, kind=kind, width_px=w, **langs),
              lambda w: mask_figure(full, tokens, tokens, title=full_title, kind=kind, width_px=w, **langs)]
    return _some(panels, [1, 1], only)
