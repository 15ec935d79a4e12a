"""Alignment: which source word each target word is read from, drawn over what cross-attention carries, against
the gold links of the project's 100 annotated Multi30k pairs (docs/contributions.md)."""
from __future__ import annotations

import streamlit as st

from model.analysis.links import METHODS as ALIGN_METHODS
from model.analysis.links import aer, links, matrix, read_talp, word_matrix
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, fig_config, sections, table
from views.plumbing.figcache import cached
from views.plumbing.state import Context, aligned_sentence, annotated_pairs
from viz.alignment import alignment_figure

REF_CHARS = 1000  # a reference translation, or its gold links
PARTS = ["one pair", "the whole set", "your sentence"]
NAMES = {"attention": "weights α", "value-norm": "value norms ‖α·f‖", "alti": "ALTI+"}
MEASURES = {"attention": "weight", "value-norm": "value norm ‖α·f‖", "alti": "ALTI+ share"}


def _layer_options(n: int) -> list[str]:
    return ["auto", "mean"] + [str(i) for i in range(1, n + 1)]


def _index(value: str, n: int) -> int | None:
    """A layer or head choice as a 0-based index (None: the mean); "auto": two thirds of the depth."""
    if value == "mean":
        return None
    if value == "auto":
        return max(1, round(2 * n / 3)) - 1
    return int(value) - 1


def render(ctx: Context) -> None:
    cfg = ctx.cfg
    if not ctx.present:
        st.subheader("Word alignment")
        st.markdown("For each target word, the source word its pieces receive the most from, at one decoder layer: "
                    "the cross-attention weights, what they carry (value norms), or each source word's share of the "
                    "block's output (ALTI+). Scored against gold links a person drew: **sure** (squares) and "
                    "**possible** (grey squares), by the alignment error rate (AER; Och & Ney 2003, lower is "
                    "better). The pairs are teacher-forced on their reference translation, not the model's own.")
    gold = (ctx.langs["src_name"], ctx.langs["tgt_name"]) == ("German", "English")
    ss = st.session_state
    layers, heads = _layer_options(cfg.n_decoder_layers), ["mean"] + [str(i) for i in range(1, cfg.n_heads + 1)]
    if ss.get("align_layer") not in layers:  # a link's value this model does not have
        ss["align_layer"] = "auto"
    if ss.get("align_head") not in heads:
        ss["align_head"] = "mean"
    with choices(ctx):
        show = sections(ctx, PARTS if gold else PARTS[-1:])
        cols = st.columns([1.3, 1, 1, 1.3], vertical_alignment="bottom")
        method = cols[0].selectbox("Measure", list(ALIGN_METHODS), key="align_method", format_func=NAMES.get,
                                   persist_state="session")
        layer = cols[1].selectbox("Layer", layers, key="align_layer",
                                  persist_state="session", help="auto: two thirds of the decoder's depth")
        head = cols[2].selectbox("Head", heads, key="align_head",
                                 persist_state="session", disabled=method == "alti",
                                 help="ALTI+ is a layer's: the heads together")
        shift = cols[3].toggle("Shifted", key="align_shift", persist_state="session",
                               help="Read the decoder row whose input is the target word, not the row that "
                                    "predicts it")
    li, hi = _index(layer, cfg.n_decoder_layers), None if method == "alti" else _index(head, cfg.n_heads)
    if show("your sentence"):
        _own(ctx, method, li, hi, shift)
    if not gold:
        st.caption(f"The annotated pairs with gold links are not in this model's languages ({ctx.langs['src_name']} "
                   f"to {ctx.langs['tgt_name']}): `python -m model.align --src FILE --tgt FILE --gold FILE.talp` "
                   "scores it on pairs of its own.")
        return
    data = annotated_pairs(ctx.key)
    found = [links(p, matrix(p, method, li, hi), shift) for p in data.pairs]
    whole = aer(found, data.sure, data.possible)
    if show("one pair"):
        _pair(ctx, data, method, li, hi, shift, found, whole)
    if show("the whole set"):
        _set(ctx, data, shift)


