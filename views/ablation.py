"""Head ablation: switch heads off and see what changes, for this sentence and on validation BLEU."""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st
import torch

from model.data import DataError, read_split
from model.evaluate import bleu_scores
from views.jobs import ABLATION_SENTENCES, MAX_HEAVY_JOBS, heavy_job_slot
from views.state import ROOT, Context, load_translator
from views.text import md_escape

DATA_DIR = Path(os.environ.get("ATLAS_DATA_DIR", ROOT.parent / "shared" / "data" / "multi30k"))


def _head_mask(cfg, off: tuple[tuple[str, int, int], ...]) -> dict[str, torch.Tensor] | None:
    if not off:
        return None
    mask = {"enc_self": torch.ones(cfg.n_encoder_layers, cfg.n_heads),
            "dec_self": torch.ones(cfg.n_decoder_layers, cfg.n_heads),
            "cross": torch.ones(cfg.n_decoder_layers, cfg.n_heads)}
    for kind, layer, head in off:
        mask[kind][layer, head] = 0.0
    return mask


@st.cache_data(max_entries=64, show_spinner=False)
def _sentence(key: str, text: str, tokens: tuple[str, ...], off: tuple) -> tuple[str, float, float]:
    tr, _ = load_translator(key)
    hm = _head_mask(tr.cfg, off)
    new = tr.translate(text, head_mask=hm)
    return new.text, tr.score(text, list(tokens)), tr.score(text, list(tokens), hm)


@st.cache_data(max_entries=32, show_spinner=False)
def _val_bleu(key: str, off: tuple, n: int) -> float:
    src, ref = read_split(DATA_DIR, "val")
    tr, _ = load_translator(key)
    hyps = tr.translate_batch(src[:n], head_mask=_head_mask(tr.cfg, off))
    return bleu_scores(hyps, ref[:n])["sacrebleu"]


def render(ctx: Context, kind: str, layer: int) -> None:
    """Ablation controls for the heads of one layer of one attention kind."""
    cfg = ctx.cfg
    st.markdown("#### Switch heads off (ablation)")
    off_heads = st.multiselect(f"Heads of layer {layer + 1} to switch off", list(range(1, cfg.n_heads + 1)),
                               key=f"ablate_{kind}_{layer}",
                               help="A switched-off head's output is replaced by zeros before the output projection.")
    if not off_heads:
        st.caption("Choose heads to see how the translation and its probability change without them.")
        return
    off = tuple((kind, layer, h - 1) for h in sorted(off_heads))
    text, before, after = _sentence(ctx.key, ctx.text, tuple(ctx.result.raw_tokens), off)
    c1, c2 = st.columns([3, 1])
    c1.markdown(f"Without head(s) {', '.join(map(str, sorted(off_heads)))}: **{md_escape(text) or '∅'}**")
    c2.metric("log-prob of the original translation", f"{after:.2f}", f"{after - before:+.2f}")
    if st.button(f"Measure validation BLEU with and without ({ABLATION_SENTENCES} sentences)", key="ablate_bleu"):
        if not (DATA_DIR / "val.de.gz").exists() and not (DATA_DIR / "val.de").exists():
            st.warning(f"Validation data not found in {md_escape(str(DATA_DIR))}; set ATLAS_DATA_DIR to the Multi30k folder.")
            return
        with heavy_job_slot() as ok:
            if not ok:
                st.warning(f"The server is already running {MAX_HEAVY_JOBS} BLEU measurement(s), its limit for "
                           "shared use. Try again in a few seconds.")
                return
            try:
                with st.spinner("Translating the validation sample twice…"):
                    base = _val_bleu(ctx.key, (), ABLATION_SENTENCES)
                    ablated = _val_bleu(ctx.key, off, ABLATION_SENTENCES)
            except DataError as e:
                st.warning(md_escape(str(e)))
                return
        st.metric(f"sacreBLEU on the first {ABLATION_SENTENCES} validation sentences", f"{ablated:.1f}",
                  f"{ablated - base:+.1f} vs. all heads on ({base:.1f})")
