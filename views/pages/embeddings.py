"""Embeddings: token vectors and the stages the model has (the √d_model scaling, the position vectors added, the
embedding norm), and a vocabulary map."""
from __future__ import annotations

import numpy as np
import streamlit as st

from views.parts.counts import embedding_rows, without_specials
from views.parts.widgets import chart, choices, csv_button, fig_config, sections, shows_caption, table
from views.plumbing.figcache import cached
from views.plumbing.state import Context, ModelKey, vocab_embeddings
from viz.embeddings import (
    NORM_NAMES,
    PCA_FIT_ROWS,
    PCA_SAMPLE,
    embedding_heatmap,
    embedding_stages,
    neighbour_rows,
    pca_2d,
    scaling_figure,
    stages_figure,
    vocab_map_figure,
)
from viz.tables import matrix_csv

# Vocabulary entries drawn as named dots (the most frequent, for a vocabulary listed so); the rest are counted into
# the grey density. Each hundred dots adds to the map's draw time (`git show 8180d3c:benchmarks/bench_vocab_map.py`
# measured it).
VOCAB_DOTS = 300
PIECE_NAMES = {"sentencepiece": "SentencePiece", "moses_bpe": "byte-pair (Moses + BPE)"}  # the tokenizers of pieces


def table_words(key: ModelKey) -> str:
    """What the embedding table is, true of this model: the untrained twin's rows are random, not learned."""
    return "randomly initialised (untrained)" if key.twin else "learned"


@st.cache_data(max_entries=8, show_spinner=False)
def _pca(key: ModelKey, side: str, specials: tuple[int, ...]) -> np.ndarray:
    lut, _ = vocab_embeddings(key, side)
    return pca_2d(lut, exclude=specials)  # without the specials: <pad> is all zeros and would pull the map


@st.cache_resource(max_entries=8, show_spinner=False)
def _vocab_index(key: ModelKey, side: str,
                 specials: tuple[int, ...]) -> tuple[list[str], dict[int, int], dict[str, int]]:
    """(the map's entries, vocabulary id -> map row, token -> vocabulary id): the same for every sentence, so
    built once per model and side rather than on every visit (three passes over a 58,000-entry vocabulary)."""
    _, itos = vocab_embeddings(key, side)
    special = set(specials)
    kept = [i for i in range(len(itos)) if i not in special]  # map rows -> vocabulary ids
    return [itos[i] for i in kept], {vid: r for r, vid in enumerate(kept)}, {t: i for i, t in enumerate(itos)}


@st.cache_resource(max_entries=64, show_spinner=False)
def _neighbours(key: ModelKey, side: str, ids: tuple[int, ...], specials: tuple[int, ...]):
    """The nearest-neighbour table of this sentence's entries, kept per model, side and ids: going through the
    figure cache would hash the whole embedding matrix (8 MB for the shipped model) on every visit."""
    lut, itos = vocab_embeddings(key, side)
    return neighbour_rows(lut, itos, list(ids), k=5, exclude_idx=specials)


def _stages(ctx: Context, emb: dict, tokens: list[str]):
    cfg = ctx.cfg
    titles, arrays = embedding_stages(emb, cfg.scale_embedding, getattr(cfg, "positions", "sinusoidal"),
                                      getattr(cfg, "norm", "layer"))
    return cached(stages_figure, titles, arrays, tokens)


def _parts(ctx: Context) -> list[str]:
    """The page's parts: no scaling part for a model that does not scale its token embeddings (T5)."""
    return ["the vectors"] + ["the scaling"] * bool(ctx.cfg.scale_embedding) + ["the whole vocabulary"]


def _scaling_chart(emb: dict, d_model: int, tokens: list[str]):
    return cached(scaling_figure, emb["token"], emb["scaled"], d_model, tokens)


