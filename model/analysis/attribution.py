"""Which source tokens each output token came from: four attributions, and a check of their faithfulness.

Shape letters: see model/__init__.py (s source positions, t target positions, L layers, h heads).

What is explained. The model is teacher-forced on a given target token list y_1 .. y_t (the greedy
translation, or any forced one): decoder input <bos> y_1 .. y_{t-1}, and row i (0-based) of every matrix
explains the choice of tgt_tokens[i] = y_{i+1} at decoder position i. The rows are exactly the tokens
given: the final <eos> decision is explained only when the caller appends "<eos>" to the list. The
columns are the source axis the model reads: the words and the final <eos> (Source.axis_tokens), so a
matrix is (t, s) and its last column is <eos>, where much attention rests without carrying a word.

The methods (name: definition):
  cross_attention       raw cross-attention of the last decoder layer, mean over heads. Rows sum to 1.
  cross_attention_mean  the same averaged over every decoder layer too (optional). Rows sum to 1.
  rollout               attention rollout (Abnar & Zuidema 2020) carried through cross-attention with the
                        encoder-decoder rules of Chefer et al. (2021), plain head-averaged attention Ā = mean_h A
                        in every rule (see relevance_rules). With plain attention the encoder's R_ss is exactly
                        2^L · (Abnar–Zuidema rollout Π_l row-normalise(Ā_l + I)), tested. Rows sum to 1.
  relevance             Chefer, Gur & Wolf 2021 (ICCV, "Generic Attention-model Explainability for Interpreting
                        Bi-Modal and Encoder-Decoder Transformers"): the same rules with the gradient-weighted
                        Ā = mean_h (∇A ⊙ A)^+ (their eq. 5), ∇ taken of the chosen token's logit (pre-softmax
                        score, as their code does; relevance_score="log_prob" switches). So rollout and relevance
                        differ only in the weighting. Non-negative; rows sum to 1 (a row of all zeros, no
                        positive gradient anywhere, stays zero).
  input_x_grad          input × gradient: Σ_d e_jd · ∂ log p(y_i) / ∂e_jd with e_j the source token's embedding
                        row × √d_model (the positional encoding left out: it is the same for any word at that
                        position, so it says nothing about the word; the same number results from the raw
                        embedding row times its gradient). To first order it is how much log p(y_i) falls when
                        word j's embedding becomes the zero vector (<pad>'s) with its position kept: positive =
                        the word supports the choice. The comparable matrix is |·| normalised per row (rows sum
                        to 1); Attribution.signed keeps the signed values (nats of log-probability).

Gradients come from one traced pass with autograd switched on: the sentence is repeated once per explained
target in the batch dimension and row b's objective is the score of its target at that target's position, so
one torch.autograd.grad of the sum gives every target its own gradients (rows of a batch share no computation).
`rows` explains some targets only (the app explains the step on screen): the pass is then that many rows, not
t, and each row is the one the whole matrix would hold (teacher-forcing reads the same prefix either way). The pass
starts from detached embedding outputs made leaves, so it works when the parameters do not require grad, and
torch.autograd.grad writes nothing into any parameter's .grad. No hook is registered, no module attribute
is set, train/eval mode is not touched: the shared model keeps no trace of a request.

The faithfulness check (python -m model.attribution --help): for each output token, remove the source
words that a method ranks highest and measure how much the chosen token's probability falls, against
removing random words. "Remove" = make the position padding: its id becomes <pad>, so the source mask
hides it as a key in every encoder self-attention and every cross-attention, while every other word keeps
its position (dropping the word would shift the positional encodings of the words after it; <unk> would
still be a token the model reads). This batches: one row per removal set. The source <eos> is never removed
(it is no word) and <eos> rows are not scored (the stop decision is no word's translation). Probabilities
are the raw generator's softmax (Translator.score's), not decoding's renormalised one without <bos>/<pad>.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from model.nn.trace import AttentionTrace
from model.nn.transformer import EncoderDecoder, HeadMask, make_src_mask, make_tgt_mask
from model.records import Attribution

METHODS = ("rollout", "relevance", "input_x_grad", "cross_attention", "cross_attention_mean")
DEFAULT_METHODS = ("rollout", "relevance", "input_x_grad", "cross_attention")
GRADIENT_METHODS = ("relevance", "input_x_grad")
RELEVANCE_SCORES = ("logit", "log_prob")
SCHEMA = "attention-atlas-faithfulness/1"

DEFINITIONS = {
    "rollout": "Attention rollout (Abnar & Zuidema 2020) through the encoder, the decoder self-attention and every "
               "cross-attention, combined by the encoder-decoder rules of Chefer et al. 2021 with plain attention "
               "averaged over heads; each row normalised to sum to 1.",
    "relevance": "Gradient-weighted relevance (Chefer et al. 2021): the same rules with each attention map weighted "
                 "by the gradient of the chosen token's score, negative parts clipped, averaged over heads; each row "
                 "normalised to sum to 1.",
    "input_x_grad": "Input × gradient: each source word's embedding times the gradient of the chosen token's "
                    "log-probability, summed over dimensions; absolute values, each row normalised to sum to 1 "
                    "(signed values in `signed`).",
    "cross_attention": "Raw cross-attention of the last decoder layer, averaged over heads (rows sum to 1).",
    "cross_attention_mean": "Raw cross-attention averaged over all decoder layers and heads (rows sum to 1).",
}




# ----------------------------------------------------------------------------- the rules, pure NumPy

def normalise_rows(m: np.ndarray) -> np.ndarray:
    """(..., n, k) -> rows divided by their sums; a row that sums to 0 stays 0 (nothing to share out)."""
    m = np.asarray(m, dtype=np.float64)
    sums = m.sum(-1, keepdims=True)
    return np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)


def rollout(layers: Sequence[np.ndarray]) -> np.ndarray:
    """Attention rollout of Abnar & Zuidema 2020: R = Ā_L ⋯ Ā_1, Ā_l = row-normalise(A_l + I).

    `layers`: per layer one (..., n, n) attention already averaged over heads, first layer first. The +I
    stands for the residual connection (half of what a token carries is itself); the product follows
    how information mixes from layer to layer. Every row of the result sums to 1.
    """
    if not len(layers):
        raise ValueError("rollout needs at least one layer")
    out = None
    for a in layers:
        a = np.asarray(a, dtype=np.float64)
        a_bar = normalise_rows(a + np.eye(a.shape[-1]))  # (..., n, n)
        out = a_bar if out is None else a_bar @ out  # a later layer mixes what the earlier ones produced
    return out


def normalise_residual(r: np.ndarray) -> np.ndarray:
    """Chefer et al.'s eqs. 8–9: R̄ = (R − I) / rowsum(R − I) + I, on (..., n, n).

    A self-relevance matrix starts at I and only grows, so R − I is what attention added; normalising its
    rows keeps the identity (the residual) from drowning it. A row to which nothing was added stays I's row
    (the authors' code gives NaN there and then zeroes the whole update).
    """
    eye = np.eye(r.shape[-1])
    return normalise_rows(np.asarray(r, dtype=np.float64) - eye) + eye


def relevance_rules(enc: Sequence[np.ndarray], dec_self: Sequence[np.ndarray], cross: Sequence[np.ndarray]):
    """The encoder-decoder relevance rules of Chefer et al. 2021 on head-aggregated maps Ā.

    enc: per encoder layer (..., s, s); dec_self: per decoder layer (..., t, t); cross: per decoder layer
    (..., t, s); a leading batch shape (one map set per explained token) broadcasts. Equation numbers are
    those of the paper as the authors' code comments cite them (hila-chefer/Transformer-MM-Explainability):
      R_ss = I, R_tt = I, R_ts = 0                        (source self, target self, target-on-source)
      encoder layer:   R_ss += Ā · R_ss                   (eq. 6)
      decoder layer:   R_tt += Ā_self · R_tt              (eq. 6)
                       R_ts += Ā_self · R_ts              (eq. 7: self-attention moves the cross relevance)
                       R_ts += R̄_ttᵀ · Ā_cross · R̄_ss      (eq. 10, R̄ by eqs. 8–9)
    Eq. 11 (R_tt += Ā_cross · R_st) adds nothing here: R_st, the relevance of target tokens for source
    tokens, is 0 because the encoder never reads the decoder. Returns (R_ss, R_tt, R_ts).

    A causal decoder: when the maps explain target i, rows k > i of every decoder map must be zero (the
    gradient makes them so for relevance; rollout zeroes them, see causal_maps). R_tt is lower-triangular,
    so R̄_ttᵀ's row i then reaches only k = i: eq. 10 scales cross-attention row i by R̄_tt[i, i], and the
    cross relevance of earlier positions reaches row i through eq. 7 in later layers.
    """
    r_ss = None
    for a in enc:
        a = np.asarray(a, dtype=np.float64)
        r_ss = (np.eye(a.shape[-1]) if r_ss is None else r_ss)
        r_ss = r_ss + a @ r_ss
    if r_ss is None:
        r_ss = np.eye(np.asarray(cross[0]).shape[-1])
    r_ss_bar = normalise_residual(r_ss)
    r_tt = r_ts = None
    for a_self, a_cross in zip(dec_self, cross):
        a_self, a_cross = np.asarray(a_self, dtype=np.float64), np.asarray(a_cross, dtype=np.float64)
        if r_tt is None:
            r_tt, r_ts = np.eye(a_self.shape[-1]), np.zeros(a_cross.shape[-2:])
        r_tt = r_tt + a_self @ r_tt  # (..., t, t)
        r_ts = r_ts + a_self @ r_ts  # (..., t, s)
        r_ts = r_ts + np.swapaxes(normalise_residual(r_tt), -1, -2) @ a_cross @ r_ss_bar
    return r_ss, r_tt, r_ts


def causal_maps(maps: np.ndarray) -> np.ndarray:
    """(..., t, j) decoder maps -> (t, ..., t, j): copy b keeps rows 0..b, the positions target b can depend on."""
    t = maps.shape[-2]
    keep = np.tril(np.ones((t, t)))  # keep[b, k] = k <= b
    shape = (t,) + (1,) * (maps.ndim - 2) + (t, 1)
    return maps[None] * keep.reshape(shape)


def explained_rows(r_ts: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
    """(r, t, s) per-target relevance -> (r, s): row rows[k] of copy k, the copy that explains target rows[k]
    (default: copy b explains target b, r = t)."""
    idx = np.arange(r_ts.shape[0])
    return r_ts[idx, idx if rows is None else np.asarray(rows, dtype=np.int64)]


# ----------------------------------------------------------------------------- the model pass

def _head(head_mask: HeadMask | None, kind: str, layer: int):
    return None if head_mask is None or kind not in head_mask else head_mask[kind][layer]


def traced_pass(model: EncoderDecoder, src: torch.Tensor, tgt: torch.Tensor, head_mask: HeadMask | None = None):
    """The teacher-forced pass of EncoderDecoder.forward(return_trace=True), starting from embedding leaves.

    src (b, s), tgt (b, t) = <bos> y_1 .. y_{t-1}. Embeddings are computed without a graph and their outputs
    become leaves that require grad, so every attention probability is in the graph even when the
    parameters do not require grad. The layers run exactly as in encode()/decode() (a test checks the
    log-probabilities and attention maps equal forward()'s). Returns (decoder states (b, t, d) after the final
    norm: model.generator of them gives forward()'s log-probabilities, enc_self, dec_self,
    cross: lists of AttentionTrace per layer, the source EmbeddingTrace, the source leaf (b, s, d)).
    """
    pad = model.cfg.pad_idx
    src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt, pad)
    with torch.no_grad():
        _, src_emb = model.src_embed(src, True)
        _, tgt_emb = model.tgt_embed(tgt, True)
    src_leaf = src_emb.total.detach().requires_grad_(True)  # (b, s, d) what enters encoder layer 1
    x = src_leaf
    enc_self: list[AttentionTrace] = []
    for n, layer in enumerate(model.encoder_layers):
        x, rec = layer(x, src_mask, _head(head_mask, "enc_self", n), True)
        enc_self.append(rec)
    memory = model.encoder_norm(x)
    y = tgt_emb.total.detach().requires_grad_(True)  # (b, t, d) a leaf, so decoder self-attention is in the graph
    dec_self: list[AttentionTrace] = []
    cross: list[AttentionTrace] = []
    for n, layer in enumerate(model.decoder_layers):
        y, s_rec, c_rec = layer(y, memory, src_mask, tgt_mask, _head(head_mask, "dec_self", n),
                                _head(head_mask, "cross", n), True)
        dec_self.append(s_rec)
        cross.append(c_rec)
    return model.decoder_norm(y), enc_self, dec_self, cross, src_emb, src_leaf


def _head_mean(x: torch.Tensor, hm: torch.Tensor | None) -> np.ndarray:
    """(b, h, i, j) -> (b, i, j) float64 mean over the heads that are on (all of them without a head mask)."""
    x = x.detach().double()
    if hm is None:
        return x.mean(1).cpu().numpy()
    w = hm.to(x).view(1, -1, 1, 1)
    return ((x * w).sum(1) / max(float(hm.sum()), 1.0)).cpu().numpy()


def attribute_ids(model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], bos: int,
                  methods: Sequence[str] = DEFAULT_METHODS, head_mask: HeadMask | None = None,
                  relevance_score: str = "logit", rows: Sequence[int] | None = None) -> dict:
    """Attributions of target ids tgt_ids (y_1 .. y_t) to the source ids src_ids (with <eos>; a <pad> id
    there is hidden as a key, as padding is). Returns {"matrices": {method: (r, s) float64}, "signed":
    {"input_x_grad": (r, s)} when asked, "chosen_log_probs": (r,)}: row k explains target rows[k] (0-based
    positions in tgt_ids; default every target, r = t). A gradient method costs one batch row per explained
    target, so explaining one step is about t times cheaper than the whole matrix."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown attribution method(s) {', '.join(map(repr, unknown))}: use {', '.join(METHODS)}")
    if relevance_score not in RELEVANCE_SCORES:
        raise ValueError(f"relevance_score must be one of {RELEVANCE_SCORES}, got {relevance_score!r}")
    if model.training:
        raise ValueError("attribution needs the model in eval mode (dropout would make it random)")
    s, t = len(src_ids), len(tgt_ids)
    explain = list(range(t)) if rows is None else [int(r) for r in rows]  # (r,) target positions
    if any(not 0 <= r < t for r in explain):
        raise ValueError(f"rows must be target positions 0..{t - 1}, got {list(rows)}")
    k = len(explain)
    if k == 0:
        return {"matrices": {m: np.zeros((0, s)) for m in methods},
                "signed": {"input_x_grad": np.zeros((0, s))} if "input_x_grad" in methods else {},
                "chosen_log_probs": np.zeros(0)}
    want_grad = any(m in GRADIENT_METHODS for m in methods)
    n = k if want_grad else 1  # one batch row per explained target when gradients are needed
    device = next(model.parameters()).device
    out: dict = {"matrices": {}, "signed": {}}
    # A request may come from inside inference_mode/no_grad: switch autograd on for this block only (both
    # settings are thread-local, so other requests are not affected). Every tensor is made inside it: one
    # made in inference mode cannot enter a graph.
    with torch.inference_mode(False), torch.enable_grad():
        src = torch.tensor([list(src_ids)] * n, dtype=torch.long, device=device)  # (n, s)
        tgt = torch.tensor([[bos] + list(tgt_ids[:-1])] * n, dtype=torch.long, device=device)  # (n, t)
        at = torch.tensor(explain, dtype=torch.long, device=device)  # (r,) the explained positions
        y = torch.tensor(list(tgt_ids), dtype=torch.long, device=device)[at]  # (r,) their chosen tokens
        states, enc_self, dec_self, cross, src_emb, src_leaf = traced_pass(model, src, tgt, head_mask)
        # Batch row b explains target explain[b]: its objective is that token's score at that position, so only
        # that position goes through the generator (the (n, t, V) logits of every position would cost more than
        # the layers). Rows share no computation, so the gradient of the sum w.r.t. row b's tensors is that of
        # row b's score.
        at_target = states[torch.arange(n, device=device), at] if want_grad else states[0, at]  # (r, d)
        logits = model.generator.proj(at_target)  # (r, V) before log-softmax
        log_probs = F.log_softmax(logits, dim=-1)  # (r, V)
        logp_b = log_probs[torch.arange(k, device=device), y]  # (r,)
        out["chosen_log_probs"] = logp_b.detach().double().cpu().numpy()
        grads = None
        g_src = None
        if want_grad:
            attn = [a.probs for a in enc_self + dec_self + cross]
            need_rel, need_ixg = "relevance" in methods, "input_x_grad" in methods
            if need_rel and relevance_score == "log_prob":
                got = torch.autograd.grad(logp_b.sum(), attn + ([src_leaf] if need_ixg else []))
                grads, g_src = got[: len(attn)], (got[-1] if need_ixg else None)
            else:
                if need_rel:
                    score = logits[torch.arange(k, device=device), y]  # (r,) pre-softmax, as Chefer et al.'s code
                    grads = torch.autograd.grad(score.sum(), attn, retain_graph=need_ixg)
                if need_ixg:
                    (g_src,) = torch.autograd.grad(logp_b.sum(), [src_leaf])
    n_enc = len(enc_self)
    hm = lambda kind, n_: _head(head_mask, kind, n_)  # noqa: E731

    if "rollout" in methods:
        # Plain attention of batch row 0 (all rows are the same sentence), averaged over heads.
        a_enc = [_head_mean(a.probs[:1], hm("enc_self", k_))[0] for k_, a in enumerate(enc_self)]  # (s, s)
        a_self = np.stack([_head_mean(a.probs[:1], hm("dec_self", k_))[0]
                           for k_, a in enumerate(dec_self)])  # (L, t, t)
        a_cross = np.stack([_head_mean(a.probs[:1], hm("cross", k_))[0] for k_, a in enumerate(cross)])  # (L, t, s)
        # Target i cannot depend on decoder positions after i: keep rows <= i per explained target, as the
        # gradient does by itself for relevance (without it eq. 10's transpose would read later positions).
        c_self, c_cross = causal_maps(a_self)[explain], causal_maps(a_cross)[explain]  # (r, L, t, t), (r, L, t, s)
        _, _, r_ts = relevance_rules(a_enc, list(c_self.transpose(1, 0, 2, 3)), list(c_cross.transpose(1, 0, 2, 3)))
        out["matrices"]["rollout"] = normalise_rows(explained_rows(r_ts, explain))
    if "relevance" in methods:
        # Eq. 5: Ā = mean over heads of (∇A ⊙ A)^+, one map set per explained target (batch row).
        weighted = [(g * a.probs).clamp(min=0) for g, a in zip(grads, enc_self + dec_self + cross)]
        kinds = ["enc_self"] * n_enc + ["dec_self"] * len(dec_self) + ["cross"] * len(cross)
        layer_no = list(range(n_enc)) + list(range(len(dec_self))) + list(range(len(cross)))
        maps = [_head_mean(w, hm(k_, l_)) for w, k_, l_ in zip(weighted, kinds, layer_no)]  # each (r, i, j)
        n_dec = len(dec_self)
        _, _, r_ts = relevance_rules(maps[:n_enc], maps[n_enc : n_enc + n_dec], maps[n_enc + n_dec :])
        out["matrices"]["relevance"] = normalise_rows(explained_rows(r_ts, explain))
    if "input_x_grad" in methods:
        # ∂/∂total = ∂/∂scaled (total = scaled + positional), so this is Σ_d scaled · gradient: the word, not
        # its position.
        signed = (src_emb.scaled.double() * g_src.double()).sum(-1)  # (r, s): row b explains target explain[b]
        signed = signed.detach().cpu().numpy()
        out["signed"]["input_x_grad"] = signed
        out["matrices"]["input_x_grad"] = normalise_rows(np.abs(signed))
    if "cross_attention" in methods:
        out["matrices"]["cross_attention"] = _head_mean(cross[-1].probs[:1], hm("cross", len(cross) - 1))[0][explain]
    if "cross_attention_mean" in methods:
        per_layer = [_head_mean(a.probs[:1], hm("cross", k_))[0] for k_, a in enumerate(cross)]
        out["matrices"]["cross_attention_mean"] = np.mean(per_layer, axis=0)[explain]
    out["matrices"] = {m: out["matrices"][m] for m in methods}  # the order asked for
    return out


