"""Attention: every layer and head of encoder self-, decoder self- and cross-attention."""
from __future__ import annotations

import streamlit as st

from model.experiments import entropy
from viz.attention import (attention_figure, heads_figure, overview_figure, rescale_note, robust_zmax, rows_sum_to_one,
                           sink_key)
from viz.common import PAGE_WIDTH_PX
from views import ablation
from views.state import Context
from views.text import md_escape
from viz.tables import heads_csv, matrix_csv
from views.widgets import csv_button, fig_config, kind_layer_head, shows_caption

EXPLAIN = {
    "enc_self": "Each German token (row) mixes in information from every German token (column), in both directions.",
    "dec_self": "Each English position (row) looks only at itself and earlier positions (columns): later ones are "
                "masked, since at generation time they do not exist yet. Row i is the step that predicts output token i+1.",
    "cross": "Each English position (row) looks at the German source (columns). Row i is the step that predicts "
             "output token i+1.",
}


def render(ctx: Context) -> None:
    tr, cfg = ctx.result.trace, ctx.cfg
    st.subheader("Attention")
    kind, layer, head = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads)
    st.caption(EXPLAIN[kind] + " Rows: queries; columns: keys; each row's weights sum to 1.")
    shows_caption(ctx, kind)
    q_tokens, k_tokens = tr.axes(kind)
    probs = tr.probs(kind)  # (L, h, i, j)
    mask = tr.attn[kind][layer]["mask"]  # (i, j) True = may attend, as the model used it
    sink = sink_key(probs[layer])
    hide = st.toggle("Rescale colours to show the weaker weights", key="rescale",
                     help=f"When a few cells (each row's strongest key, or an attention sink such as "
                          f"'{k_tokens[sink]}') take most of the weight, the rest of the map is pale. This sets the colour "
                          "maximum to the 95th percentile of the other weights; stronger cells saturate, and the "
                          "colourbar says so.")
    zmax = robust_zmax(probs[layer], ignore_key=sink, mask=mask) if hide else None
    if zmax is not None:
        st.caption(md_escape(rescale_note(probs[layer], zmax, mask=mask)))
    ok = rows_sum_to_one(probs)
    st.markdown((":material/check_circle: every row of every head sums to 1" if ok else ":material/warning: some rows do not sum to 1")
                + f" · masked cells are grey · layer {layer + 1} of {len(probs)}")
    st.plotly_chart(heads_figure(probs[layer], q_tokens, k_tokens, kind, layer, mask=mask, zmax=zmax,
                                 width_px=PAGE_WIDTH_PX),
                    width="stretch", config=fig_config(ctx, f"attention_{kind}_L{layer + 1}_all-heads"), key="heads_fig")
    b1, b2, _ = st.columns([1, 1, 2])
    csv_button(f"All heads of layer {layer + 1} (CSV)", lambda: heads_csv(probs[layer], q_tokens, k_tokens), ctx,
               f"attention_{kind}_L{layer + 1}_all-heads", "csv_heads", b1)
    csv_button(f"Layer {layer + 1}, head {head + 1} (CSV)", lambda: matrix_csv(probs[layer, head], q_tokens, k_tokens), ctx,
               f"attention_{kind}_L{layer + 1}_H{head + 1}", "csv_head", b2)
    st.plotly_chart(attention_figure(probs[layer, head], q_tokens, k_tokens, kind, mask=mask, zmax=zmax,
                                     title=f"layer {layer + 1}, head {head + 1}", width_px=PAGE_WIDTH_PX),
                    width="stretch", config=fig_config(ctx, f"attention_{kind}_L{layer + 1}_H{head + 1}"), key="head_fig")
    h = entropy(probs, mask)  # (L, h) nats, mean over query rows
    st.markdown("#### Every layer × head")
    st.caption("Choose a layer and head above to open one large. Entropy (nats; lower = sharper attention) per head: "
               + "; ".join(f"layer {i + 1}: " + ", ".join(f"{e:.2f}" for e in row) for i, row in enumerate(h)))
    st.plotly_chart(overview_figure(probs, kind, zmax=zmax), width="stretch", config=fig_config(ctx, f"attention_{kind}_every-layer-and-head"), key="overview_fig")
    ablation.render(ctx)
