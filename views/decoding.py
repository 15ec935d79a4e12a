"""Decoding: step by step, choosing another candidate, and greedy and beam search side by side."""
from __future__ import annotations

import streamlit as st

from viz.common import PAGE_WIDTH_PX
from viz.decoding import candidates_figure, decoding_table, step_cross_attention_figure
from views.state import Context, beam_translation, trace_sentence
from views.text import md_escape
from viz.tables import candidates_csv
from views.widgets import csv_button, fig_config, shows_caption


def _force(prefix: list[str]) -> None:
    st.session_state["prefix"] = tuple(prefix)
    st.session_state["dec_step"] = len(prefix) + 1  # show what happens right after the choice


def render(ctx: Context) -> None:
    ss = st.session_state
    cfg = ctx.cfg
    st.subheader("Decoding, step by step")
    st.write("The decoder writes one token per step. At each step it sees the German sentence (through cross-attention) "
             "and the English prefix written so far, and gives a probability to every token of its vocabulary; greedy "
             "decoding takes the most probable one and stops at `<eos>`. `<bos>` and `<pad>` are never generated: "
             "their probability is set to 0 before choosing.")
    res = ctx.result
    shows_caption(ctx)
    prefix = tuple(ss.get("prefix", ()))
    if prefix:
        c1, c2 = st.columns([4, 1])
        c1.info(f"You forced the first {len(prefix)} token(s): {md_escape(' '.join(prefix))}. Decoding continued greedily.")
        c2.button("Undo the forcing", on_click=_force, args=([],), key="unforce")
    steps = res.steps or []
    n = len(steps)
    if n == 0:
        st.info("Nothing to decode.")
        return
    ss["dec_step"] = min(max(int(ss.get("dec_step", 1)), 1), n)
    step_no = st.slider("Step", 1, n, key="dec_step") if n > 1 else 1
    step = steps[step_no - 1]
    st.markdown(f"**Step {step_no} of {n}.** The decoder has read: **{md_escape(' '.join(step.prefix_tokens))}**")
    left, right = st.columns(2)
    with left:
        labels, probs = list(step.top_tokens), list(step.top_probs)
        chosen_idx = step.top_ids.index(step.chosen) if step.chosen in step.top_ids else None
        if chosen_idx is None:  # a forced token outside the top-k: show it too
            labels.append(step.chosen_token)
            probs.append(step.chosen_prob)
            chosen_idx = len(labels) - 1
        st.plotly_chart(candidates_figure(labels, probs, chosen_idx, title=f"step {step_no}: next-token candidates"),
                        width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_candidates"), key="cands")
        csv_button(f"Step {step_no} candidates (CSV)", lambda: candidates_csv(labels, probs, chosen_idx), ctx,
                   f"decoding_step{step_no}_candidates", "csv_cands")
        how = " (chosen by beam search)" if ctx.mode == "beam" else " (forced by you)" if step.forced else ""
        st.markdown(f"Chosen: **{md_escape(step.chosen_token)}** (p = {step.chosen_prob:.3f}){how}")
        st.caption("Pick another candidate: decoding goes on greedily from it.")
        with st.container(horizontal=True, key="force_buttons"):
            for tok, tid in zip(step.top_tokens, step.top_ids):
                st.button(md_escape(tok), key=f"force_{step_no}_{tid}", disabled=tid == step.chosen,
                          on_click=_force, args=(list(step.prefix_tokens[1:]) + [tok],), width="content")
    with right:
        layers = cfg.n_decoder_layers
        if not 1 <= int(ss.get("dec_layer", 0)) <= layers:
            ss["dec_layer"] = layers  # 0 in the URL: the last layer
        ss["dec_head"] = min(max(int(ss.get("dec_head", 0)), 0), cfg.n_heads)
        c1, c2 = st.columns(2)
        layer = c1.selectbox("Layer", list(range(1, layers + 1)), key="dec_layer")
        head = c2.selectbox("Head", list(range(0, cfg.n_heads + 1)), key="dec_head",
                            format_func=lambda h: "mean of heads" if h == 0 else f"head {h}")
        cross = step.cross[layer - 1]  # (h, s) this step's query over the source
        weights = cross.mean(0) if head == 0 else cross[head - 1]
        what = "mean of heads" if head == 0 else f"head {head}"
        st.plotly_chart(step_cross_attention_figure(weights, res.source.axis_tokens,
                                                    title=f"step {step_no}: cross-attention, layer {layer}, {what}",
                                                    width_px=PAGE_WIDTH_PX // 2),
                        width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_cross_L{layer}_{what}"), key="step_cross")
    st.markdown("#### All steps")
    rows = [{"step": i + 1, "prefix": " ".join(s.prefix_tokens), "chosen": s.chosen_token, "prob": s.chosen_prob}
            for i, s in enumerate(steps)]
    st.dataframe(decoding_table(rows), hide_index=True, width="stretch")
    st.markdown("#### Greedy and beam search")
    beam = int(ss.get("beam", 5))
    g = trace_sentence(ctx.key, ctx.text, ctx.max_len)
    b = beam_translation(ctx.key, ctx.text, beam, ctx.max_len)
    g1, g2 = st.columns(2)
    g1.markdown(f"**Greedy** ({g.seconds * 1000:.0f} ms, traced)  \n{md_escape(g.text) or '∅'}")
    g2.markdown(f"**Beam search, beam {beam}** ({b.seconds * 1000:.0f} ms)  \n{md_escape(b.text) or '∅'}"
                + ("" if b.finished else "  \n(stopped at the length limit before `<eos>`)"))
    st.caption("Beam search keeps the best few partial translations at each step and returns the one with the highest "
               "length-normalised log-probability. The beam size is set in the sidebar's decoding options, where you "
               "can also choose which of the two the figures trace.")
