"""Which source tokens each output token came from: four attributions of a teacher-forced translation.

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

Gradients come from one pass with autograd switched on, its patterns kept in the graph by an activation cache
(graph_pass): the sentence is repeated once per explained target in the batch dimension and row b's objective is
the score of its target at that target's position, so one torch.autograd.grad of the sum gives every target its
own gradients (rows of a batch share no computation).
`rows` explains some targets only (the app explains the step on screen): the pass is then that many rows, not
t, and each row is the one the whole matrix would hold (teacher-forcing reads the same prefix either way). Hooks
of the call make the scaled token embeddings (`hook_embed`, both sides) detached leaves, so the pass works when
the parameters do not require grad, and torch.autograd.grad writes nothing into any parameter's .grad. The hooks
travel with the call (model/nn/hooks.py), no module attribute is set, train/eval mode is not touched: the shared
model keeps no trace of a request.

The rules themselves (rollout, Chefer et al.'s relevance rules) are NumPy in model/analysis/attribution_rules.py;
the faithfulness check and its command line (python -m model.attribution) are model/analysis/faithfulness.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.analysis.attribution_rules import causal_maps, explained_rows, normalise_rows, relevance_rules
from model.nn.hooks import Hooks, attn_name, gate_hooks
from model.nn.trace import patterns
from model.nn.transformer import EncoderDecoder, make_src_mask, make_tgt_mask
from model.records import Attribution

METHODS = ("rollout", "relevance", "input_x_grad", "cross_attention", "cross_attention_mean")
DEFAULT_METHODS = ("rollout", "relevance", "input_x_grad", "cross_attention")
GRADIENT_METHODS = ("relevance", "input_x_grad")
RELEVANCE_SCORES = ("logit", "log_prob")

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


# ----------------------------------------------------------------------------- the model pass

Gates = dict  # kind -> (L, h) head gates, 0 where a head is off (model/nn/hooks.py off_gates)


def graph_pass(model: EncoderDecoder, src: torch.Tensor, tgt: torch.Tensor, gates: Gates | None = None):
    """src (b, s), tgt (b, t) = <bos> y_1 .. y_{t-1}, with autograd on (the caller's block): hooks make both
    sides' hook_embed detached leaves that require grad, so every pattern is in the graph even when the parameters
    do not require grad; `gates` switch heads off. ∂/∂(scaled embedding) = ∂/∂(what enters layer 1): the
    positional encoding is added to it. Returns (decoder states (b, t, d) after the final norm, the source leaf
    (b, s, d), kind -> per layer (b, h, i, j) patterns in the graph)."""
    pad = model.cfg.pad_idx
    src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt, pad)
    leaves: dict[str, torch.Tensor] = {}
    leaf = lambda x, name: leaves.setdefault(name, x.detach().requires_grad_(True))  # noqa: E731 (once per side)
    cache: dict[str, torch.Tensor] = {}
    fwd = [("hook_embed", leaf), ("decoder.hook_embed", leaf)] + (gate_hooks(gates) if gates else [])
    hooks = Hooks(fwd, cache, patterns, detach=False)
    states = model.decode(model.encode(src, src_mask, hooks), src_mask, tgt, tgt_mask, hooks)
    maps = {k: [cache[attn_name(k, l, "hook_pattern")] for l in range(n)] for k, n in model.cfg.kind_layers.items()}
    return states, leaves["hook_embed"], maps


def _head_mean(x: torch.Tensor, hm: torch.Tensor | None) -> np.ndarray:
    """(b, h, i, j) -> (b, i, j) float64 mean over the heads that are on (all of them without a head mask)."""
    x = x.detach().double()
    if hm is None:
        return x.mean(1).cpu().numpy()
    return ((x * hm.to(x).view(1, -1, 1, 1)).sum(1) / max(float(hm.sum()), 1.0)).cpu().numpy()


@dataclass
class _ScoredPass:
    """What the methods read from the traced pass: attention per layer, the source embeddings, the gradients."""

    maps: dict  # kind -> per layer (b, h, i, j) patterns
    src_scaled: torch.Tensor  # (b, s, d) the source's token embeddings × √d_model: the word part of the input
    chosen_log_probs: np.ndarray  # (r,) log p of each explained target
    grads: tuple | None  # d score / d attention probabilities, one per layer (enc_self, dec_self, cross order)
    g_src: torch.Tensor | None  # (r, s, d) d log p / d source leaf, for input_x_grad


def attribute_ids(model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], bos: int,
                  methods: Sequence[str] = DEFAULT_METHODS, gates: Gates | None = None,
                  relevance_score: str = "logit", rows: Sequence[int] | None = None, foil: int | None = None) -> dict:
    """Attributions of target ids tgt_ids (y_1 .. y_t) to the source ids src_ids (with <eos>; a <pad> id
    there is hidden as a key, as padding is). Returns {"matrices": {method: (r, s) float64}, "signed":
    {"input_x_grad": (r, s)} when asked, "chosen_log_probs": (r,)}: row k explains target rows[k] (0-based
    positions in tgt_ids; default every target, r = t). A gradient method costs one batch row per explained
    target, so explaining one step is about t times cheaper than the whole matrix. With a `foil` id, the objective
    is log p(target) − log p(foil) (why A and not B: model/analysis/lens.py), "chosen_log_probs" its value."""
    explain = _explained(model, methods, relevance_score, len(tgt_ids), rows)  # (r,) target positions
    s = len(src_ids)
    if not explain:
        return {"matrices": {m: np.zeros((0, s)) for m in methods},
                "signed": {"input_x_grad": np.zeros((0, s))} if "input_x_grad" in methods else {},
                "chosen_log_probs": np.zeros(0)}
    ps = _scored_pass(model, src_ids, tgt_ids, bos, methods, gates, relevance_score, explain, foil)
    out: dict = {"matrices": {}, "signed": {}, "chosen_log_probs": ps.chosen_log_probs}
    hm = lambda kind, l: None if gates is None else gates[kind][l]  # noqa: E731  (L, h) gates of a kind
    if "rollout" in methods:
        out["matrices"]["rollout"] = _rollout_matrix(ps, hm, explain)
    if "relevance" in methods:
        out["matrices"]["relevance"] = _relevance_matrix(ps, hm, explain)
    if "input_x_grad" in methods:
        # ∂/∂total = ∂/∂scaled (total = scaled + positional), so this is Σ_d scaled · gradient: the word, not
        # its position.
        signed = (ps.src_scaled.double() * ps.g_src.double()).sum(-1)  # (r, s): row b explains explain[b]
        signed = signed.detach().cpu().numpy()
        out["signed"]["input_x_grad"] = signed
        out["matrices"]["input_x_grad"] = normalise_rows(np.abs(signed))
    cross = ps.maps["cross"]
    if "cross_attention" in methods:
        out["matrices"]["cross_attention"] = _head_mean(cross[-1][:1], hm("cross", len(cross) - 1))[0][explain]
    if "cross_attention_mean" in methods:
        per_layer = [_head_mean(a[:1], hm("cross", k_))[0] for k_, a in enumerate(cross)]
        out["matrices"]["cross_attention_mean"] = np.mean(per_layer, axis=0)[explain]
    out["matrices"] = {m: out["matrices"][m] for m in methods}  # the order asked for
    return out


def _explained(model: EncoderDecoder, methods: Sequence[str], relevance_score: str, t: int,
               rows: Sequence[int] | None) -> list[int]:
    """The target positions a request explains (every one without `rows`), once the request is checked."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown attribution method(s) {', '.join(map(repr, unknown))}: use {', '.join(METHODS)}")
    if relevance_score not in RELEVANCE_SCORES:
        raise ValueError(f"relevance_score must be one of {RELEVANCE_SCORES}, got {relevance_score!r}")
    if model.training:
        raise ValueError("attribution needs the model in eval mode (dropout would make it random)")
    explain = list(range(t)) if rows is None else [int(r) for r in rows]
    if any(not 0 <= r < t for r in explain):
        raise ValueError(f"rows must be target positions 0..{t - 1}, got {list(rows)}")
    return explain


