"""Side by side: side B (a second sentence on this model, or this sentence on a second model) and its header.

The Attention and Decoding pages draw both sides when `ctx.other` is set; this module builds side B's
context with the same decoding as side A, and says plainly when B cannot be drawn.
"""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from views.parts.text import md_escape
from views.plumbing.state import (
    COMPARE,
    Context,
    ModelKey,
    checkpoint_label,
    language_codes,
    load_model,
    model_facts,
    traced_decoding,
)

LABEL_CHARS = 48  # a side's label above its figures; longer sentences are cut with "…"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def with_side_b(ctx: Context, ss) -> Context:
    """ctx with `other` (side B) and both labels set, or ctx unchanged after a message saying why not."""
    how = ss["compare"]
    key_b = ModelKey.parse(ss["ckpt2"]) if how == "model" else ctx.key
    if how == "model" and ctx.key.pair and set(ctx.key.pair) <= set(language_codes(key_b)):
        key_b = key_b.with_pair(*ctx.key.pair)  # B reads between the sidebar's languages too, where it has them
    text_b = (ss.get("text2") or "") if how == "sentence" else ctx.text
    model_b, error = load_model(key_b)
    if error:
        st.warning(f"Side B's model could not be loaded, so only side A is drawn. {md_escape(error)}")
        return ctx
    if not text_b.strip():
        st.info("Type sentence B in the sidebar (Side by side) to compare two sentences.")
        return ctx
    traced = traced_decoding(key_b, text_b, ss["decoding"], ss["beam"], ss["max_len"])
    if not traced.result.source.tokens:
        st.info(f"Sentence B has no words the tokenizer can read. Type a {ctx.langs['src_name']} sentence.")
        return ctx
    if how == "model":
        label_a, label_b = f"A · {checkpoint_label(ctx.key)}", f"B · {checkpoint_label(key_b)}"
    else:
        label_a, label_b = f"A · {_short(ctx.text)}", f"B · {_short(text_b)}"
    b = Context(key=key_b, cfg=model_b.cfg, result=traced.result, text=text_b, max_len=ctx.max_len,
                mode=traced.mode, shows=traced.shows, facts=model_facts(key_b), present=ctx.present, label=label_b)
    if not ctx.present:  # presenter mode: the header's own line draws B under A (views/plumbing/router.py)
        _header(b, label_b, how)
    return replace(ctx, other=b, label=label_a)


def side_b_line(b: Context) -> str:
    """Side B's sentence and translation, in the form of the header's line for side A."""
    src = md_escape(" ".join(b.result.source.tokens))
    out = md_escape(b.result.text) or "∅ (empty output)"
    return f"#### :gray[B · {b.langs['src']}] {src} :gray[→ {b.langs['tgt']}] {out}"


def _header(b: Context, label_b: str, how: str) -> None:
    """Side B's sentence and translation under side A's, and what B is."""
    result, shows, end = b.result, b.shows, b.facts["end_token"]
    st.markdown(side_b_line(b))
    status = "" if result.finished else f" · stopped at the length limit before `{end}`"
    st.caption(f"**Side by side ({COMPARE[how]}): {md_escape(label_b)}**, {shows}{status}. Both sides use the "
               "same decoding settings; a forced prefix applies to the single view only.")


def heads_match(a: Context, b: Context, kind: str) -> str | None:
    """None when the two models can be aligned head by head for `kind`, else what differs."""
    la = a.cfg.n_encoder_layers if kind == "enc_self" else a.cfg.n_decoder_layers
    lb = b.cfg.n_encoder_layers if kind == "enc_self" else b.cfg.n_decoder_layers
    if (la, a.cfg.n_heads) != (lb, b.cfg.n_heads):
        return f"A has {la} layers × {a.cfg.n_heads} heads here, B has {lb} × {b.cfg.n_heads}"
    return None
