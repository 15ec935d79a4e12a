"""Attention: every layer and head of encoder self-, decoder self- and cross-attention."""
from __future__ import annotations

import numpy as np
import streamlit as st

from model.analysis.experiments import entropy
from model.records import kv_share
from views.parts import ablation
from views.parts.carried import carried, choose
from views.parts.compare import heads_match
from views.parts.text import md_escape
from views.parts.widgets import (
    chart,
    choices,
    csv_button,
    fig_config,
    kind_layer_head,
    sections,
    shown_heads,
    shows_caption,
)
from views.plumbing.figcache import cached
from views.plumbing.state import Context
from viz.attention import (
    attention_figure,
    heads_figure,
    overview_figure,
    rescale_note,
    robust_zmax,
    rows_sum_to_one,
    sink_key,
)
from viz.compare import Side, side_by_side_figure
from viz.kinds import KIND_EXPLAIN, KIND_NAMES
from viz.layout import PAGE_WIDTH_PX
from viz.tables import heads_csv, matrix_csv


def render(ctx: Context) -> None:
    tr, cfg = ctx.result.trace, ctx.cfg
    if not ctx.present:  # presenter mode: the controls and the figure, nothing else
        st.subheader("Attention")
    with choices(ctx):
        kind, layer, head = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads,
                                            compact=ctx.present)
        measure = choose(ctx) if ctx.other is None else "weights"
        if ctx.present and ctx.other is None:
            show, hide = _show_and_rescale(ctx, tr.axes(kind)[1], tr.probs(kind)[layer])
    if not ctx.present:
        st.caption(KIND_EXPLAIN[kind].format(src=ctx.langs["src_name"], tgt=ctx.langs["tgt_name"])
                   + " Rows: queries; columns: keys; each row's weights sum to 1.")
    shows_caption(ctx, kind)
    if ctx.other is not None:
        _side_by_side(ctx, kind, layer, head)
        return
    q_tokens, k_tokens = tr.axes(kind)
    probs = tr.probs(kind)  # (L, h, i, j)
    mask = tr.attn[kind][layer]["mask"]  # (i, j) True = may attend, as the model used it
    sink = sink_key(probs[layer])
    if not ctx.present:  # below the page's captions
        show, hide = _show_and_rescale(ctx, k_tokens, probs[layer])
    zmax = robust_zmax(probs[layer], ignore_key=sink, mask=mask) if hide and measure == "weights" else None
    values, name, keys = probs, "weight", k_tokens  # (L, h, i, j) what the figures draw
    if measure != "weights":
        values, name, zmax, keys = carried(ctx, measure, kind, k_tokens)
        if len(keys) > len(k_tokens):  # ALTI+'s own-stream column is never masked
            mask = np.concatenate([mask, np.ones((mask.shape[0], 1), bool)], axis=1)
    layer_only = measure == "alti"  # ALTI+ is a layer's: one panel, whatever the head
    if zmax is not None and not ctx.present and measure == "weights":  # the colourbar says it too
        st.caption(md_escape(rescale_note(probs[layer], zmax, mask=mask)))
    if not ctx.present and measure == "weights":
        ok = rows_sum_to_one(probs)
        st.markdown((":material/check_circle: every row of every head sums to 1" if ok
                     else ":material/warning: some rows do not sum to 1")
                    + f" · masked cells are grey · layer {layer + 1} of {len(probs)}")
    if show("all heads of the layer"):
        heads = None if layer_only else shown_heads(ctx, cfg.n_heads, q_tokens, k_tokens)
        figure = (_layer_figure(values, q_tokens, keys, kind, layer, mask, name) if layer_only else
                  cached(heads_figure, values[layer], q_tokens, keys, kind, layer, mask=mask, zmax=zmax,
                         width_px=PAGE_WIDTH_PX, heads=heads, measure=name, share=kv_share(cfg)))
        chart(st, figure,
                  width="stretch", config=fig_config(ctx, f"attention_{kind}_L{layer + 1}_all-heads"),
                  key="heads_fig")
    b1, b2, _ = st.columns([1, 1, 2]) if not ctx.present else (None, None, None)
    # Short labels: a quarter of the page at 1280 px holds no more; the help says what is in the file.
    csv_button("All heads (CSV)", lambda: heads_csv(probs[layer], q_tokens, k_tokens), ctx,
               f"attention_{kind}_L{layer + 1}_all-heads", "csv_heads", b1,
               help=f"Every head of layer {layer + 1}: a `head` column, then the query token, then one column per key.")
    csv_button("This head (CSV)", lambda: matrix_csv(probs[layer, head], q_tokens, k_tokens), ctx,
               f"attention_{kind}_L{layer + 1}_H{head + 1}", "csv_head", b2,
               help=f"Layer {layer + 1}, head {head + 1}: the query token, then one column per key.")
    if show("one head") and not (layer_only and not ctx.present):  # ALTI+ is drawn once, above: a layer's
        figure = (_layer_figure(values, q_tokens, keys, kind, layer, mask, name) if layer_only else
                  cached(attention_figure, values[layer, head], q_tokens, keys, kind, mask=mask, zmax=zmax,
                         title=f"{KIND_NAMES[kind].split(' (')[0]}, layer {layer + 1}, head {head + 1}",
                         width_px=PAGE_WIDTH_PX, measure=name))
        chart(st, figure,
                  width="stretch", config=fig_config(ctx, f"attention_{kind}_L{layer + 1}_H{head + 1}"),
                  key="head_fig")
    if show("every layer × head"):
        if not ctx.present:  # presenter mode: the part's name is on the radio above
            st.markdown("#### Every layer × head")
            h = entropy(probs, mask)  # (L, h) nats, mean over query rows
            st.caption("Choose a layer and head above to open one large. Entropy (nats; lower = sharper attention) "
                       "per head: " + "; ".join(f"layer {i + 1}: " + ", ".join(f"{e:.2f}" for e in row)
                                                for i, row in enumerate(h)))
        chart(st, cached(overview_figure, values, kind, zmax=zmax, measure=name,
                         columns=["the layer's heads together"] if layer_only else None), width="stretch",
                  config=fig_config(ctx, f"attention_{kind}_every-layer-and-head"), key="overview_fig")
    if show("heads off"):
        ablation.render(ctx)