def _scored_pass(model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], bos: int, methods: Sequence[str],
                 gates: Gates | None, relevance_score: str, explain: list[int],
                 foil: int | None = None) -> _ScoredPass:
    """The traced pass over the sentence, the explained targets' log-probabilities and the gradients asked for."""
    k = len(explain)
    want_grad = any(m in GRADIENT_METHODS for m in methods)
    n = k if want_grad else 1  # one batch row per explained target when gradients are needed
    device = next(model.parameters()).device
    # A request may come from inside inference_mode/no_grad: switch autograd on for this block only (both
    # settings are thread-local, so other requests are not affected). Every tensor is made inside it: one
    # made in inference mode cannot enter a graph.
    with torch.inference_mode(False), torch.enable_grad():
        src = torch.tensor([list(src_ids)] * n, dtype=torch.long, device=device)  # (n, s)
        tgt = torch.tensor([[bos] + list(tgt_ids[:-1])] * n, dtype=torch.long, device=device)  # (n, t)
        at = torch.tensor(explain, dtype=torch.long, device=device)  # (r,) the explained positions
        y = torch.tensor(list(tgt_ids), dtype=torch.long, device=device)[at]  # (r,) their chosen tokens
        states, src_leaf, maps = graph_pass(model, src, tgt, gates)
        # Batch row b explains target explain[b]: its objective is that token's score at that position, so only
        # that position goes through the generator (the (n, t, V) logits of every position would cost more than
        # the layers). Rows share no computation, so the gradient of the sum w.r.t. row b's tensors is that of
        # row b's score.
        at_target = states[torch.arange(n, device=device), at] if want_grad else states[0, at]  # (r, d)
        logits = model.generator.proj(at_target)  # (r, V) before log-softmax
        log_probs = F.log_softmax(logits, dim=-1)  # (r, V)
        logp_b = log_probs[torch.arange(k, device=device), y]  # (r,)
        if foil is not None:
            logp_b = logp_b - log_probs[:, foil]
        chosen = logp_b.detach().double().cpu().numpy()
        grads = g_src = None
        if want_grad:
            grads, g_src = _gradients(methods, relevance_score, logits, logp_b, y, sum(maps.values(), []), src_leaf)
    return _ScoredPass(maps, src_leaf.detach(), chosen, grads, g_src)


