"""Overview: the source tokens, the translation, the architecture and its parameter counts."""
from __future__ import annotations

import streamlit as st

from views.parts.counts import measured_on, source_count, vocabulary_sizes
from views.parts.reading import FRAGMENTS_HELP, card_section, fragment_spans, repetition_caption
from views.parts.widgets import chart, choices, fig_config, sections, shows_caption, table
from views.plumbing.figcache import cached
from views.plumbing.jobs import ABLATION_SENTENCES
from views.plumbing.state import Context
from viz.architecture import architecture_figure, parameter_table
from viz.tables import source_token_rows

NAMES = {"src_embed": "source embedding ({src})", "tgt_embed": "target embedding ({tgt})",
         "encoder": "encoder layers", "decoder": "decoder layers",
         "encoder_final_ln": "final encoder LayerNorm", "decoder_final_ln": "final decoder LayerNorm",
         "generator": "generator (linear + log-softmax)"}


def render(ctx: Context) -> None:
    st.subheader("Overview")
    with choices(ctx):
        show = sections(ctx, ["tokens", "architecture"])
    if show("tokens"):
        _tokens(ctx)
    if show("architecture"):
        _architecture(ctx)


def _tokens(ctx: Context) -> None:
    res = ctx.result
    st.write("The sentence is split into tokens, each token becomes a vector, the encoder reads them all at once, "
             f"and the decoder writes its output ({ctx.langs['tgt_name']}) one token at a time, looking back at the "
             f"source ({ctx.langs['src_name']}) through cross-attention.")
    left, right = st.columns(2)
    with left:
        src = res.source
        appends = "which the model appends" if src.eos_token else "none appended by this model's tokenizer"
        st.markdown(f"**Source tokens** (what the encoder reads: {source_count(len(src.axis_tokens), src.eos_token)}, "
                    f"{appends}; 'unknown' = not in the vocabulary, read as `<unk>`)")
        spans = fragment_spans(src, ctx.cfg)
        table(source_token_rows(src.tokens, src.ids, src.unknown, spans, end_token=src.eos_token or None),
              "source tokens", right=("position", "id"))
        if spans:
            st.caption(FRAGMENTS_HELP)
    with right:
        st.markdown("**Output tokens** (one per decoding step)")
        shows_caption(ctx)
        probs = [s.chosen_prob for s in res.steps[: len(res.raw_tokens)]]
        table([{"step": n, "token": raw, "shown as": shown, "probability": f"{p:.3f}"}
                for n, (raw, shown, p) in enumerate(zip(res.raw_tokens, res.tokens, probs), 1)],
               "output tokens", right=("step", "probability"))
        if res.tokens != res.raw_tokens:
            st.caption("Some `<unk>` outputs were replaced by a source word the model could not read (unknown to its "
                       "vocabulary, or a number), each copied at most once, the one that step's cross-attention "
                       "weighted most.")
        elif "<unk>" in res.raw_tokens:
            st.caption("`<unk>` stays visible where no unreadable source word was left to copy.")
        repetition_caption(res.tokens, res.source, ctx.cfg)
    card_section(ctx.facts["metrics"])
    st.metric("Traced in", f"{res.seconds * 1000:.0f} ms",
              help=f"Tokenize, encode, decode ({ctx.shows}) with every step recorded, and the full trace.")


def _bleu(value) -> str:
    return "" if value is None else f"{float(value):.2f}"


def quality_rows(metrics: dict) -> list[dict]:
    """The Measured quality table from metrics.json: a row per recorded set (test, then validation) and decoding,
    the set named with the number of sentences it was scored on."""
    rows = []
    for name in ("test", "val"):
        scores = metrics.get(name)
        if not isinstance(scores, dict):
            continue
        where = measured_on(str(scores.get("split", name)), scores.get("sentences"))
        rows += [{"set": where, "decoding": k, "sacreBLEU": _bleu(v.get("sacrebleu")),
                  "BLEU lowercased, spaCy tokens": _bleu(v.get("bleu_lower_spacy_tokens"))}
                 for k, v in scores.items() if isinstance(v, dict)]
    return rows


def _architecture(ctx: Context) -> None:
    cfg = ctx.cfg
    a, b = st.columns([3, 2])
    with a:
        chart(st, cached(architecture_figure, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_model, cfg.n_heads,
                         src_lang=ctx.langs["src_name"], tgt_lang=ctx.langs["tgt_name"]),
                  width="stretch", config=fig_config(ctx, "overview_architecture"))
    with b:
        counts = {NAMES.get(k, k).format(**ctx.langs): v for k, v in ctx.facts["parameters"].items()}
        table(parameter_table(counts), "parameters", right=("parameters", "share"))
        st.caption(f"d_model {cfg.d_model}, {cfg.n_heads} heads (d_k {cfg.d_k}), d_ff {cfg.d_ff}, "
                   f"{'pre' if cfg.norm_first else 'post'}-norm, "
                   f"{'tied' if cfg.tie_weights else 'separate'} target embedding and generator; "
                   "vocabularies " + vocabulary_sizes(
                       [(ctx.langs[side], size, ctx.facts["special_tokens"][side])
                        for side, size in (("src", cfg.src_vocab_size), ("tgt", cfg.tgt_vocab_size))]) + ".")
        metrics = ctx.facts["metrics"]
        rows = quality_rows(metrics)
        if rows:
            st.markdown("**Measured quality** (as the checkpoint's `metrics.json` records it)")
            table(rows, "measured quality", right=("sacreBLEU", "BLEU lowercased, spaCy tokens"))
            # The same model scores differently on other sentences: the other pages' BLEU is not this one.
            st.caption("BLEU depends on the sentences scored: the Heads page's pruning curve scores the first "
                       "sentences of the head report's corpus, the ablation (Attention) the first "
                       f"{ABLATION_SENTENCES} validation sentences, so their numbers differ from these.")
        elif metrics.get("note"):
            st.caption(metrics["note"])