def attribute(translator, text: str, tgt_tokens: list[str], methods: Sequence[str] = DEFAULT_METHODS,
              off_heads=None, relevance_score: str = "logit", rows: Sequence[int] | None = None) -> Attribution:
    """Attribute each token of `tgt_tokens` to the source tokens of `text` (see the module docstring).

    Pass the model's own tokens (Translation.raw_tokens); a token outside the target vocabulary is
    explained as <unk>. Append "<eos>" to explain the stop decision too. `off_heads` switches heads off
    as Translator.translate does (averages over heads then use the heads that are on). `rows` (0-based
    positions in `tgt_tokens`) explains only those tokens, still teacher-forced on the whole list; the
    result's `rows` says which. NumPy only.
    """
    source = translator.prepare(text)
    tv = translator.tgt_vocab
    explain = list(range(len(tgt_tokens))) if rows is None else [int(r) for r in rows]
    res = attribute_ids(translator.model, source.ids, tv.encode(list(tgt_tokens)), tv.bos_idx, tuple(methods),
                        translator.head_mask(off_heads), relevance_score, explain)
    return Attribution(
        src_tokens=source.axis_tokens,
        tgt_tokens=list(tgt_tokens),
        matrices={m: a.astype(np.float32) for m, a in res["matrices"].items()},
        definitions={m: DEFINITIONS[m] for m in methods},
        signed={m: a.astype(np.float32) for m, a in res["signed"].items()},
        chosen_probs=np.exp(res["chosen_log_probs"]).astype(np.float32),
        rows=explain,
    )


