"""The head report on several processes: each rank measures its share of the corpus, and the shares are combined.

torchrun starts the processes (model/training/distributed.py joins them: gloo on CPUs, NCCL on GPUs); every rank
reads the whole corpus and builds the same batch list, runs its own share of the batches, and then the partial sums
are gathered and added on every rank, so that every rank holds the report's numbers and takes the same next step
(the pruning curve's decodes depend on them). Means are taken after the sums and counts are added; nothing order-
dependent is averaged per rank.

Each rank takes every world-th batch of the one-process batch list, rather than every world-th sentence or a
contiguous block: a sentence is then computed beside the same sentences with the same padding as in one process,
so the per-sentence numbers are the same to the last bit and only the order of the float64 sums differs; and as the
batches are sorted by length, every world-th one gives each rank a like share of short and long sentences, which a
contiguous block would not. No batch is left out: the ranks meet only once per stage, not once per batch, so an
uneven share cannot hang a collective.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np
import torch.distributed as dist

from model.analysis.importance import corpus_pass, example_batches, finish_measures
from model.analysis.measures import HeadStats
from model.analysis.pruning import ablation_losses
from model.analysis.sentences import Example
from model.records import KINDS
from model.training.distributed import Ranks

ONE_BATCH = 2**62  # padded positions with room for any batch: token_batches then keeps the sentences given as one


def my_batches(n_batches: int, ranks: Ranks) -> list[int]:
    """This rank's batch numbers: every world-th one, none left out (the last ranks may get one fewer)."""
    return list(range(ranks.rank, n_batches, ranks.world))


def gather(obj, ranks: Ranks) -> list:
    """Every rank's `obj` (picklable), in rank order, on every rank (every rank must call this at the same point)."""
    if ranks.world <= 1:
        return [obj]
    out: list = [None] * ranks.world
    dist.all_gather_object(out, obj)
    return out


def sharded_measures_and_importance(translator, examples: list[Example], n_lines: int, n_tgt_tok: int,
                                    batch_tokens: int, ranks: Ranks,
                                    progress: Callable[[float, str], object] | None = None):
    """importance.measures_and_importance with the batches shared by rank: the same four results on every rank."""
    batches = example_batches(examples, batch_tokens)
    mine = [batches[b] for b in my_batches(len(batches), ranks)]
    parts = gather(corpus_pass(translator, examples, n_lines, mine, progress), ranks)
    stats = {k: HeadStats.combine([p[0][k] for p in parts]) for k in KINDS}
    grad_abs = {k: sum(p[1][k] for p in parts) for k in KINDS}  # (L, h) sums over sentences of |dL(x)/dxi|
    total_nll = sum(p[2] for p in parts)
    return (*finish_measures(stats, grad_abs, n_tgt_tok), total_nll)


def sharded_ablation_losses(translator, examples: list[Example], heads: Sequence[tuple[str, int, int]],
                            batch_tokens: int, ranks: Ranks, progress: Callable[[float], object] | None = None,
                            ) -> tuple[float, dict[tuple[str, int, int], float]]:
    """pruning.ablation_losses with the batches shared by rank: the same (baseline, {head: NLL}) sums on every rank."""
    batches = example_batches(examples, batch_tokens)
    mine = my_batches(len(batches), ranks)
    base, off = 0.0, np.zeros(len(heads))
    for n, b in enumerate(mine):
        # One batch of the one-process run at a time: its sentences come in token_batches' own (stable) length
        # order and ONE_BATCH has room for them all, so ablation_losses forms exactly that batch again.
        b_base, b_off = ablation_losses(translator, [examples[i] for i in batches[b]], heads, ONE_BATCH)
        base += b_base
        off += np.array([b_off[h_] for h_ in heads])
        if progress is not None:
            progress((n + 1) / len(mine))
    parts = gather((base, off), ranks)
    return sum(p[0] for p in parts), dict(zip(heads, sum(p[1] for p in parts).tolist()))


class ShardedTranslator:
    """A translator whose translate_batch decodes this rank's share and returns every rank's, in corpus order.

    pruning_curve decodes through it unchanged. A rank decodes every world-th chunk of translate_batch's own
    batching (sources sorted by length, batch_size at a time), so each sentence is decoded beside the same
    sentences, with the same padding, as in one process, and no greedy near-tie can break another way. Every rank
    gets all the hypotheses back, scores the same BLEU and so asks for the same next decode.
    """

    def __init__(self, translator, ranks: Ranks):
        self._translator, self._ranks = translator, ranks
        self._orders: dict[tuple[str, ...], list[int]] = {}  # texts -> decode order (pruning decodes one list often)

    def __getattr__(self, name: str):  # called for what this class lacks: the translator's own attributes
        if name.startswith("_"):  # not set yet (a copy under construction): no endless recursion through here
            raise AttributeError(name)
        return getattr(self._translator, name)

    def translate_batch(self, texts: list[str], batch_size: int | None = None,
                        progress: Callable[[int], object] | None = None, **kwargs) -> list[str]:
        """Translator.translate_batch of `texts`, decoded by all ranks together (every rank must call it)."""
        tr, ranks = self._translator, self._ranks
        if batch_size is None:  # the batching a plain call would use
            batch_size = inspect.signature(tr.translate_batch).parameters["batch_size"].default
        key = tuple(texts)
        if key not in self._orders:  # as Translator.decode_batch sorts: by source length, stable
            lengths = [len(tr.prepare(t).ids) for t in texts]
            self._orders[key] = sorted(range(len(texts)), key=lengths.__getitem__)
        order = self._orders[key]
        chunks = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
        mine = [i for chunk in chunks[ranks.rank :: ranks.world] for i in chunk]  # in length order: re-sorted as is
        step = None if progress is None else (lambda n: progress(n * ranks.world))  # this rank's pace for all
        hyps = tr.translate_batch([texts[i] for i in mine], batch_size=batch_size, progress=step, **kwargs)
        out: list[str] = [""] * len(texts)
        for part in gather(list(zip(mine, hyps)), ranks):
            for i, hyp in part:
                out[i] = hyp
        return out
