"""Masks: the padding mask in a batch, the causal mask, and what goes wrong without them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from viz.attention import attention_figure
from viz.masks import causal_mask, mask_figure, padding_demo_figure, padding_mask
from views.state import LONGER_EXAMPLE, Context, padded_batch, teacher_forced
from views.text import md_escape


def _layer_head(cfg, n_layers: int, key: str) -> tuple[int, int]:
    c1, c2, _ = st.columns([1, 1, 3])
    layer = c1.selectbox("Layer", range(1, n_layers + 1), key=f"{key}_layer")
    head = c2.selectbox("Head", range(1, cfg.n_heads + 1), key=f"{key}_head")
    return layer - 1, head - 1


def _padding(ctx: Context) -> None:
    st.markdown("### Padding mask")
    st.write("Sentences are trained in batches, so shorter ones are filled up with `<pad>` tokens. The padding mask "
             "hides the pads **as keys** (columns): no real token takes information from them. Pad positions are "
             "still **queries** (rows) and compute attention of their own, which is simply never used.")
    longer = LONGER_EXAMPLE
    if len(ctx.translator.prepare(longer).ids) <= len(ctx.result.source.ids):
        longer = ctx.text + " " + LONGER_EXAMPLE  # the partner must be longer for padding to appear
    use_mask = st.toggle("Padding mask on", value=True, key="pad_mask_on")
    demo = padded_batch(ctx.key, ctx.text, longer, use_mask)
    tr = demo["trace"]
    st.caption("Batched with: " + md_escape(" ".join(demo["longer_tokens"])))
    layer, head = _layer_head(ctx.cfg, ctx.cfg.n_encoder_layers, "pad")
    probs = tr.attn["enc_self"][layer]["probs"][head]  # (s, s) with pad rows and columns
    toks = tr.src_tokens
    c1, c2 = st.columns([3, 2])
    if use_mask:
        c1.plotly_chart(padding_demo_figure(probs, toks, toks, title=f"encoder self-attention, layer {layer + 1}, "
                                            f"head {head + 1}: pad keys masked"), width="stretch")
    else:
        c1.plotly_chart(attention_figure(probs, toks, toks, "enc_self", title="padding mask OFF: weight leaks onto "
                                         "&lt;pad&gt; keys"), width="stretch")
    c2.plotly_chart(mask_figure(np.broadcast_to(padding_mask(toks), (len(toks), len(toks))) if use_mask else
                                np.ones((len(toks), len(toks)), bool), toks, toks,
                                title="mask used (blue = may attend)", kind="enc_self"), width="stretch")
    pad_cols = [j for j, t in enumerate(toks) if t == "<pad>"]
    real_rows = [i for i, t in enumerate(toks) if t != "<pad>"]
    leak = float(probs[np.ix_(real_rows, pad_cols)].sum(-1).mean()) if pad_cols else 0.0
    m1, m2 = st.columns(2)
    m1.metric("weight real tokens give to pads", f"{leak:.3f}")
    m2.metric("encoder output change vs. the sentence alone", f"{demo['encoder_shift']:.2e}",
              help="max |difference| over the real positions; ~1e-6 is float rounding")
    st.markdown(f"Alone: **{md_escape(demo['alone'])}**  \nIn the padded batch: **{md_escape(demo['padded'])}**")
    if not use_mask:
        st.warning("Without the mask the same sentence is encoded differently just because it shares a batch with a "
                   "longer one" + (" — and its translation changes." if demo["alone"] != demo["padded"] else "."))


def _causal(ctx: Context) -> None:
    st.markdown("### Causal mask")
    st.write("When the decoder is trained, the whole English reference is fed in at once (teacher forcing). "
             "The causal mask stops position i from seeing positions after i; otherwise it could read the very "
             "token it is asked to predict.")
    tokens = ctx.result.raw_tokens
    if not tokens:
        st.info("The translation is empty, so there is no decoder sequence to mask.")
        return
    on = teacher_forced(ctx.key, ctx.text, tuple(tokens), True)
    off = teacher_forced(ctx.key, ctx.text, tuple(tokens), False)
    t = on.tgt_tokens
    layer, head = _layer_head(ctx.cfg, ctx.cfg.n_decoder_layers, "causal")
    c1, c2 = st.columns([2, 3])
    c1.plotly_chart(mask_figure(causal_mask(len(t)), t, t, title="causal mask", kind="dec_self"), width="stretch")
    c2.markdown("Blue cells may be attended to: the lower triangle and the diagonal. Grey cells are set to −∞ "
                "before the softmax, so they get weight exactly 0. Row i is the step that predicts output token i+1; "
                "the cell right of the diagonal holds that very token.")
    c2, c3 = st.columns(2)
    c2.plotly_chart(attention_figure(on.attn["dec_self"][layer]["probs"][head], t, t, "dec_self",
                                     mask=on.attn["dec_self"][layer]["mask"],
                                     title=f"with the mask (layer {layer + 1}, head {head + 1})"), width="stretch")
    c3.plotly_chart(attention_figure(off.attn["dec_self"][layer]["probs"][head], t, t, "dec_self",
                                     title="without it: the upper triangle fills"), width="stretch")
    target = tokens + ["<eos>"]  # what each decoder position must predict
    tv = ctx.translator.tgt_vocab
    ids = tv.encode(target)
    rows = []
    off_self = off.probs("dec_self")  # (L, h, t, t)
    for i, tok in enumerate(t):
        p_on, p_off = np.exp(on.log_probs[i]), np.exp(off.log_probs[i])
        nxt_on, off_tok = tv.itos[int(p_on.argmax())], tv.itos[int(p_off.argmax())]
        future = off_self[:, :, i, i + 1:].sum(-1).mean()  # mean over layers and heads
        rows.append({"position": i, "input": tok, "must predict": target[i],
                     "prediction (mask on)": nxt_on, "p(correct), mask on": float(p_on[ids[i]]),
                     "prediction (mask off)": off_tok, "p(correct), mask off": float(p_off[ids[i]]),
                     "weight on future positions (mask off)": float(future)})
    df = pd.DataFrame(rows)
    st.dataframe(df, hide_index=True, width="stretch", column_config={
        c: st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.2f")
        for c in df.columns if c.startswith(("p(", "weight"))})
    fut = df["weight on future positions (mask off)"].mean()
    st.caption(f"With the mask off, on average {fut:.0%} of the self-attention goes to positions the decoder "
               "should not see, including the one holding the answer. This model was trained with the mask, so it "
               "never learned to exploit the leak and its predictions mostly get worse, not better. A model trained "
               "without the mask would learn to copy the next input token (its training loss would look excellent) "
               "and then fail at generation, where no future tokens exist.")


def render(ctx: Context) -> None:
    st.subheader("Masks")
    _padding(ctx)
    st.divider()
    _causal(ctx)
