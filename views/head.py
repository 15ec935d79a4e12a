"""Inside one head: Q, K, V, the scores, scaling, mask, softmax, dropout and the weighted sum of V."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz.head import head_pipeline_figures
from views.state import Context
from views.widgets import kind_layer_head

STEPS = {
    "Q": "1 · Queries: the layer input times W_Q, this head's slice (one row per query token).",
    "K": "2 · Keys: the input times W_K (for cross-attention: the encoder output).",
    "V": "3 · Values: the input times W_V: what each key hands over if it is attended to.",
    "scores": "4 · Raw scores QKᵀ: how well each query matches each key.",
    "scaled": "5 · Scaled by 1/√d_k, so that the softmax does not saturate as d_k grows.",
    "masked": "6 · Mask: forbidden cells are set to −∞ before the softmax, so they get exactly zero weight.",
    "softmax": "7 · Softmax along each row: weights ≥ 0 that sum to 1.",
    "dropout": "8 · In training only, dropout zeroes weights at random and rescales the rest by 1/(1−p): rows no "
               "longer sum to 1. (At inference, as everywhere else in this app, there is no dropout.)",
    "output": "9 · Output: the weighted sum of the value vectors, one per query. The heads' outputs are concatenated "
              "and multiplied by W_O.",
}


def render(ctx: Context) -> None:
    tr, cfg = ctx.result.trace, ctx.cfg
    st.subheader("Inside one head")
    kind, layer, head = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads)
    a = tr.attn[kind][layer]
    q_tokens, k_tokens = tr.axes(kind)
    p = cfg.attn_dropout
    # Dropout is simulated on a copy of the weights with a fixed seed: the shared model stays in eval mode.
    rng = np.random.default_rng(0)
    keep = rng.random(a["probs"][head].shape) >= p
    dropped = a["probs"][head] * keep / (1 - p) if p > 0 else None
    mask = a["mask"]
    figs = head_pipeline_figures(a["q"][head], a["k"][head], a["v"][head], None, mask if not mask.all() else None,
                                 a["probs"][head], a["out"][head], q_tokens, k_tokens, kind, dropout_probs=dropped)
    st.caption(f"d_model {cfg.d_model} is split into {cfg.n_heads} heads of d_k = {cfg.d_k}. "
               f"Layer {layer + 1}, head {head + 1}; attention dropout p = {p}.")
    check = np.abs(a["scores"][head] - a["q"][head] @ a["k"][head].T / np.sqrt(cfg.d_k)).max()
    out_check = np.abs(a["out"][head] - a["probs"][head] @ a["v"][head]).max()
    st.markdown(f":material/check_circle: recomputed from Q and K, the scaled scores match the model's to {check:.1e}; "
                f"weights · V matches the head output to {out_check:.1e}")
    # Read left to right, top to bottom: Q K V, then the score matrices, then the weights, then the output.
    rows = [["Q", "K", "V"], ["scores", "scaled", "masked"], ["softmax", "dropout"], ["output"]]
    for row in rows:
        names = [n for n in row if n in figs]
        for col, name in zip(st.columns(len(names)) if len(names) > 1 else [st.container()], names):
            with col:
                st.markdown(f"**{STEPS.get(name, name)}**")
                st.plotly_chart(figs[name], width="stretch", key=f"head_{name}")
