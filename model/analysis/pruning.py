"""What switching heads off costs: the loss with one head ablated, and the pruning curve of greedy BLEU.

ablation_losses switches each head off alone (a gate of 0 on its hook_z) and measures the reference NLL; pruning_curve
switches the least important heads off together (Michel et al. 2019, Fig. 3) and decodes, and does the same in
the order of the measured loss increase when the ablation's numbers are given. Shape letters: see
model/__init__.py (b batch, s source, t target, d d_model, V vocabulary).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from model.analysis.importance import DEFAULT_BATCH_TOKENS, example_batches, example_tensors, importance_order
from model.analysis.measures import THRESHOLDS
from model.analysis.sentences import Example
from model.nn.hooks import Hooks, gate_hooks, off_gates
from model.nn.transformer import make_src_mask, make_tgt_mask
from model.records import KINDS

DEFAULT_PRUNING_LIMIT = 500
PRUNING_FRACTIONS = tuple(k / 10 for k in range(11))


def ablation_losses(translator, examples: list[Example], heads: Sequence[tuple[str, int, int]],
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: Callable[[float], object] | None = None,
                    ) -> tuple[float, dict[tuple[str, int, int], float]]:
    """(summed token NLL with every head on, {head: summed NLL with that head alone off}) over the examples.

    Layers below the switched-off head are not run again: the baseline pass caches every layer's input
    (hook_resid_pre), and EncoderDecoder.encode_from / decode_from run from there, so switching off a head of
    decoder layer l reruns decoder layers l.. only, and one of encoder layer l reruns encoder layers l.. and the
    decoder (a test checks this equals a whole pass with the gate). Only real target positions reach the generator.
    """
    model, cfg = translator.model, translator.cfg
    pad = cfg.pad_idx
    off = {h_: 0.0 for h_ in heads}
    base = 0.0
    batches = example_batches(examples, batch_tokens)
    with torch.inference_mode():
        for n, batch in enumerate(batches):
            src, tgt_in, tgt_out = example_tensors(examples, batch, translator)
            src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt_in, pad)
            real = tgt_out != pad  # (b, t)
            gold = tgt_out[real]  # (N,)

            def nll(y, real=real, gold=gold):  # (b, t, d) decoder states -> summed NLL of the real target tokens
                lp = model.generator(y[real])  # (N, V): padded positions never reach the generator
                return -float(lp.gather(-1, gold[:, None]).sum())

            inputs: dict[str, torch.Tensor] = {}  # every layer's input, (b, n, d)
            keep = Hooks(cache=inputs, names_filter=lambda name: name.endswith(".hook_resid_pre"))
            memory = model.encode(src, src_mask, keep)
            base += nll(model.decode(memory, src_mask, tgt_in, tgt_mask, keep))
            for kind, l, hh in heads:
                gate = Hooks(gate_hooks(off_gates(cfg, [(kind, l, hh)])))
                if kind == "enc_self":
                    mem = model.encode_from(inputs[f"encoder.{l}.hook_resid_pre"], src_mask, l, gate)
                    off[(kind, l, hh)] += nll(model.decode(mem, src_mask, tgt_in, tgt_mask))
                else:
                    off[(kind, l, hh)] += nll(model.decode_from(inputs[f"decoder.{l}.hook_resid_pre"], memory,
                                                                src_mask, tgt_mask, l, gate))
            if progress is not None:
                progress((n + 1) / len(batches))
    return base, off


def pruning_curve(translator, src: list[str], ref: list[str], importance: dict[str, np.ndarray],
                  progress: Callable[[float, str], object] | None = None,
                  fractions: Sequence[float] = PRUNING_FRACTIONS,
                  loss_increase: dict[str, np.ndarray] | None = None) -> dict:
    """Greedy corpus BLEU with round(f x N) of the least important heads off, per kind and for all heads.

    Then, per group, the head counts between the last point within thresholds.bleu_drop of the baseline and
    the first point below it are decoded too ("refined"), so heads_off_before_bleu_drop is exact to one head.
    With `loss_increase` (the ablation's per-head loss increase), the same is done in ascending order of that
    measured effect (the section's "by_loss_increase"); a set of heads off is decoded once for both orders.
    """
    from model.training.evaluate import bleu_scores

    orders = {"importance": _group_orders(importance)}
    if loss_increase is not None:
        orders["loss_increase"] = _group_orders(loss_increase)
    cache: dict[frozenset, dict] = {}  # the same heads off (e.g. none) are decoded once
    # progress: the coarse decodes, and room for the refinement (at most a step's gap minus one per group)
    coarse = {frozenset(order[: _count(f, len(order))]) for groups in orders.values() for order in groups.values()
              for f in fractions}
    todo = len(coarse) + sum(max(0, math.ceil(len(o) / max(len(fractions) - 1, 1)) - 1)
                             for groups in orders.values() for o in groups.values())
    signature = None

    def bleu(off: list) -> dict:
        nonlocal signature
        key = frozenset(off)
        if key not in cache:
            done = len(cache)

            def step(n_sent: int) -> None:
                step.count += n_sent
                if progress is not None:
                    progress(min(1.0, (done + step.count / max(len(src), 1)) / todo),
                             f"pruning curve: decode {done + 1} of about {todo} ({len(off)} heads off)")
            step.count = 0
            hyps = translator.translate_batch(src, off_heads=off, progress=step)
            scores = bleu_scores(hyps, ref, translator.tgt_lang)
            signature = scores["signature"]
            cache[key] = {"bleu": scores["sacrebleu"], "bleu_lower_spacy_tokens": scores["bleu_lower_spacy_tokens"]}
        return cache[key]

    by = {name: _curves(groups, bleu, fractions) for name, groups in orders.items()}
    section = {"sentences": len(src), "baseline_bleu": by["importance"]["curves"]["all"][0]["bleu"],
               "signature": signature, "order": "ascending normalised importance (importance.order)",
               **by["importance"],
               "note": "heads_off_before_bleu_drop: per group, how many heads (in importance order) are off at the "
                       "last count before the first one whose BLEU is >= thresholds.bleu_drop below baseline_bleu; the "
                       "counts between two points of the curve around that drop are decoded too (refined, fraction "
                       "null)"}
    if "loss_increase" in by:
        section["by_loss_increase"] = {
            "order": "ascending ablation loss increase (ablation.loss_increase): the heads whose removal costs "
                     "the least loss first", **by["loss_increase"]}
    return section


def _group_orders(scores: dict[str, np.ndarray]) -> dict[str, list[tuple[str, int, int]]]:
    """Per kind and for all heads together: the heads in ascending order of `scores`."""
    groups = {k: importance_order(scores, (k,)) for k in KINDS}
    groups["all"] = importance_order(scores)
    return groups


def _curves(groups: dict[str, list], bleu: Callable[[list], dict], fractions: Sequence[float]) -> dict:
    """One order's curves, their refinement around the first drop and heads_off_before_bleu_drop per group."""
    def point(f: float | None, off: list) -> dict:
        return {"fraction": f, "heads_off": len(off), "off": [list(h_) for h_ in off], **bleu(off)}

    curves = {g: [point(f, order[: _count(f, len(order))]) for f in fractions] for g, order in groups.items()}
    base = curves["all"][0]["bleu"]
    drop = THRESHOLDS["bleu_drop"]
    refined: dict[str, list] = {}
    within: dict[str, int] = {}
    for g, order in groups.items():
        pts = curves[g]
        first_bad = next((pt["heads_off"] for pt in pts if base - pt["bleu"] >= drop), None)
        last_ok = max((pt["heads_off"] for pt in pts if first_bad is None or pt["heads_off"] < first_bad), default=0)
        refined[g] = []
        n_ok = last_ok
        if first_bad is not None:
            for n in range(last_ok + 1, first_bad):
                pt = point(None, order[:n])
                refined[g].append(pt)
                if base - pt["bleu"] >= drop:
                    break
                n_ok = n
        within[g] = n_ok
    return {"curves": curves, "refined": refined, "heads_off_before_bleu_drop": within}


def _count(fraction: float, n: int) -> int:
    """round(fraction x n), halves up (Python's round() would send 0.5 x 5 to 2)."""
    return int(math.floor(fraction * n + 0.5 + 1e-9))