# ----------------------------------------------------------------------------- faithfulness

@torch.inference_mode()
def removal_log_probs(model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], bos: int,
                      removals: list[tuple[int, ...]], chunk: int = 64) -> np.ndarray:
    """(len(removals), t): log p(y_i) at every position with the source positions of each removal hidden.

    A removed position's id becomes <pad>, so the source mask hides it as a key in every encoder and
    cross-attention; the others keep their positions. The empty tuple is the unchanged sentence.
    """
    pad = model.cfg.pad_idx
    device = next(model.parameters()).device
    tgt_in = torch.tensor([bos] + list(tgt_ids[:-1]), dtype=torch.long, device=device)
    y = torch.tensor(list(tgt_ids), dtype=torch.long, device=device)
    out = []
    for start in range(0, len(removals), chunk):
        part = removals[start : start + chunk]
        src = torch.tensor([list(src_ids)] * len(part), dtype=torch.long, device=device)  # (m, s)
        for r, positions in enumerate(part):
            if positions:
                src[r, list(positions)] = pad
        log_probs, _ = model(src, tgt_in.expand(len(part), -1))  # (m, t, V), fused attention
        out.append(log_probs.gather(-1, y.view(1, -1, 1).expand(len(part), -1, 1))[..., 0].double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, len(tgt_ids)))