def _layer_figure(values, q_tokens, keys, kind: str, layer: int, mask, name: str):
    """A layer's ALTI+ matrix: one heatmap for the layer's heads together (0-based layer)."""
    return cached(attention_figure, values[layer, 0], q_tokens, keys, kind, mask=mask, zmax=1.0, measure=name,
                  title=f"{KIND_NAMES[kind].split(' (')[0]}, layer {layer + 1}: ALTI+, the layer's heads together",
                  width_px=PAGE_WIDTH_PX)


def _show_and_rescale(ctx: Context, k_tokens: list[str], probs) -> tuple:
    """The part of the page to show (presenter mode: one at a time) and the switch that rescales the colours."""
    show = sections(ctx, ["one head", "all heads of the layer", "every layer × head", "heads off"])
    hide = st.toggle("Rescale colours", key="rescale", persist_state="session",
                     help=f"Shows the weaker weights. When a few cells (each row's strongest key, or an attention "
                          f"sink such as '{k_tokens[sink_key(probs)]}') take most of the weight, the rest of the map "
                          "is pale. This sets the colour maximum to the 95th percentile of the other weights; stronger "
                          "cells saturate, and the colourbar says so.")
    return show, hide


def _side_by_side(ctx: Context, kind: str, layer: int, head: int) -> None:
    """Side A and side B, head by head, on one colour scale (each with its own token axes)."""
    a, b = ctx, ctx.other
    differ = heads_match(a, b, kind)
    if differ:
        st.warning(f"The two models cannot be aligned head by head ({differ}). Choose models of the same shape.")
        return
    sides = []
    for c in (a, b):
        t = c.result.trace
        q, k = t.axes(kind)
        sides.append(Side(c.label, t.probs(kind)[layer], q, k, t.attn[kind][layer]["mask"]))  # (h, i, j)
    with choices(ctx):
        top, right = st.columns([2, 1], vertical_alignment="center")  # a fifth of the page cut "Rescale colours"
        show = sections(ctx, ["one head", "all heads of the layer"], top, always=True)
    hide = right.toggle("Rescale colours", key="rescale", persist_state="session",
                        help="Sets the colour maximum to the larger of the two sides' 95th percentiles of the weaker "
                             "weights (each side without its strongest key column); the colourbar says so.")
    zmax = max(robust_zmax(s.probs, ignore_key=sink_key(s.probs), mask=s.mask) for s in sides) if hide else None
    heads = [head] if show("one head") else None
    what = f"H{head + 1}" if heads else "all-heads"
    if not ctx.present:
        st.caption("Rows are heads: head h of A sits beside head h of B. Both sides share one colour scale; each has "
                   "its own token axes.")
    chart(st, cached(side_by_side_figure, sides[0], sides[1], kind, layer, heads, zmax=zmax, width_px=PAGE_WIDTH_PX),
              width="stretch", config=fig_config(ctx, f"attention_side-by-side_{kind}_L{layer + 1}_{what}"),
              key="compare_fig")
    cols = st.columns(2) if not ctx.present else (None, None)
    for c, side, col, tag in zip((a, b), sides, cols, "AB"):
        csv_button(f"{tag}: layer {layer + 1}, head {head + 1} (CSV)",
                   lambda side=side: matrix_csv(side.probs[head], side.query_tokens, side.key_tokens), c,
                   f"attention_{kind}_L{layer + 1}_H{head + 1}", f"csv_compare_{tag}", col)