def _vocab_map(ctx: Context, side: str, tokens: list[str]):
    """(the vocabulary map with this sentence's entries, the map's entries, their vocabulary ids, the specials)."""
    # Specials are left out of the map (Marian's <pad> is the last id, so not only a leading block).
    specials = tuple(ctx.facts[f"{side}_specials"])
    words, row, index = _vocab_index(ctx.key, side, specials)
    # In the sentence's order (a repeated entry once), so the neighbour table reads like the sentence.
    ids = list(dict.fromkeys(index[t] for t in tokens if t in index and index[t] not in specials))
    _, itos = vocab_embeddings(ctx.key, side)
    fig = cached(vocab_map_figure, _pca(ctx.key, side, specials), words, [row[i] for i in ids], [itos[i] for i in ids],
                 title=f"{len(words):,} {table_words(ctx.key)} embeddings, first two principal components"
                 + (f" (axes fitted on {PCA_SAMPLE:,} evenly spaced rows)" if len(words) > PCA_FIT_ROWS else ""),
                 n_dots=VOCAB_DOTS)
    return fig, words, ids, specials


def render(ctx: Context) -> None:
    res = ctx.result
    if not ctx.present:  # presenter mode: the controls and the figure (the screen's height goes to the figure)
        st.subheader("Embeddings")
    with choices(ctx):
        side = st.radio("Side", ["src", "tgt"], horizontal=True, key="emb_side", persist_state="session",
                        label_visibility="collapsed" if ctx.present else "visible",
                        format_func={"src": f"source ({ctx.langs['src_name']}, encoder input)",
                                     "tgt": f"target ({ctx.langs['tgt_name']}, decoder input)"}.get)
    emb = res.trace.src_embed if side == "src" else res.trace.tgt_embed
    tokens = res.trace.src_tokens if side == "src" else res.trace.tgt_tokens
    shows_caption(ctx, side)
    parts = _parts(ctx)
    with choices(ctx):
        show = sections(ctx, parts)
    if show("the vectors"):
        _vectors(ctx, side, emb, tokens)
    if "the scaling" in parts and show("the scaling"):
        _scaling(ctx, side, emb, tokens)
    if show("the whole vocabulary"):
        _vocabulary(ctx, side, tokens)


def stages_text(cfg, table: str) -> tuple[str, str]:
    """(the page's paragraph, the layer-input download's help): what this model does between the token id and
    layer 1, from its config."""
    scale = float(np.sqrt(cfg.d_model))
    positions, norm = getattr(cfg, "positions", "sinusoidal"), NORM_NAMES.get(getattr(cfg, "norm", "layer"), "norm")
    said = [f"Each token id selects one row of a {table} {cfg.d_model}-dimensional table."]
    steps = ["token embedding"]
    if cfg.scale_embedding:
        steps.append("× √d_model")
        said.append(f"The row is multiplied by √d_model = {scale:.1f}"
                    + (", so that it is not drowned by the positional encoding (values in −1…1) that is added next."
                       if positions == "sinusoidal" else "."))
    if positions == "sinusoidal":
        steps.append("+ positional encoding")
        if not cfg.scale_embedding:
            said.append("The fixed sine/cosine vector of its position (the positional encoding) is added.")
    elif positions == "learned":
        steps.append("+ learned position vector")
        said.append("The learned vector of its position is added (see Positional encoding).")
    elif positions == "rotary":
        said.append("No position vector is added: inside attention, each head's queries and keys are turned by "
                    "their position instead (rotary; see Positional encoding).")
    else:
        said.append("No position vector is added: this model adds a bias for each key's distance to the attention "
                    "scores instead (see Positional encoding).")
    if getattr(cfg, "embed_norm", False):
        steps.append(f"then {norm}")
        said.append(f"The sum then goes through a {norm}, whose output enters encoder/decoder layer 1.")
    else:
        said.append(("The sum" if len(steps) > 1 else "The row itself") + " is what enters encoder/decoder layer 1.")
    return " ".join(said), f"What enters layer 1: {' '.join(steps)}, one row per token."