def _greedy_ids(translator, sources, batch_size: int = 64) -> list[list[int]]:
    """The greedy output ids (no <bos>/<eos>) of each prepared source, decoded in batches of similar length."""
    from model.inference.decode import search

    v, pad = translator.tgt_vocab, translator.cfg.pad_idx
    out: list[list[int]] = [[] for _ in sources]
    order = sorted((i for i, s in enumerate(sources) if s.tokens), key=lambda i: len(sources[i].ids))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        width = max(len(sources[i].ids) for i in idx)
        src = torch.full((len(idx), width), pad, dtype=torch.long)
        for r, i in enumerate(idx):
            src[r, : len(sources[i].ids)] = torch.tensor(sources[i].ids)
        limits = [translator.max_steps(sources[i], None) for i in idx]
        decoded = search(translator.model, src, v.bos_idx, v.eos_idx, limits)
        for i, dec in zip(idx, decoded):
            out[i] = dec.ids
    return out


def faithfulness(translator, texts: list[str], targets: list[list[str]] | None = None,
                 methods: Sequence[str] = METHODS, ks: Sequence[int] = (1, 2, 3), seed: int = 0,
                 relevance_score: str = "logit", progress=None) -> dict:
    """Removal test of each method against random removal, over sentences `texts` (see the module docstring).

    Each sentence is teacher-forced on its greedy translation (or on `targets[n]`, tokens). For every output
    token and k in `ks`, the k source words ranked highest by a method are removed (ties: the earlier word) and
    so are k words drawn at random (numpy default_rng(seed), the same draw for every method); the drop
    p(y_i) − p(y_i | removed) is averaged over tokens. A token counts for k when its sentence has at least k
    words. For k = 1 every single-word removal is computed, which also gives the expected drop of a uniformly
    random word and the best possible single removal (oracle).
    """
    model, tv = translator.model, translator.tgt_vocab
    rng = np.random.default_rng(seed)
    sources = [translator.prepare(t) for t in texts]
    ids_list = ([tv.encode(list(tok)) for tok in targets] if targets is not None else _greedy_ids(translator, sources))
    drops = {m: {k: [] for k in ks} for m in list(methods) + ["random"]}
    expected1, oracle1, p_chosen = [], [], []
    n_sent = 0
    for source, tgt_ids in zip(sources, ids_list):
        if progress is not None:
            progress(1)
        n_words = len(source.tokens)
        if n_words == 0 or not tgt_ids:
            continue
        n_sent += 1
        t = len(tgt_ids)
        att = attribute_ids(model, source.ids, tgt_ids, tv.bos_idx, tuple(methods), relevance_score=relevance_score)
        singles = [(j,) for j in range(n_words)]
        plans: dict[tuple[str, int], list[tuple[int, ...]]] = {}  # (method, k) -> one removal per token
        for k in ks:
            if k > n_words:
                continue
            for m in methods:
                order = np.argsort(-att["matrices"][m][:, :n_words], axis=1, kind="stable")  # <eos> never removed
                plans[(m, k)] = [tuple(sorted(order[i, :k].tolist())) for i in range(t)]
            draws = [rng.choice(n_words, size=k, replace=False) for _ in range(t)]
            plans[("random", k)] = [tuple(sorted(d.tolist())) for d in draws]
        removals = [()] + singles + sorted({r for plan in plans.values() for r in plan} - set(singles))
        where = {r: n for n, r in enumerate(removals)}
        probs = np.exp(removal_log_probs(model, source.ids, tgt_ids, tv.bos_idx, removals))  # (R, t)
        p0 = probs[0]  # (t,)
        p_chosen.extend(p0.tolist())
        d1 = p0[None, :] - probs[1 : 1 + n_words]  # (words, t)
        expected1.extend(d1.mean(0).tolist())
        oracle1.extend(d1.max(0).tolist())
        for (m, k), plan in plans.items():
            drops[m][k].extend(float(p0[i] - probs[where[r], i]) for i, r in enumerate(plan))
    result = {"n_sentences": n_sent, "n_tokens": len(p_chosen),
              "mean_p_chosen": float(np.mean(p_chosen)) if p_chosen else None, "methods": {}}
    rand = {k: np.asarray(drops["random"][k]) for k in ks}
    for m in list(methods) + ["random"]:
        per_k = {}
        for k in ks:
            d = np.asarray(drops[m][k])
            entry = {"n_tokens": int(d.size), "mean_drop": float(d.mean()) if d.size else None}
            if m != "random":
                r = rand[k]
                entry["mean_drop_random"] = float(r.mean()) if r.size else None
                entry["share_beats_random"] = float((d > r).mean()) if d.size else None
                entry["share_ties_random"] = float((d == r).mean()) if d.size else None  # the same words removed
            per_k[str(k)] = entry
        means = [e["mean_drop"] for e in per_k.values() if e["mean_drop"] is not None]
        result["methods"][m] = {"definition": DEFINITIONS.get(m, "k source words drawn uniformly at random "
                                                                "(seeded), <eos> excluded"),
                                "k": per_k, "aopc": float(np.mean(means)) if means else None}
    result["single_removal"] = {
        "expected_random_mean_drop": float(np.mean(expected1)) if expected1 else None,
        "oracle_mean_drop": float(np.mean(oracle1)) if oracle1 else None,
    }
    return result


