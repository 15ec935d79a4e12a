"""Gradient head importance (Michel et al. 2019) and the one corpus pass that measures every head.

Every head's output (hook_z) is multiplied by a gate xi = 1 by a hook of the call; with one gate per sentence and
head, one backward pass per batch gives each sentence's own dL(x)/dxi, so that |.| is summed per sentence and no
sign cancels within a batch. The same pass caches the attention patterns for measures.HeadStats, so the corpus is
read once for both. Shape letters: see model/__init__.py (b batch, L layers, h heads, s source, t target).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from model.analysis.measures import HeadStats
from model.analysis.sentences import Example
from model.nn.hooks import Hooks, attn_name, gate_hooks
from model.nn.rotary import layer_masks
from model.nn.trace import patterns
from model.nn.transformer import make_src_mask, make_tgt_mask
from model.records import KINDS
from model.training.batch import collate
from model.training.data import token_batches

DEFAULT_BATCH_TOKENS = 3000


def example_batches(examples: list[Example], batch_tokens: int) -> list[list[int]]:
    """Indices into examples, sorted by length and grouped to <= batch_tokens padded positions."""
    return token_batches([(e.src_ids, e.tgt_ids) for e in examples], max(1, batch_tokens), shuffle=False)


def example_tensors(examples: list[Example], batch: list[int], translator):
    """(src (b, s), decoder input (b, t) = <bos> y, decoder output (b, t) = y <eos>)."""
    tv = translator.tgt_vocab
    return collate([(e.src_ids, e.tgt_ids) for e in examples], batch, translator.cfg.pad_idx, tv.bos_idx, tv.eos_idx)


def token_nll(log_probs: torch.Tensor, tgt_out: torch.Tensor, pad: int) -> torch.Tensor:
    """(b, t, V) log-probabilities + (b, t) gold ids -> summed NLL of the real target tokens (a scalar)."""
    gold = log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (b, t)
    return -(gold * (tgt_out != pad)).sum()


def ones_head_mask(cfg, requires_grad: bool = False, dtype=torch.float32,
                   batch: int | None = None) -> dict[str, torch.Tensor]:
    """Gates xi = 1 for every head: kind -> (L, h), or (L, b, h), a gate per sentence, when `batch` = b is given."""
    layers = cfg.kind_layers
    shape = lambda n: (n, cfg.n_heads) if batch is None else (n, batch, cfg.n_heads)  # noqa: E731
    return {k: torch.ones(shape(n), dtype=dtype, requires_grad=requires_grad) for k, n in layers.items()}


def head_mask_gradient(model, src, tgt_in, tgt_out, head_mask: dict[str, torch.Tensor] | None = None,
                       keep_patterns: bool = False):
    """(summed NLL, {kind: dL/dxi}, {point: pattern} or None) for one batch; gates xi = 1 unless `head_mask`
    (kind -> gates) is given.

    The gradients have the gates' shape: (L, h) gates shared by the batch, or (L, b, h) gates, one per sentence.
    As sentence x's loss depends on its own gates only, a (L, b, h) gradient holds each sentence's dL(x)/dxi
    from one backward pass. Only the gates get gradients (torch.autograd.grad with them as inputs: no weight
    gradients are formed).
    """
    dtype = next(model.parameters()).dtype
    xi = head_mask or ones_head_mask(model.cfg, dtype=dtype)
    xi = {k: v.detach().clone().to(dtype).requires_grad_(True) for k, v in xi.items()}
    cache: dict | None = {} if keep_patterns else None
    with torch.enable_grad():
        log_probs = model(src, tgt_in, Hooks(gate_hooks(xi), cache, patterns))
        loss = token_nll(log_probs, tgt_out, model.cfg.pad_idx)
        grads = torch.autograd.grad(loss, [xi[k] for k in KINDS])
    return loss.detach(), dict(zip(KINDS, grads)), cache


def normalise_importance(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """bertology: each layer's scores / their L2 norm, then min-max over all heads of all kinds."""
    per_layer = {k: v / (np.sqrt((v ** 2).sum(-1, keepdims=True)) + 1e-20) for k, v in raw.items()}
    flat = np.concatenate([v.ravel() for v in per_layer.values()])
    lo, hi = flat.min(), flat.max()
    return {k: (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v) for k, v in per_layer.items()}


def importance_order(importance: dict[str, np.ndarray], kinds: Sequence[str] = KINDS) -> list[tuple[str, int, int]]:
    """(kind, layer, head) of the given kinds, least important first (ties: kind, layer, head order)."""
    heads = [(float(importance[k][l, hh]), KINDS.index(k), l, hh) for k in kinds
             for l in range(importance[k].shape[0]) for hh in range(importance[k].shape[1])]
    return [(KINDS[k], l, hh) for _, k, l, hh in sorted(heads)]