def _gradients(methods: Sequence[str], relevance_score: str, logits: torch.Tensor, logp_b: torch.Tensor,
               y: torch.Tensor, attn: list[torch.Tensor], src_leaf: torch.Tensor):
    """(d score / d every layer's attention probabilities or None, (r, s, d) d log p / d source leaf or None)."""
    need_rel, need_ixg = "relevance" in methods, "input_x_grad" in methods
    grads = g_src = None
    if need_rel and relevance_score == "log_prob":
        got = torch.autograd.grad(logp_b.sum(), attn + ([src_leaf] if need_ixg else []))
        return got[: len(attn)], (got[-1] if need_ixg else None)
    if need_rel:
        score = logits[torch.arange(len(y), device=logits.device), y]  # (r,) pre-softmax, as Chefer et al.'s code
        grads = torch.autograd.grad(score.sum(), attn, retain_graph=need_ixg)
    if need_ixg:
        (g_src,) = torch.autograd.grad(logp_b.sum(), [src_leaf])
    return grads, g_src


def _rollout_matrix(ps: _ScoredPass, hm, explain: list[int]) -> np.ndarray:
    """(r, s) rollout: the relevance rules on plain head-averaged attention, made causal per explained target."""
    # Plain attention of batch row 0 (all rows are the same sentence), averaged over heads.
    plain = {k: [_head_mean(a[:1], hm(k, l))[0] for l, a in enumerate(per)] for k, per in ps.maps.items()}
    a_enc, a_self, a_cross = plain["enc_self"], np.stack(plain["dec_self"]), np.stack(plain["cross"])  # (L, i, j)
    # Target i cannot depend on decoder positions after i: keep rows <= i per explained target, as the
    # gradient does by itself for relevance (without it eq. 10's transpose would read later positions).
    c_self, c_cross = causal_maps(a_self)[explain], causal_maps(a_cross)[explain]  # (r, L, t, t), (r, L, t, s)
    _, _, r_ts = relevance_rules(a_enc, list(c_self.transpose(1, 0, 2, 3)), list(c_cross.transpose(1, 0, 2, 3)))
    return normalise_rows(explained_rows(r_ts, explain))


def _relevance_matrix(ps: _ScoredPass, hm, explain: list[int]) -> np.ndarray:
    """(r, s) relevance: the same rules on gradient-weighted attention, one map set per explained target."""
    # Eq. 5: Ā = mean over heads of (∇A ⊙ A)^+, one map set per explained target (batch row).
    layers = [(k_, l_, a) for k_, per in ps.maps.items() for l_, a in enumerate(per)]  # enc_self, dec_self, cross
    maps = [_head_mean((g * a).clamp(min=0), hm(k_, l_)) for g, (k_, l_, a) in zip(ps.grads, layers)]  # (r, i, j)
    n_enc, n_dec = len(ps.maps["enc_self"]), len(ps.maps["dec_self"])
    _, _, r_ts = relevance_rules(maps[:n_enc], maps[n_enc : n_enc + n_dec], maps[n_enc + n_dec :])
    return normalise_rows(explained_rows(r_ts, explain))


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
                        translator.gates(off_heads), relevance_score, explain)
    return Attribution(
        src_tokens=source.axis_tokens,
        tgt_tokens=list(tgt_tokens),
        matrices={m: a.astype(np.float32) for m, a in res["matrices"].items()},
        definitions={m: DEFINITIONS[m] for m in methods},
        signed={m: a.astype(np.float32) for m, a in res["signed"].items()},
        chosen_probs=np.exp(res["chosen_log_probs"]).astype(np.float32),
        rows=explain,
    )