def format_table(result: dict, ks: Sequence[int]) -> str:
    """A small fixed-width table of the faithfulness result."""
    header = ["method"] + [h for k in ks for h in (f"drop@{k}", f"rand@{k}", f"beats@{k}")] + ["AOPC"]
    rows = []
    for m, r in result["methods"].items():
        row = [m]
        for k in ks:
            e = r["k"][str(k)]
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            row += [fmt(e["mean_drop"]), fmt(e.get("mean_drop_random", e["mean_drop"])),
                    "-" if e.get("share_beats_random") is None else f"{e['share_beats_random']:.0%}"]
        row.append("-" if r["aopc"] is None else f"{r['aopc']:.3f}")
        rows.append(row)
    widths = [max(len(str(x[i])) for x in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """python -m model.attribution --checkpoint DIR [--src F --ref F] [--limit N] [--out FILE.json] [--seed S]"""
    from model.analysis.experiments import ROOT, find_data_dir
    from model.inference.translator import Translator
    from model.io.checkpoint import DEFAULT_CHECKPOINT, CheckpointError
    from model.training.data import DataError, find_file, read_lines

    ap = argparse.ArgumentParser(
        prog="python -m model.attribution", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Faithfulness of the attribution methods: remove the top-attributed source words of each\n"
                    "output token (masked as padding) and measure the drop of its probability, against random\n"
                    "words. Default data: the Multi30k validation split (never the test split).\n\n"
                    "    python -m model.attribution --checkpoint checkpoints/multi30k-de-en --src sentences.de \\\n"
                    "        --limit 50 --ks 1 2 3 --seed 0 --out faithfulness.json")
    ap.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="checkpoint folder (default: %(default)s)")
    ap.add_argument("--src", help="source sentences, one per line (plain or .gz); default: val.de of Multi30k")
    ap.add_argument("--ref", help="reference translations, line by line; needed only with --target reference")
    ap.add_argument("--target", choices=("greedy", "reference"), default="greedy",
                    help="teacher-force on the model's greedy translation (default) or on the reference")
    ap.add_argument("--limit", type=int, default=300, help="the first N sentences (default 300; 0 = all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random removals")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3], help="how many words to remove (default 1 2 3)")
    ap.add_argument("--relevance-score", choices=RELEVANCE_SCORES, default="logit",
                    help="what the relevance gradients are taken of (default: the chosen token's logit)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "faithfulness.json"),
                    help="the JSON report to write (default: %(default)s)")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))

    try:
        if args.src:
            src_path, ref_path = Path(args.src), (Path(args.ref) if args.ref else None)
            src_lines = read_lines(src_path)
            split = None
        else:
            folder, looked = find_data_dir("val")
            if folder is None:
                print(f"error: no Multi30k validation split (val.de[.gz]) in {', '.join(map(str, looked))}; "
                      f"pass --src/--ref or set ATLAS_DATA_DIR", file=sys.stderr)
                return 2
            src_path, ref_path, split = find_file(folder, "val", "de"), find_file(folder, "val", "en"), "val"
            src_lines = read_lines(src_path)
        ref_lines = read_lines(ref_path) if (ref_path is not None and args.target == "reference") else None
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.target == "reference" and ref_lines is None:
        print("error: --target reference needs --ref", file=sys.stderr)
        return 2
    if ref_lines is not None and len(ref_lines) != len(src_lines):
        print(f"error: {src_path} has {len(src_lines)} lines but {ref_path} has {len(ref_lines)}", file=sys.stderr)
        return 2
    try:
        translator = Translator.from_checkpoint(args.checkpoint)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n = len(src_lines) if args.limit <= 0 else min(args.limit, len(src_lines))
    texts = src_lines[:n]
    targets = [translator.target_tokens(r) for r in ref_lines[:n]] if ref_lines is not None else None
    ks = sorted(set(k for k in args.ks if k > 0))
    t0 = time.perf_counter()
    result = faithfulness(translator, texts, targets, METHODS, ks, args.seed, args.relevance_score)
    seconds = time.perf_counter() - t0
    import os
    import platform

    out = {
        "schema": SCHEMA,
        "checkpoint": str(args.checkpoint),
        "data": {"src": str(src_path), "ref": str(ref_path) if ref_lines is not None else None, "split": split,
                 "sentences": f"the first {n} lines"},
        "settings": {
            "target": args.target, "limit": args.limit, "seed": args.seed, "ks": ks,
            "relevance_score": args.relevance_score, "threads": args.threads,
            "removal": "source position made padding (id <pad>): hidden as a key in every encoder and cross-attention, "
                       "positions of the other words kept; the source <eos> is never removed",
            "rows": "every output token of the teacher-forced target; the <eos> decision is not scored",
            "probability": "raw generator softmax p(y_i | removed source, y_<i)",
            "drop": "p(y_i) - p(y_i | k words removed), averaged over tokens; random: k words drawn uniformly "
                    "(numpy default_rng(seed)), the same draw compared with every method",
            "share_beats_random": "share of tokens whose drop exceeds the random removal's (ties: the same words)",
            "aopc": "mean of the mean drops over k",
        },
        **result,
        "seconds": round(seconds, 2),
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "time": time.strftime("%Y-%m-%d %H:%M:%S")},
    }
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"{result['n_sentences']} sentences, {result['n_tokens']} output tokens "
          f"(mean p(chosen) {result['mean_p_chosen'] or 0:.3f}), {seconds:.1f} s")
    print(format_table(result, ks))
    sr = result["single_removal"]
    if sr["expected_random_mean_drop"] is not None:
        print(f"single word: expected drop of a uniformly random word {sr['expected_random_mean_drop']:.3f}, "
              f"best possible (oracle) {sr['oracle_mean_drop']:.3f}")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
