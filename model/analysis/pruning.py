"""What switching heads off costs: the loss with one head ablated, and the pruning curve of greedy BLEU.

ablation_losses switches each head off alone (head_mask 0) and measures the reference NLL; pruning_curve
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
from model.nn.transformer import make_src_mask, make_tgt_mask
from model.records import KINDS

DEFAULT_PRUNING_LIMIT = 500
PRUNING_FRACTIONS = tuple(k / 10 for k in range(11))


def ablation_losses(translator, examples: list[Example], heads: Sequence[tuple[str, int, int]],
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: Callable[[float], object] | None = None,
                    ) -> tuple[float, dict[tuple[str, int, int], float]]:
    """(summed token NLL with every head on, {head: summed NLL with that head alone off}) over the examples.

    The same maths as EncoderDecoder.forward with a head_mask (a test checks it), but layers below the
    switched-off head are not run again: each batch keeps the baseline's input to every encoder and decoder
    layer, so switching off a head of decoder layer l reruns decoder layers l.. only, and one of encoder
    layer l reruns encoder layers l.. and the decoder. Only real target positions reach the generator.
    """
    model, cfg = translator.model, translator.cfg
    pad = cfg.pad_idx
    off = {h_: 0.0 for h_ in heads}
    base = 0.0
    batches = example_batches(examples, batch_tokens)

    def run_encoder(x, src_mask, start=0, layer_mask=None):
        for n in range(start, len(model.encoder_layers)):
            x, _ = model.encoder_layers[n](x, src_mask, layer_mask if n == start else None)
        return model.encoder_norm(x)

    def run_decoder(y, memory, src_mask, tgt_mask, start=0, kind=None, layer_mask=None, keep=None):
        for n in range(start, len(model.decoder_layers)):
            if keep is not None:
                keep.append(y)
            shm = layer_mask if n == start and kind == "dec_self" else None
            chm = layer_mask if n == start and kind == "cross" else None
            y, _, _ = model.decoder_layers[n](y, memory, src_mask, tgt_mask, shm, chm)
        return model.decoder_norm(y)

    with torch.inference_mode():
        for n, batch in enumerate(batches):
            src, tgt_in, tgt_out = example_tensors(examples, batch, translator)
            src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt_in, pad)
            real = tgt_out != pad  # (b, t)
            gold = tgt_out[real]  # (N,)

            def nll(y):  # (b, t, d) decoder states -> summed NLL of the real target tokens
                lp = model.generator(y[real])  # (N, V): padded positions never reach the generator
                return -float(lp.gather(-1, gold[:, None]).sum())

            enc_in = []  # input of every encoder layer, (b, s, d) each
            x, _ = model.src_embed(src)
            for layer in model.encoder_layers:
                enc_in.append(x)
                x, _ = layer(x, src_mask)
            memory = model.encoder_norm(x)
            dec_in: list[torch.Tensor] = []
            y0, _ = model.tgt_embed(tgt_in)
            base += nll(run_decoder(y0, memory, src_mask, tgt_mask, keep=dec_in))
            for kind, l, hh in heads:
                mask = torch.ones(cfg.n_heads)
                mask[hh] = 0.0
                if kind == "enc_self":
                    mem = run_encoder(enc_in[l], src_mask, l, mask)
                    off[(kind, l, hh)] += nll(run_decoder(y0, mem, src_mask, tgt_mask))
                else:
                    off[(kind, l, hh)] += nll(run_decoder(dec_in[l], memory, src_mask, tgt_mask, l, kind, mask))
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