def _vectors(ctx: Context, side: str, emb: dict, tokens: list[str]) -> None:
    said, layer_input = stages_text(ctx.cfg, table_words(ctx.key))
    if not ctx.present:
        st.write(said)
    chart(st, _stages(ctx, emb, tokens), width="stretch", config=fig_config(ctx, f"embeddings_{side}_stages"))
    if not ctx.present:
        st.caption(embedding_rows(side, len(tokens), ctx.result.source.eos_token, ctx.facts["start_token"]))
    dims = [f"dim {i}" for i in range(emb["total"].shape[1])]
    b1, b2, _ = st.columns([1, 1, 2])
    csv_button("Token vectors (CSV)", lambda: matrix_csv(emb["token"], tokens, dims, "token"), ctx,
               f"embeddings_{side}_token-vectors", "csv_emb_token", b1)
    csv_button("Layer input (CSV)", lambda: matrix_csv(emb["total"], tokens, dims, "token"), ctx,  # fits at 1280 px
               f"embeddings_{side}_layer-1-input", "csv_emb_total", b2,
               help=layer_input)


def _scaling(ctx: Context, side: str, emb: dict, tokens: list[str]) -> None:
    cfg = ctx.cfg
    above = st.container()  # the numbers: above the figure, in presenter mode below it (the figure keeps the screen)
    chart(st, _scaling_chart(emb, cfg.d_model, tokens), width="stretch",
          config=fig_config(ctx, f"embeddings_{side}_scaling"))
    c1, c2, c3 = (st if ctx.present else above).columns(3)
    c1.metric("std of embedding values", f"{emb['token'].std():.3f}")
    c2.metric(f"after × √{cfg.d_model}", f"{emb['scaled'].std():.3f}")
    if "positional" in emb:
        what = "positional encoding" if getattr(cfg, "positions", "sinusoidal") == "sinusoidal" else "position vectors"
        c3.metric(f"std of {what}", f"{emb['positional'].std():.3f}")
    # Built and drawn only when asked for: a chart nobody opened would cost every visit of the page.
    if st.toggle("Show the token embeddings alone (tokens × dimensions)", key="emb_alone", persist_state="session"):
        chart(st, cached(embedding_heatmap, emb["token"], tokens, "token embeddings (before scaling)"),
                  width="stretch", config=fig_config(ctx, f"embeddings_{side}_token-vectors"))


def _vocabulary(ctx: Context, side: str, tokens: list[str]) -> None:
    if not ctx.present:
        st.markdown("#### The whole vocabulary")
    fig, words, ids, specials = _vocab_map(ctx, side, tokens)
    unit = "pieces" if ctx.cfg.tokenizer != "spacy" else "digits" if ctx.key.toy else "words"
    chart(st, fig, width="stretch", config=fig_config(ctx, f"embeddings_{side}_vocabulary-map"))
    n_dots = min(VOCAB_DOTS, len(words))
    order = {"words": "which are the most frequent in the training data (the vocabulary is built most frequent first; "
                      "hover names them)",
             "pieces": f"in the order of the {PIECE_NAMES.get(ctx.cfg.tokenizer, 'piece')} vocabulary (hover names "
                       "them)",
             "digits": "0 to 9 (hover names them)"}[unit]
    names = ctx.facts["special_tokens"][side]
    st.caption(f"Grey shading: where all {len(words):,} {unit} the model knows lie "
               f"({without_specials(len(words), len(words) + len(specials), names)}; hover: how many in a cell); "
               f"dots: the vocabulary's first {n_dots:,} {unit}, {order}; large: this sentence's {unit}. A 2-D "
               "projection keeps only part of the structure, so the neighbours by cosine similarity in all "
               f"dimensions are listed below, one row per {unit[:-1]} in the sentence's order (one that occurs "
               "twice is listed once, where it first occurs).")
    if ids:
        table(_neighbours(ctx.key, side, tuple(ids), specials), "nearest neighbours", scroll=False)
    else:
        st.info("None of this sentence's words is in the vocabulary.")