def measures_and_importance(translator, examples: list[Example], n_lines: int, n_tgt_tok: int, batch_tokens: int,
                            progress: Callable[[float, str], object] | None = None):
    """One traced, gated forward + backward per batch: (results, importance_raw, importance, summed token NLL).

    results[kind] is HeadStats.result() with measures importance_raw (sum over sentences of |dL(x)/dxi|, per
    target token of the corpus: n_tgt_tok) and importance (normalise_importance) added; `n_lines` is the number
    of corpus lines (top_sentences index them). progress(fraction, message) follows each batch.
    """
    stats, grad_abs, total_nll = corpus_pass(translator, examples, n_lines, example_batches(examples, batch_tokens),
                                             progress)
    return (*finish_measures(stats, grad_abs, n_tgt_tok), total_nll)


def corpus_pass(translator, examples: list[Example], n_lines: int, batches: list[list[int]],
                progress: Callable[[float, str], object] | None = None):
    """The sums of the given batches (indices into examples): ({kind: HeadStats}, {kind: (L, h) sum over sentences
    of |dL(x)/dxi|}, summed token NLL). Sums of disjoint batches add up (model/analysis/sharded.py)."""
    cfg = translator.cfg
    n_layers = cfg.kind_layers
    stats = {k: HeadStats(k, n_layers[k], cfg.n_heads, n_lines, cfg.src_eos) for k in KINDS}
    grad_abs = {k: np.zeros((n_layers[k], cfg.n_heads)) for k in KINDS}
    total_nll = 0.0
    for n, batch in enumerate(batches):
        total_nll += _gated_batch(translator, examples, batch, stats, grad_abs)
        if progress is not None:
            progress((n + 1) / len(batches), f"attention measures and importance: batch {n + 1}/{len(batches)}")
    return stats, grad_abs, total_nll


def finish_measures(stats: dict[str, HeadStats], grad_abs: dict[str, np.ndarray], n_tgt_tok: int):
    """(results, importance_raw, importance) from the corpus sums: per-head means, and the importance per target
    token (importance_raw) and normalised, added to each kind's measures."""
    results = {k: stats[k].result() for k in KINDS}
    importance_raw = {k: v / n_tgt_tok for k, v in grad_abs.items()}
    importance = normalise_importance(importance_raw)
    for k in KINDS:
        results[k]["measures"]["importance_raw"] = importance_raw[k]
        results[k]["measures"]["importance"] = importance[k]
    return results, importance_raw, importance


def windowed(cfg, masks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each self-attention kind's masks per layer (b, L, i, j), the sliding window of a local layer (T5Gemma)
    applied as the model applies it, for the kinds that have a local layer."""
    out = {}
    for kind, side in (("enc_self", "encoder"), ("dec_self", "decoder")):
        windows = cfg.windows(side)
        if any(windows):
            n = masks[kind].shape[-1]
            per = layer_masks(masks[kind][:, None], windows, n, n, 0, kind == "dec_self")  # (b, 1, i, j) each
            out[kind] = torch.cat(per, dim=1)
    return out


def _gated_batch(translator, examples: list[Example], batch: list[int], stats: dict[str, HeadStats],
                 grad_abs: dict[str, np.ndarray]) -> float:
    """One batch of the corpus pass: its gate gradients into grad_abs, its maps into stats; its summed NLL."""
    model, pad = translator.model, translator.cfg.pad_idx
    src, tgt_in, tgt_out = example_tensors(examples, batch, translator)
    gates = ones_head_mask(translator.cfg, dtype=next(model.parameters()).dtype, batch=src.shape[0])  # (L, b, h)
    loss, grads, cache = head_mask_gradient(model, src, tgt_in, tgt_out, gates, keep_patterns=True)
    for k in KINDS:  # |dL(x)/dxi| per sentence, then the sum: no sign cancels between sentences
        grad_abs[k] += grads[k].double().abs().sum(1).numpy()
    src_real = (src != pad).numpy()  # (b, s)
    tgt_real = (tgt_in != pad).numpy()  # (b, t)
    tgt_real[:, 0] = True  # the start query is real even where it is <pad> (Marian), as make_tgt_mask has it
    ex = [examples[i] for i in batch]
    s_len, t_len = src_real.sum(1), tgt_real.sum(1)
    punct = np.array([e.punct for e in ex])
    rare = np.zeros_like(src_real)
    for r, e in enumerate(ex):
        rare[r, : len(e.rare)] = e.rare
    rare_ok = np.array([e.rare_ok for e in ex])
    ids = np.array([e.index for e in ex])
    src_mask, tgt_mask = make_src_mask(src, pad)[:, 0], make_tgt_mask(tgt_in, pad)[:, 0]  # the masks the model used
    masks = {"enc_self": src_mask.expand(-1, src.shape[1], -1), "dec_self": tgt_mask,
             "cross": src_mask.expand(-1, tgt_in.shape[1], -1)}  # (b, i, j)
    masks |= windowed(translator.cfg, masks)  # (b, L, i, j) where a layer has a sliding window
    with torch.no_grad():
        for k in KINDS:
            p = torch.stack([cache[attn_name(k, l, "hook_pattern")] for l in range(grads[k].shape[0])], 1)
            p, allowed = p.float().numpy(), masks[k].numpy()  # (b, L, h, i, j), (b, i, j)
            qvalid = src_real if k == "enc_self" else tgt_real
            stats[k].add(p, allowed, qvalid, s_len, t_len, punct, rare, rare_ok, ids)
    return float(loss)