def _pair(ctx: Context, data, method: str, li, hi, shift: bool, found: list, whole: float) -> None:
    with choices(ctx):
        n = st.selectbox("Pair", list(range(1, len(data.pairs) + 1)), key="align_pair", persist_state="session",
                         format_func=lambda i: f"{i}: {' '.join(data.pairs[i - 1].src_words)}")
    pair, sure, possible = data.pairs[n - 1], data.sure[n - 1], data.possible[n - 1]
    m = word_matrix(pair, matrix(pair, method, li, hi), shift)
    where = f"layer {li + 1}" if li is not None else "mean of the layers"
    title = f"pair {n}: {NAMES[method]}, {where}" + ("" if method == "alti" or hi is None else f", head {hi + 1}")
    chart(st, cached(alignment_figure, m, pair.src_words, pair.tgt_words, sure=frozenset(sure),
                     possible=frozenset(possible), predicted=frozenset(found[n - 1]), title=title,
                     measure=MEASURES[method]),
          width="stretch", key="align_fig", config=fig_config(ctx, f"alignment_pair{n}"))
    st.caption(f"AER of this pair: {aer([found[n - 1]], [sure], [possible]):.1f} %; of the {len(data.pairs)} pairs "
               f"with these choices: {whole:.1f} %. Reading: the row that "
               + ("reads the word (shifted)." if shift else "predicts the word.")
               + f" Reference: {md_escape(' '.join(pair.tgt_words))}")


def _own(ctx: Context, method: str, li, hi, shift: bool) -> None:
    """The sidebar's sentence and a translation of it (a reference the user types, or the model's own), word by word:
    the predicted links, and the AER against gold links the user types."""
    with choices(ctx):
        c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
        ref = c1.text_input(f"Reference translation ({ctx.langs['tgt_name']})", key="align_ref", max_chars=REF_CHARS,
                            persist_state="session", placeholder="empty: the model's own translation")
        typed = c2.text_input("Gold links (optional)", key="align_gold", max_chars=REF_CHARS, persist_state="session",
                              placeholder="e.g. 1-1 2-2 3p4",
                              help="talp, as the annotated pairs: i-j sure, ipj possible; source word i, target word "
                                   "j, counted from 1, words as the figure splits them")
    target = (ref or "").strip() or ctx.result.text
    try:
        pair = aligned_sentence(ctx.key, ctx.text, target)
    except ValueError as e:
        st.info(f"Nothing to align: {e}.")
        return
    gold = None
    if (typed or "").strip():
        try:
            gold = read_talp(typed, len(pair.src_words), len(pair.tgt_words), "gold links")
        except ValueError as e:
            st.warning(f"{e}. The figure shows the predicted links only.")
    m = matrix(pair, method, li, hi)
    found = links(pair, m, shift)
    where = f"layer {li + 1}" if li is not None else "mean of the layers"
    sure, possible = map(frozenset, gold) if gold else (None, None)  # None: no gold squares in the legend
    chart(st, cached(alignment_figure, word_matrix(pair, m, shift), pair.src_words, pair.tgt_words,
                     sure=sure, possible=possible, predicted=frozenset(found),
                     title=f"your sentence: {NAMES[method]}, {where}", measure=MEASURES[method],
                     src_lang=ctx.langs["src"], tgt_lang=ctx.langs["tgt"]),
          width="stretch", key="align_own", config=fig_config(ctx, "alignment_sentence"))
    whose = "the reference above" if (ref or "").strip() else f"the model's own translation of it ({ctx.shows})"
    score = (f"AER against the links typed: {aer([found], [sure], [possible]):.1f} %." if gold else
             "Type gold links to score the predicted ones (AER).")
    st.caption(f"The sentence in the sidebar and {whose}, teacher-forced, split into words as the annotated pairs "
               f"are. {score}")


def _set(ctx: Context, data, shift: bool) -> None:
    """Every measure × layer on the whole set, heads together, in the reading chosen."""
    n = ctx.cfg.n_decoder_layers
    rows = []
    for method in ALIGN_METHODS:
        row = {"measure": NAMES[method]}
        for layer in list(range(n)) + [None]:
            name = f"layer {layer + 1}" if layer is not None else "mean of layers"
            found = [links(p, matrix(p, method, layer, None), shift) for p in data.pairs]
            row[name] = f"{aer(found, data.sure, data.possible):.1f}"
        rows.append(row)
    if not ctx.present:
        st.markdown(f"#### AER (%) of every measure and layer on the {len(data.pairs)} pairs")
    table(rows, "AER of every measure and layer", right=tuple(k for k in rows[0] if k != "measure"))
    st.caption(("Shifted" if shift else "Predicting") + " reading, heads together. `python -m model.align --gold "
               "model/data/multi30k-align/dev.talp --sweep` prints this table for both readings.")
