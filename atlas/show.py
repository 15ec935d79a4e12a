"""The app's figures from a translator and a sentence, for a notebook: each returns the Plotly figure the page
draws, from the same records (greedy decoding, as the pages by default). Layers and heads are 1-based, as the
figures name them; hook names (docs/hooks.md) count from 0.

    atlas.show.attention(tr, "Ein Hund läuft.", kind="cross", layer=2)            # every head of layer 2
    atlas.show.attention(tr, "Ein Hund läuft.", kind="cross", layer=2, head=1)    # one head
    atlas.show.attention(tr, "Ein Hund läuft.", carry="alti")                     # what the layer carries
    atlas.show.alignment(tr, "Ein Hund läuft .", "A dog runs .")                  # word alignment
    atlas.show.embeddings(tr, "Ein Hund läuft.")                                  # the embedding stages
    atlas.show.step(tr, "Ein Hund läuft.", step=2)        # a decoding step: candidates, where it looked
    atlas.show.source_share(tr, "Ein Hund läuft.")        # each output token's share from the source
    atlas.show.lens(tr, "Ein Hund läuft.", step=2)        # the logit lens at a step
    atlas.show.positional(tr)                             # the positional encoding's waves
    atlas.show.head(tr, "Ein Hund läuft.", kind="cross", layer=2, head=1)   # inside one head: {steps: figure}
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from model.analysis import align as _align
from model.analysis.links import links, matrix, word_matrix, words
from viz.alignment import alignment_figure
from viz.attention import attention_figure, heads_figure
from viz.kinds import KIND_NAMES

CARRY = {"weights": "weight", "norms": "value norm ‖α·f‖", "alti": "ALTI+ share"}
OWN = "(own stream)"  # cross-attention's ALTI+ column for the residual, as the page names it


def _langs(tr) -> dict:
    code = lambda lang: str(lang or "").split("_")[0].upper() or None  # noqa: E731  ("deu_Latn" -> "DEU")
    return {"src_lang": code(tr.src_lang), "tgt_lang": code(tr.tgt_lang)}


def _index(value: int, n: int, what: str) -> int:
    if not 1 <= int(value) <= n:
        raise ValueError(f"{what} {value} is out of range: 1 to {n}")
    return int(value) - 1


def attention(tr, text: str, kind: str = "cross", layer: int = 1, head: int | None = None,
              carry: str = "weights") -> go.Figure:
    """The Attention page's figure of `text`'s greedy translation: every head of `layer` (or one `head`) of `kind`
    ("enc_self", "dec_self", "cross"), drawing the weights, their value norms (`carry="norms"`) or ALTI+ (a layer's,
    `carry="alti"`)."""
    if kind not in KIND_NAMES or carry not in CARRY:
        raise ValueError(f"kind is one of {', '.join(KIND_NAMES)}; carry one of {', '.join(CARRY)}")
    done = _traced(tr, text)
    trace = done.trace
    q_tokens, k_tokens = trace.axes(kind)
    values = trace.probs(kind)  # (L, h, i, j)
    l = _index(layer, len(values), "layer")
    mask, zmax = trace.attn[kind][l]["mask"], None
    if carry != "weights":
        rec = tr.contributions(text, done.raw_tokens + ([tr.tgt_vocab.token("eos")] if done.finished else []))
        if carry == "norms":
            values = rec.value_norm[kind].astype(np.float32)
            zmax = float(values.max()) or 1.0
        else:
            values, zmax = rec.alti[kind][:, None].astype(np.float32), 1.0
            if kind == "cross":
                k_tokens = list(k_tokens) + [OWN]
                mask = np.concatenate([mask, np.ones((mask.shape[0], 1), bool)], axis=1)
            name = KIND_NAMES[kind].split(" (")[0]
            return attention_figure(values[l, 0], q_tokens, k_tokens, kind, mask=mask, zmax=zmax,
                                    title=f"{name}, layer {l + 1}: ALTI+, the heads together", measure=CARRY[carry],
                                    **_langs(tr))
    if head is None:
        return heads_figure(values[l], q_tokens, k_tokens, kind, l, mask=mask, zmax=zmax, measure=CARRY[carry],
                            **_langs(tr))
    h = _index(head, values.shape[1], "head")
    return attention_figure(values[l, h], q_tokens, k_tokens, kind, mask=mask, zmax=zmax,
                            title=f"{KIND_NAMES[kind].split(' (')[0]}, layer {l + 1}, head {h + 1}",
                            measure=CARRY[carry], **_langs(tr))


def alignment(tr, source: str, target: str | None = None, method: str = "alti", layer: int | str = "auto",
              head: int | None = None, shift: bool = False) -> go.Figure:
    """The Alignment page's figure: `source` and `target` (default: the model's greedy translation) as words,
    teacher-forced, each target word linked to the source word it receives the most from at decoder `layer`
    ("auto": two thirds of the depth, "mean", or 1-based), by `method` ("attention", "value-norm", "alti")."""
    target = tr.translate(source).text if target is None else target
    pair = _align.encode_pair(tr, words(source), words(target))
    n = tr.cfg.n_decoder_layers
    li = None if layer == "mean" else max(1, round(2 * n / 3)) - 1 if layer == "auto" else _index(layer, n, "layer")
    hi = None if head is None or method == "alti" else _index(head, tr.cfg.n_heads, "head")
    m = matrix(pair, method, li, hi)
    where = "mean of the layers" if li is None else f"layer {li + 1}"
    return alignment_figure(word_matrix(pair, m, shift), pair.src_words, pair.tgt_words,
                            predicted=frozenset(links(pair, m, shift)), title=f"{method}, {where}",
                            measure={"attention": "weight", "value-norm": "value norm ‖α·f‖"}.get(method,
                                                                                               "ALTI+ share"),
                            src_lang=_langs(tr)["src_lang"] or "DE", tgt_lang=_langs(tr)["tgt_lang"] or "EN")


def embeddings(tr, text: str, side: str = "src") -> go.Figure:
    """The Embeddings page's stages of `text` ("src") or of its greedy translation ("tgt"): the token rows, × √d_model,
    the positions added, what enters layer 1 (the stages this model has)."""
    from viz.embeddings import embedding_stages, stages_figure

    trace = _traced(tr, text).trace
    emb, tokens = (trace.src_embed, trace.src_tokens) if side == "src" else (trace.tgt_embed, trace.tgt_tokens)
    cfg = tr.cfg
    titles, arrays = embedding_stages(emb, cfg.scale_embedding, cfg.positions, cfg.norm)
    return stages_figure(titles, arrays, tokens)


def step(tr, text: str, step: int = 1, layer: int | None = None, head: int | None = None) -> list[go.Figure]:
    """The Decoding page's figures of greedy step `step` (1-based): the next-token candidates, and where it looked
    in the source (decoder `layer`, default the last; one `head` or the mean of the heads)."""
    from viz.decoding import candidates_figure, step_cross_attention_figure

    done = _traced(tr, text)
    chosen = done.steps[_index(step, len(done.steps), "step")]
    labels, probs, index = chosen.candidates()
    n = tr.cfg.n_decoder_layers
    l = n - 1 if layer is None else _index(layer, n, "layer")
    cross = chosen.cross[l]  # (h, s) this step's query over the source
    weights = cross.mean(0) if head is None else cross[_index(head, len(cross), "head")]
    which = "mean of the heads" if head is None else f"head {head}"
    return [candidates_figure(labels, probs, index, title=f"step {step}: next-token candidates"),
            step_cross_attention_figure(weights, done.source.axis_tokens,
                                        title=f"step {step}: cross-attention, layer {l + 1}, {which}", **_langs(tr))]


def source_share(tr, text: str, step: int = 1) -> go.Figure:
    """The Decoding page's strip: how much of each output token of the greedy translation came from the source
    (ALTI+'s rollout, docs/contributions.md), step `step` highlighted."""
    from viz.decoding import source_share_figure

    done = _traced(tr, text)
    share = tr.contributions(text, done.raw_tokens + ([tr.tgt_vocab.token("eos")] if done.finished else []))
    share = share.alti["source_share"]
    tokens = [s.chosen_token for s in done.steps][: len(share)]
    return source_share_figure(tokens, share[: len(tokens)], _index(step, len(tokens), "step"))


def _traced(tr, text: str):
    done = tr.trace(text)
    if done.trace is None:
        raise ValueError("the text has no tokens the model reads")
    return done


def lens(tr, text: str, step: int = 1, k: int = 5) -> go.Figure:
    """The Decoding page's logit lens at greedy step `step` (1-based): each decoder layer's output read through the
    final norm and the generator, its top `k` tokens and the chosen token's probability and rank."""
    from model.analysis.lens import logit_lens
    from viz.lab import lens_figure

    tokens = [s.chosen_token for s in _traced(tr, text).steps]
    res = logit_lens(tr, text, tokens, _index(step, len(tokens), "step"), k)
    return lens_figure(res.top_tokens, res.top_probs, res.chosen_probs, res.chosen_ranks, res.chosen_token,
                       title=f"step {step}: each decoder layer read as if it were the last")


def positional(tr, positions: int = 50, dims=(0, 1, 4, 5, 16, 17)) -> go.Figure:
    """The Positional encoding page's waves: dimensions `dims` of the model's sinusoidal table over `positions`."""
    from viz.positional import sinusoidal_encoding, waves_figure

    cfg = tr.cfg
    if cfg.positions != "sinusoidal":
        raise ValueError(f"this model's positions are {cfg.positions}, not a sinusoidal table (docs/models.md)")
    pe = sinusoidal_encoding(positions, cfg.d_model, cfg.pe_layout, cfg.pos_offset)
    return waves_figure(pe, [d for d in dims if d < cfg.d_model], cfg.pe_layout)


def head(tr, text: str, kind: str = "cross", layer: int = 1, head: int = 1) -> dict:
    """Inside one head, as the page draws it: {steps of a row: figure} for Q, K, V, the scores, their scaling, the
    mask, the softmax, dropout (simulated on a copy, seed 0) and the weighted sum, from the greedy translation's
    trace (the scores as the model recorded them)."""
    from model.analysis.experiments import dropout_sample
    from viz.head import head_pipeline_rows

    trace = _traced(tr, text).trace
    l = _index(layer, len(trace.attn[kind]), "layer")
    a = trace.attn[kind][l]
    h = _index(head, a["probs"].shape[0], "head")
    q_tokens, k_tokens = trace.axes(kind)
    dropped, _ = dropout_sample(a["probs"][h], tr.cfg.attn_dropout, seed=0)
    bias = trace.pos_bias(kind)
    return head_pipeline_rows(a["q"][h], a["k"][h], a["v"][h], None, a["mask"] if not a["mask"].all() else None,
                              a["probs"][h], a["out"][h], q_tokens, k_tokens, kind, dropout_probs=dropped,
                              scaled_scores=a["scores"][h], pos_bias=None if bias is None else bias[h],
                              scaled=tr.cfg.scale_attention)
