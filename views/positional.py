"""Positional encoding: the sine/cosine waves, the whole matrix, and similarity between positions."""
from __future__ import annotations

import streamlit as st

from viz.positional import pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure
from views.state import Context


def render(ctx: Context) -> None:
    d = ctx.cfg.d_model
    n_src = len(ctx.result.source.axis_tokens)
    st.subheader("Positional encoding")
    st.write("Attention itself ignores word order, so every position gets a fixed vector of sines and cosines "
             "of different wavelengths, added to the token's embedding: PE[pos, 2i] = sin(pos / 10000^(2i/d)), "
             "PE[pos, 2i+1] = cos(pos / 10000^(2i/d)). Low dimensions change quickly from one position to the next, "
             "high dimensions slowly.")
    c1, c2 = st.columns([2, 1])
    n = c2.slider("Positions shown", 10, min(256, ctx.cfg.max_len), max(50, n_src), key="pe_positions")
    dims = c1.multiselect("Dimensions (lines)", list(range(d)), default=[i for i in (0, 1, 4, 5, 16, 17, 64, 65) if i < d], key="pe_dims",
                          help="Even dimensions are sines, odd ones cosines.")
    pe = sinusoidal_encoding(n, d)  # same formula as model/layers.py; a test checks they agree
    st.plotly_chart(waves_figure(pe, dims or [0]), width="stretch")
    st.plotly_chart(pe_heatmap(pe), width="stretch")
    ref = st.slider("Compare every position with position", 0, n - 1, min(10, n - 1), key="pe_ref")
    st.plotly_chart(position_similarity_figure(pe, ref_position=ref), width="stretch")
    st.caption("The dot product PE[i]·PE[j] depends only on the distance i − j and falls off with it: nearby positions "
               f"look alike, distant ones less so. Your sentence uses positions 0–{n_src - 1} on the source side.")
