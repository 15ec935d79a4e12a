"""Head ablation: switch heads off anywhere in the model and see what changes, for this sentence and on
validation BLEU with a bootstrap interval."""
from __future__ import annotations

import streamlit as st

from model.analysis.experiments import find_data_dir, paired_bootstrap
from model.training.data import DataError
from views.parts.counts import measured_on
from views.parts.text import md_escape
from views.plumbing.jobs import ABLATION_SENTENCES, MAX_HEAVY_JOBS, heavy_job_slot
from views.plumbing.state import KINDS, Context, ablated, public_message, val_translations

SHORT = {"enc_self": "encoder self", "dec_self": "decoder self", "cross": "cross"}


def head_name(h: tuple[str, int, int]) -> str:
    kind, layer, head = h
    return f"{SHORT[kind]} L{layer + 1} H{head + 1}"


def render(ctx: Context) -> None:
    """Ablation controls for any heads of any layer and attention kind (URL parameter `off`)."""
    cfg = ctx.cfg
    ss = st.session_state
    st.markdown("#### Switch heads off (ablation)")
    options = [(k, l, h) for k in KINDS
               for l in range(cfg.n_encoder_layers if k == "enc_self" else cfg.n_decoder_layers)
               for h in range(cfg.n_heads)]
    ss["off"] = tuple(h for h in ss.get("off", ()) if h in options)
    st.multiselect("Heads to switch off (any layer, any kind)", options, key="off", persist_state="session",
                   format_func=head_name, placeholder="choose heads, e.g. cross L3 H2",
                   help="A switched-off head's output is replaced by zeros before the output projection W_O.")
    off = tuple(ss["off"])
    # Presenter mode shows this part alone, so "above" would point to nothing: say which heatmaps, in both modes.
    st.caption("The attention heatmaps on this page always show the model with all heads on.")
    if not off:
        st.caption("Choose heads to see how the translation and its probability change without them.")
        return
    tokens = tuple(ctx.result.raw_tokens)
    text, before, after = ablated(ctx.key, ctx.text, tokens, off, ctx.max_len)
    c1, c2 = st.columns([3, 2])
    c1.markdown(f"Greedy decoding without {', '.join(map(head_name, off))}:  \n**{md_escape(text) or '∅'}**")
    c2.metric("log-prob of the shown translation", f"{after:.2f}", f"{after - before:+.2f} vs. all heads on",
              help=f"Teacher-forced log-probability of the translation shown at the top ({ctx.shows}) with these "
                   f"heads off; all heads on: {before:.2f}.")
    measured = ss.setdefault("_ablation_bleu", {})  # (model, heads off) -> (comparison, data folder), kept across runs
    if st.button(f"Measure validation BLEU with and without ({ABLATION_SENTENCES} sentences)", key="ablate_bleu"):
        result, problem = _measure(ctx, off)
        if problem:
            st.warning(md_escape(problem))  # nothing measured: shown once, the button may be pressed again
        else:
            measured[(ctx.key, off)] = result
    if (ctx.key, off) in measured:
        cmp, folder = measured[(ctx.key, off)]
        st.metric(f"sacreBLEU (greedy) on {measured_on('val', cmp.n_sentences, first=True)}", f"{cmp.other:.1f}",
                  f"{cmp.delta:+.1f} vs. all heads on ({cmp.base:.1f})")
        st.caption(md_escape(cmp.sentence()) + f" Data: Multi30k's validation split in `{public_message(folder)}`.")


def _measure(ctx: Context, off: tuple) -> tuple[tuple | None, str]:
    """((the comparison, the data folder), "") or (None, why nothing could be measured)."""
    folder, looked = find_data_dir("val")
    if folder is None:
        return None, ("Validation data not found. Looked in: " + "; ".join(public_message(str(p)) for p in looked) +
                      ". Set ATLAS_DATA_DIR to the Multi30k folder (val.de.gz, val.en.gz) and restart the app.")
    with heavy_job_slot() as ok:
        if not ok:
            return None, (f"The server is already running {MAX_HEAVY_JOBS} BLEU measurement(s), its limit for "
                          "shared use. Try again in a few seconds.")
        try:
            with st.spinner("Translating the validation sample twice…"):
                base, refs = val_translations(ctx.key, str(folder), (), ABLATION_SENTENCES)
                other, _ = val_translations(ctx.key, str(folder), off, ABLATION_SENTENCES)
        except DataError as e:
            return None, public_message(str(e))
    return (paired_bootstrap(base, other, refs), str(folder)), ""
