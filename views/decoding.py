"""Decoding: greedy decoding step by step, choosing another candidate, and beam search beside it."""
from __future__ import annotations

import streamlit as st

from viz.decoding import candidates_figure, decoding_table, step_cross_attention_figure
from views.state import Context, beam_translation, trace_sentence
from views.text import md_escape


def _force(prefix: list[str]) -> None:
    st.session_state["prefix"] = tuple(prefix)
    st.session_state["dec_step"] = len(prefix) + 1  # show what happens right after the choice


def render(ctx: Context) -> None:
    ss = st.session_state
    st.subheader("Decoding, step by step")
    st.write("The decoder writes one token per step. At each step it sees the German sentence (through cross-attention) "
             "and the English prefix written so far, and gives a probability to every word of its vocabulary; greedy "
             "decoding takes the most probable one, and stops at `<eos>`.")
    prefix = tuple(ss.get("prefix", ()))
    if ss.get("prefix_text") != ctx.text:  # a new sentence starts from plain greedy decoding
        prefix, ss["prefix"], ss["prefix_text"] = (), (), ctx.text
    res = trace_sentence(ctx.key, ctx.text, ctx.max_len, prefix) if prefix else ctx.result
    steps = res.steps
    if prefix:
        c1, c2 = st.columns([4, 1])
        c1.info(f"You forced the first {len(prefix)} token(s): {md_escape(' '.join(prefix))}. Decoding continued greedily.")
        c2.button("Back to greedy", on_click=_force, args=([],))
    n = len(steps)
    if n == 0:
        st.info("Nothing to decode.")
        return
    ss["dec_step"] = min(max(int(ss.get("dec_step", 1)), 1), n)
    step_no = st.slider("Step", 1, n, key="dec_step") if n > 1 else 1
    step = steps[step_no - 1]
    tv = ctx.translator.tgt_vocab
    prefix_tokens = tv.decode(step.prefix)
    st.markdown(f"**Step {step_no} of {n}.** The decoder has read: **{md_escape(' '.join(prefix_tokens))}**")
    cands = tv.decode(step.top_ids)
    chosen_idx = step.top_ids.index(step.chosen) if step.chosen in step.top_ids else None
    left, right = st.columns(2)
    with left:
        labels, probs = list(cands), list(step.top_probs)
        if chosen_idx is None:  # a forced token outside the top-k: show it too
            labels.append(tv.itos[step.chosen])
            probs.append(step.chosen_prob)
            chosen_idx = len(labels) - 1
        st.plotly_chart(candidates_figure(labels, probs, chosen_idx, title=f"step {step_no}: next-token candidates"),
                        width="stretch", key="cands")
        st.markdown(f"Chosen: **{md_escape(tv.itos[step.chosen])}** (p = {step.chosen_prob:.2f})"
                    + (" — forced by you" if step.forced else ""))
        st.caption("Pick another candidate: decoding goes on greedily from it.")
        cols = st.columns(len(cands))
        for c, (tok, tid) in zip(cols, zip(cands, step.top_ids)):
            c.button(md_escape(tok), key=f"force_{step_no}_{tid}", disabled=tid == step.chosen,
                     on_click=_force, args=(prefix_tokens[1:] + [tok],))
    with right:
        cfg = ctx.cfg
        c1, c2 = st.columns(2)
        layer = c1.selectbox("Layer", range(1, cfg.n_decoder_layers + 1), index=cfg.n_decoder_layers - 1,
                             key="dec_layer")
        head = c2.selectbox("Head", ["mean of heads"] + list(range(1, cfg.n_heads + 1)), key="dec_head")
        st.caption(f"Cross-attention of layer {layer}, {head if head == 'mean of heads' else f'head {head}'}.")
        cross = step.cross[layer - 1]  # (h, s)
        weights = cross.mean(0) if head == "mean of heads" else cross[head - 1]
        st.plotly_chart(step_cross_attention_figure(weights, res.source.axis_tokens,
                                                    title=f"step {step_no}: where it looked in the German"),
                        width="stretch", key="step_cross")
    st.markdown("#### All steps")
    rows = [{"step": i + 1, "prefix": " ".join(tv.decode(s.prefix)), "chosen": tv.itos[s.chosen], "prob": s.chosen_prob}
            for i, s in enumerate(steps)]
    st.dataframe(decoding_table(rows), hide_index=True, width="stretch")
    st.markdown("#### Greedy and beam search")
    beam = int(ss.get("beam", 5))
    b = beam_translation(ctx.key, ctx.text, beam, ctx.max_len)
    g1, g2 = st.columns(2)
    g1.markdown(f"**Greedy** ({res.seconds * 1000:.0f} ms, traced)  \n{md_escape(res.text) or '∅'}")
    g2.markdown(f"**Beam search, beam {beam}** ({b.seconds * 1000:.0f} ms)  \n{md_escape(b.text) or '∅'}")
    st.caption("Beam search keeps the best few partial translations at each step and returns the one with the highest "
               "length-normalised log-probability. The beam size is set in the sidebar's decoding options.")
