"""Positional encoding: the sine/cosine waves, the whole matrix, and similarity between positions."""
from __future__ import annotations

import streamlit as st

from model.service import max_abs_diff, position_similarity
from views.parts.widgets import chart, fig_config, sections
from views.plumbing.figcache import cached
from views.plumbing.state import Context
from views.plumbing.urlstate import within
from viz.positional import pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure
from viz.theme import below_controls


def render(ctx: Context) -> None:
    ss = st.session_state
    d = ctx.cfg.d_model
    n_src = len(ctx.result.source.axis_tokens)
    layout = getattr(ctx.cfg, "pe_layout", "interleaved")
    if not ctx.present:  # presenter mode: the part, one row of its controls, its figure
        st.subheader("Positional encoding")
        st.write(_explanation(layout, d))
    top = min(256, ctx.cfg.max_len)
    ss["pe_positions"] = within(ss["pe_positions"], 10, top)
    ss["pe_dims"] = [i for i in ss["pe_dims"] if 0 <= i < d]
    parts = ["waves", "the whole matrix", "similarity between positions"]
    show = sections(ctx, parts) if ctx.present else None  # presenter: the part first, then only its controls
    c1, c2 = st.columns([2, 1])
    n = c2.slider("Positions shown", 10, top, key="pe_positions", persist_state="session")
    dims = ss["pe_dims"]
    if show is None or show("waves"):
        parity = (f"Dimensions 0–{(d + 1) // 2 - 1} are sines, the others their cosines." if layout == "sin_then_cos"
                  else "Even dimensions are sines, odd ones cosines.")
        dims = c1.multiselect("Dimensions (lines)", list(range(d)), key="pe_dims", persist_state="session", help=parity)
    elif show("similarity between positions"):
        ss["pe_ref"] = within(ss["pe_ref"], 0, n - 1)
        c1.slider("Compare every position with position", 0, n - 1, key="pe_ref", persist_state="session")
    pe = sinusoidal_encoding(n, d, layout)  # (n, d) the formula, in this model's layout
    recorded = ctx.result.trace.src_embed["positional"]  # (s, d) what the model added to this sentence
    m = min(len(recorded), n)
    check = (f":material/check_circle: the formula matches the encoding the model added to this sentence's "
             f"{len(recorded)} positions to {max_abs_diff(pe[:m], recorded[:m]):.1e}.")
    if show is None:
        st.caption(check)
        show = sections(ctx, parts)
    with below_controls(rows=1, labelled=1):  # presenter: the part radio, then the row of sliders
        if show("waves"):
            chart(st, cached(waves_figure, pe, dims or [0], layout), width="stretch",
                  config=fig_config(ctx, "positional_waves"))
        if show("the whole matrix"):
            chart(st, cached(pe_heatmap, pe), width="stretch", config=fig_config(ctx, "positional_matrix"))
        if show("similarity between positions"):
            _similarity(ctx, pe, n, n_src)
    if ctx.present:
        st.caption(check)


STATE = ("pe_positions", "pe_dims", "pe_ref")  # the session's choices prepare gets


def prepare(ctx: Context, state: dict) -> None:
    """Build the three figures a first visit will show, for the session's choices `state`, without drawing anything
    (views/plumbing/prefetch.py runs it in the background while another page is on screen). They do not depend on the
    sentence: after the first visit with these choices they are kept."""
    d, layout = ctx.cfg.d_model, getattr(ctx.cfg, "pe_layout", "interleaved")
    n = within(state.get("pe_positions"), 10, min(256, ctx.cfg.max_len))
    pe = sinusoidal_encoding(n, d, layout)
    cached(waves_figure, pe, [i for i in state.get("pe_dims") or () if 0 <= i < d] or [0], layout)
    cached(pe_heatmap, pe)
    cached(position_similarity_figure, pe, ref_position=within(state.get("pe_ref"), 0, n - 1))


def _explanation(layout: str, d: int) -> str:
    if layout == "sin_then_cos":  # Marian's table: the same waves, sines first, then their cosines
        formula = ("PE[pos, i] = sin(pos / 10000^(2i/d)) for i < d/2 and PE[pos, d/2 + i] = cos(pos / 10000^(2i/d)) "
                   "(this model keeps all the sines first, then all the cosines, as Marian does)")
        low = "Dimensions near 0 and near d/2"
    else:
        formula = "PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))"
        low = "Low dimensions"
    return ("Attention itself ignores word order, so every position gets a fixed vector of sines and cosines "
            f"of different wavelengths, added to the token's embedding: {formula}. {low} change quickly from one "
            "position to the next, the others slowly.")


def _similarity(ctx: Context, pe, n: int, n_src: int) -> None:
    ss = st.session_state
    if ctx.present:  # drawn in the row of sliders above
        ref = ss["pe_ref"]
    else:
        ss["pe_ref"] = within(ss["pe_ref"], 0, n - 1)
        ref = st.slider("Compare every position with position", 0, n - 1, key="pe_ref", persist_state="session")
    chart(st, cached(position_similarity_figure, pe, ref_position=ref), width="stretch",
          config=fig_config(ctx, f"positional_similarity_to_{ref}"))
    sim, far = position_similarity(pe, ref)
    st.caption("The dot product PE[i]·PE[j] depends only on the distance i − j (a property of the formula, for any "
               f"model). Here it is {sim[ref]:.1f} at position {ref} itself and lowest ({sim[far]:.1f}) at position "
               f"{far}. Your sentence uses positions 0–{n_src - 1} on the source side.")
