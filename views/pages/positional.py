"""Positional encoding, as the model has it: the sine/cosine waves, the whole matrix and similarity between
positions (a fixed table); the learned vectors this sentence got (mBART); or the bias each head adds to its scores
by relative distance (T5, which adds no vector). Everything drawn was recorded by the model for this sentence or is
the formula it uses, checked against what it recorded."""
from __future__ import annotations

import streamlit as st

from model.analysis.experiments import max_abs_diff, position_similarity
from views.parts import rotary
from views.parts.counts import source_count
from views.parts.widgets import chart, choices, fig_config, sections
from views.plumbing.figcache import cached
from views.plumbing.state import Context
from views.plumbing.urlstate import within
from viz.positional import cosine_rows, pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure
from viz.relative import bias_by_distance, bias_distance_figure, bias_matrix_figure


def positions_of(cfg) -> str:
    """How the model encodes positions: "sinusoidal", "learned", "relative" or "rotary" (model/nn/config.py)."""
    return getattr(cfg, "positions", "sinusoidal")


def render(ctx: Context) -> None:
    kind = positions_of(ctx.cfg)
    if kind == "learned":
        return _learned(ctx)
    if kind == "relative":
        return _relative(ctx)
    if kind == "rotary":
        return rotary.render(ctx)
    ss = st.session_state
    d = ctx.cfg.d_model
    n_src = len(ctx.result.source.axis_tokens)
    layout, offset = getattr(ctx.cfg, "pe_layout", "interleaved"), getattr(ctx.cfg, "pos_offset", 0)
    if not ctx.present:  # presenter mode: the part, one row of its controls, its figure
        st.subheader("Positional encoding")
        st.write(_explanation(layout, d, offset))
    top = min(256, ctx.cfg.max_len)
    ss["pe_positions"] = within(ss["pe_positions"], 10, top)
    ss["pe_dims"] = [i for i in ss["pe_dims"] if 0 <= i < d]
    parts = ["waves", "the whole matrix", "similarity between positions"]
    with choices(ctx):  # presenter: the part first, then only its controls
        show = sections(ctx, parts) if ctx.present else None
        c1, c2 = st.columns([2, 1])
        n = c2.slider("Positions shown", 10, top, key="pe_positions", persist_state="session")
        dims = ss["pe_dims"]
        if show is None or show("waves"):
            sines = {"sin_then_cos": (d + 1) // 2, "fairseq": d // 2}.get(layout)
            parity = (f"Dimensions 0–{sines - 1} are sines, the others their cosines." if sines
                      else "Even dimensions are sines, odd ones cosines.")
            dims = c1.multiselect("Dimensions (lines)", list(range(d)), key="pe_dims", persist_state="session",
                                  help=parity)
        elif show("similarity between positions"):
            ss["pe_ref"] = within(ss["pe_ref"], 0, n - 1)
            c1.slider("Compare every position with position", 0, n - 1, key="pe_ref", persist_state="session")
    pe = sinusoidal_encoding(n, d, layout, offset)  # (n, d) the formula, in this model's layout and rows
    recorded = ctx.result.trace.src_embed["positional"]  # (s, d) what the model added to this sentence
    m = min(len(recorded), n)
    check = (f":material/check_circle: the formula matches the encoding the model added to this sentence's "
             f"{len(recorded)} positions (one per source token: "
             f"{source_count(len(recorded), ctx.result.source.eos_token)}) to "
             f"{max_abs_diff(pe[:m], recorded[:m]):.1e}.")
    if show is None:
        st.caption(check)
        show = sections(ctx, parts)
    if show("waves"):
        chart(st, cached(waves_figure, pe, dims or [0], layout), width="stretch",
              config=fig_config(ctx, "positional_waves"))
    if show("the whole matrix"):
        chart(st, cached(pe_heatmap, pe), width="stretch", config=fig_config(ctx, "positional_matrix"))
    if show("similarity between positions"):
        _similarity(ctx, pe, n, n_src)
    if ctx.present:
        st.caption(check)


def _explanation(layout: str, d: int, offset: int = 0) -> str:
    rows = (f" Position p reads row p + {offset} of the table: its first {offset} rows are never added."
            if offset else "")
    if layout == "fairseq":  # M2M100's and NLLB's table: sines then cosines, wavelengths over d/2 − 1 steps
        formula = ("PE[pos, i] = sin(pos / 10000^(i/(d/2 − 1))) for i < d/2 and PE[pos, d/2 + i] = "
                   "cos(pos / 10000^(i/(d/2 − 1))) (this model keeps all the sines first, then all the cosines, as "
                   "fairseq's M2M100 and NLLB do)")
        low = "Dimensions near 0 and near d/2"
    elif layout == "sin_then_cos":  # Marian's table: the same waves, sines first, then their cosines
        formula = ("PE[pos, i] = sin(pos / 10000^(2i/d)) for i < d/2 and PE[pos, d/2 + i] = cos(pos / 10000^(2i/d)) "
                   "(this model keeps all the sines first, then all the cosines, as Marian does)")
        low = "Dimensions near 0 and near d/2"
    else:
        formula = "PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))"
        low = "Low dimensions"
    return ("Attention itself ignores word order, so every position gets a fixed vector of sines and cosines "
            f"of different wavelengths, added to the token's embedding: {formula}. {low} change quickly from one "
            f"position to the next, the others slowly.{rows}")


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
               f"{far}. Your sentence's {source_count(n_src, ctx.result.source.eos_token)} use positions "
               f"0–{n_src - 1} on the source side.")


