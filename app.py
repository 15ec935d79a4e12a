"""Attention Atlas: watch a small German→English Transformer translate.

    streamlit run app.py

This file is the router: sidebar controls, loading, bad-input handling, then one view.
Every figure comes from viz/; every number from model/.
"""
from __future__ import annotations

import streamlit as st

from views import attention, decoding, embeddings, head, masks, overview, positional
from views.state import (EXAMPLES, MAX_DECODE_STEPS, VIEWS, Context, beam_translation, checkpoint_choices,
                         checkpoint_label, init_state, load_translator, sync_url, trace_sentence)
from views.text import md_escape

st.set_page_config(page_title="Attention Atlas", page_icon=":material/translate:", layout="wide")
st.markdown(  # larger base font: readable from the back of a lecture room
    "<style>html, body, [class*='st-'] {font-size: 1.05rem;} .block-container {padding-top: 2rem;}</style>",
    unsafe_allow_html=True,
)
PAGES = {
    "Overview": overview, "Embeddings": embeddings, "Positional encoding": positional, "Attention": attention,
    "Inside one head": head, "Masks": masks, "Decoding": decoding,
}
init_state()
ss = st.session_state


def _use_example() -> None:
    if ss.get("example"):
        ss["text"] = ss["example"]


with st.sidebar:
    st.title("Attention Atlas")
    st.caption("A small Transformer, German → English, opened up.")
    choices = checkpoint_choices()
    if ss["ckpt"] not in choices:
        choices.append(ss["ckpt"])  # keep the URL's choice visible, even if it turns out broken
    st.selectbox("Model", choices, key="ckpt", format_func=checkpoint_label,
                 help="The trained model, its untrained twin (same architecture, random weights) or any folder under checkpoints/.")
    st.text_area("German sentence", key="text", height=90, max_chars=5000,
                 help="Anything you type is shown as text, never run as HTML.")
    st.selectbox("…or an example from Multi30k's validation set", [""] + EXAMPLES, key="example",
                 on_change=_use_example, format_func=lambda s: s or "choose an example")
    st.radio("View", VIEWS, key="view")
    with st.expander("Decoding options"):
        st.radio("Translation shown", ["greedy", "beam"], key="decoding", horizontal=True,
                 help="The views trace greedy decoding; beam search gives the best-scoring translation.")
        st.slider("Beam size", 2, 10, key="beam", disabled=ss["decoding"] != "beam")
        st.slider("Maximum output length (0 = automatic)", 0, MAX_DECODE_STEPS, key="max_len")

translator, error = load_translator(ss["ckpt"])
if error:
    st.error(f"**The model could not be loaded.** {md_escape(error)}")
    st.info("Choose another model in the sidebar; the page works with any valid checkpoint folder.")
    sync_url()
    st.stop()

text = ss["text"] or ""
if not text.strip():
    st.info("Type a German sentence in the sidebar (or pick an example) to see how the model translates it.")
    sync_url()
    st.stop()

result = trace_sentence(ss["ckpt"], text, ss["max_len"])
source = result.source
if not source.tokens:
    st.info("This text has no words the tokenizer can read (only control characters or spaces). Type a German sentence.")
    sync_url()
    st.stop()

# The translation stays visible on every view.
shown = result
if ss["decoding"] == "beam":
    shown = beam_translation(ss["ckpt"], text, ss["beam"], ss["max_len"])
label = "beam search (beam %d)" % ss["beam"] if ss["decoding"] == "beam" else "greedy"
st.markdown(f"#### :gray[DE] {md_escape(' '.join(source.tokens))}")
st.markdown(f"### :gray[EN] {md_escape(shown.text) or '∅ (empty output)'}")
st.caption(f"{label} · {checkpoint_label(ss['ckpt'])} · {len(source.tokens)} source tokens · "
           f"{shown.seconds * 1000:.0f} ms" + ("" if shown.finished else " · stopped at the length limit before `<eos>`"))
if source.truncated:
    cut = " ".join(source.dropped[:12]) + (" …" if len(source.dropped) > 12 else "")
    extra = f" and {source.chars_cut} characters beyond the reading limit" if source.chars_cut else ""
    st.warning(f"The sentence was cut to its first {len(source.tokens)} tokens (the limit protects a shared server). "
               f"Left out: {len(source.dropped)} tokens{extra}: {md_escape(cut)}")
unknown = [t for t, u in zip(source.tokens, source.unknown) if u]
if unknown:
    st.caption("? Unknown to the model (read as `<unk>`): " + md_escape(", ".join(unknown)))

ctx = Context(key=ss["ckpt"], translator=translator, result=result, text=text, max_len=ss["max_len"])
PAGES[ss["view"]].render(ctx)
sync_url()