def _side(ctx: Context, what: tuple[str, str]) -> str:
    """The side chosen (URL emb_side, shared with the Embeddings page): "src" or "tgt"."""
    names = {"src": f"source ({ctx.langs['src_name']}, {what[0]})",
             "tgt": f"target ({ctx.langs['tgt_name']}, {what[1]})"}
    return st.radio("Side", ["src", "tgt"], horizontal=True, key="emb_side", persist_state="session",
                    label_visibility="collapsed" if ctx.present else "visible", format_func=names.get)


def _learned(ctx: Context) -> None:
    """Learned positions (mBART): the vectors the model added to this sentence, read from its trained table."""
    tr, cfg, ss = ctx.result.trace, ctx.cfg, st.session_state
    offset = getattr(cfg, "pos_offset", 0)
    if not ctx.present:
        st.subheader("Positional encoding")
        st.write("Attention itself ignores word order, so every position gets a vector added to the token's "
                 "embedding. This model learned its position vectors in training, with no formula behind them: "
                 f"a table of {cfg.max_len + offset} {cfg.d_model}-dimensional rows for each side, and position p "
                 f"reads row p + {offset}. Shown: the vectors the model added to this sentence, as it recorded "
                 "them.")
    side = _side(ctx, ("encoder input", "decoder input"))
    vectors = (tr.src_embed if side == "src" else tr.tgt_embed)["positional"]  # (n, d) recorded
    n = len(vectors)
    show = sections(ctx, ["the whole matrix", "similarity between positions"])
    if show("the whole matrix"):
        chart(st, cached(pe_heatmap, vectors, f"Learned position vectors of this sentence's {n} positions", None),
              width="stretch", config=fig_config(ctx, f"positional_{side}_learned-matrix"))
    if show("similarity between positions"):
        ss["pe_ref"] = within(ss["pe_ref"], 0, n - 1)
        ref = st.slider("Compare every position with position", 0, n - 1, key="pe_ref", persist_state="session")
        chart(st, cached(position_similarity_figure, vectors, ref_position=ref, cosine=True), width="stretch",
              config=fig_config(ctx, f"positional_{side}_learned-similarity_to_{ref}"))
        sim, far = position_similarity(cosine_rows(vectors), ref)  # dot products of unit vectors: cosines
        st.caption(f"Cosine similarity of the learned vectors: {sim[ref]:.2f} at position {ref} itself, lowest "
                   f"({sim[far]:.2f}) at position {far}. Nothing forces it to depend on the distance alone: only "
                   "training shaped these vectors.")


def _relative(ctx: Context) -> None:
    """Relative positions (T5): no vector is added; each head adds a bias per distance to its scores."""
    tr, cfg, ss = ctx.result.trace, ctx.cfg, st.session_state
    if not ctx.present:
        st.subheader("Positional encoding")
        st.write("This model adds no position vector to its embeddings. Instead every self-attention layer adds a "
                 "learned number to each score QKᵀ, one per head and per bucket of the key's distance from the "
                 f"query ({getattr(cfg, 'rel_buckets', 32)} buckets: short distances one each, longer ones sharing "
                 f"buckets up to {getattr(cfg, 'rel_max_distance', 128)}). The encoder's bias sees keys on both "
                 "sides; the decoder's only keys up to the query. Each stack computes it once for all its layers; "
                 "cross-attention has none. Shown: the bias the model recorded for this sentence.")
    enc, dec = tr.pos_bias("enc_self"), tr.pos_bias("dec_self")
    if enc is None or dec is None:
        st.info("This trace holds no position bias: translate the sentence again to record it.")
        return
    show = sections(ctx, ["bias by distance", "one head's bias matrix"])
    if show("bias by distance"):
        (d_enc, v_enc, s_enc), (d_dec, v_dec, s_dec) = bias_by_distance(enc), bias_by_distance(dec, causal=True)
        chart(st, cached(bias_distance_figure, (d_enc, v_enc), (d_dec, v_dec)), width="stretch",
              config=fig_config(ctx, "positional_bias-by-distance"))
        st.caption(f"Each point is the value on one diagonal (one distance) of the recorded {enc.shape[1]} × "
                   f"{enc.shape[2]} encoder and {dec.shape[1]} × {dec.shape[2]} decoder matrices; every cell of a "
                   f"diagonal holds the same number (largest spread {max(s_enc, s_dec):.1e}). The decoder's keys "
                   "after the query are masked, so its distances stop at 0.")
    if show("one head's bias matrix"):
        c1, c2 = st.columns([3, 1])
        with c1:
            side = _side(ctx, ("encoder", "decoder"))
        ss["head"] = within(ss["head"], 1, cfg.n_heads)
        head = c2.selectbox("Head", list(range(1, cfg.n_heads + 1)), key="head", persist_state="session") - 1
        kind = "enc_self" if side == "src" else "dec_self"
        tokens = tr.axes(kind)[0]
        mask = tr.attn[kind][0]["mask"]  # (i, j) the mask the model used with it
        stack = "encoder" if side == "src" else "decoder"
        chart(st, cached(bias_matrix_figure, tr.pos_bias(kind)[head], tokens, tokens,
                         f"Position bias of {stack} head {head + 1}, added to every {stack} layer's self-attention "
                         "scores", None if mask.all() else mask, ctx.langs[side]),
              width="stretch", config=fig_config(ctx, f"positional_{stack}_bias_H{head + 1}"))
