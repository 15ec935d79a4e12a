"""A toy task trained live: copy, reverse or sort a random digit sequence with a 2-layer Transformer.

The vocabulary is the ten symbols of the Annotated Transformer's first example (written as the digits
0-9) plus our specials <unk> <pad> <bos> <eos>. The model is an ordinary EncoderDecoder in our
ModelConfig format, wrapped in a ToyTranslator, so every existing view can trace and decode it.
Everything a run builds is its own (model, optimizer, random generator): nothing is shared with the
shipped model or with another run.
Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from model.inference.decode import search
from model.inference.translator import MAX_CHARS, MAX_SRC_TOKENS, Source, Translator
from model.nn.config import ModelConfig
from model.nn.trace import patterns, probs
from model.nn.transformer import EncoderDecoder
from model.text.tokenize import clean_text
from model.text.vocab import SPECIALS, Vocab
from model.training.batch import collate

SYMBOLS = [str(d) for d in range(10)]
TASKS: dict[str, Callable[[list[str]], list[str]]] = {
    "copy": lambda xs: list(xs),
    "reverse": lambda xs: list(reversed(xs)),
    "sort": lambda xs: sorted(xs),
}
# Tasks a lecturer is offered: copy and reverse must reach 100 % exact outputs on held-out sequences within
# DEFAULT_STEPS (<= 30 s on one core), sort at least 90 %. Measured by `python benchmarks/bench_train.py toy`
# (results/toy.json): all three reach 100 %, sort included, so all three are offered.
OFFERED = ("copy", "reverse", "sort")
MIN_LEN, MAX_LEN = 3, 8  # sequence lengths drawn uniformly; up to 10 needed ~20 % more steps for reverse
DEFAULT_STEPS = 900  # optimizer steps of a live run: the schedule decays to 0 here (bench_train.py toy times them)
BATCH = 64
EXAMPLE = "3 1 4 1 5 9 2 6"  # the fixed example whose cross-attention a live run reports


def toy_vocab() -> Vocab:
    """The 14-token vocabulary: <unk> <pad> <bos> <eos> and the digits 0-9 (source and target alike)."""
    return Vocab(list(SPECIALS) + SYMBOLS)


def toy_config() -> ModelConfig:
    """2 encoder + 2 decoder layers, d_model 64, 4 heads: small enough to learn in seconds on one core."""
    n = len(toy_vocab())
    return ModelConfig(n, n, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128,
                       dropout=0.0, attn_dropout=0.0, max_len=2 * MAX_SRC_TOKENS + 16)


class ToyTranslator(Translator):
    """A Translator whose tokens are single characters: "3 1 4" and "314" both read as 3, 1, 4."""

    # The Masks page batches an input with this, or with the input followed by it when the input is as long: a
    # sentence would be read character by character, every character an unknown token.
    padding_example = EXAMPLE

    def __init__(self, model: EncoderDecoder, task: str, metrics: dict | None = None):
        super().__init__(model, toy_vocab(), toy_vocab(), metrics, src_lang="en", tgt_lang="en")
        self.task = task

    def untrained_twin(self, seed: int = 0) -> ToyTranslator:
        """The same toy architecture with random weights, still reading digits."""
        twin = super().untrained_twin(seed)
        return ToyTranslator(twin.model, self.task, twin.metrics)

    def prepare(self, text: str, max_tokens: int = MAX_SRC_TOKENS) -> Source:
        """Every non-space character is a token; anything but a digit is unknown to the model."""
        text = clean_text(text)
        chars_cut = max(0, len(text) - MAX_CHARS)
        tokens = [c for c in text[:MAX_CHARS] if not c.isspace()]
        limit = min(max_tokens, self.cfg.max_len - 1)  # room for <eos>
        kept, dropped = tokens[:limit], tokens[limit:]
        ids = self.src_vocab.encode(kept) + [self.src_vocab.eos_idx]
        return Source(kept, ids, [t not in self.src_vocab for t in kept], dropped, chars_cut)


@dataclass
class ToyRun:
    """What train_toy hands back."""

    task: str
    translator: ToyTranslator
    steps: int  # optimizer steps done
    seconds: float  # wall time of the training loop (evaluations included)
    stopped: bool  # the callback asked to stop
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, mean training loss since the last entry)
    accuracy: float | None = None  # exact-match share on held-out sequences after the last step
    reached_at: int | None = None  # first step at which `target` accuracy was measured (when asked for)


def random_sequences(rng: random.Random, n: int) -> list[list[str]]:
    return [[rng.choice(SYMBOLS) for _ in range(rng.randint(MIN_LEN, MAX_LEN))] for _ in range(n)]


def held_out(task: str, n: int = 200, seed: int = 12345, exclude: set | None = None) -> list[list[str]]:
    """n sequences from a generator training never uses, none of them in `exclude` (the training ones)."""
    rng, out = random.Random(f"held-out {task} {seed}"), []
    while len(out) < n:
        xs = random_sequences(rng, 1)[0]
        if not exclude or tuple(xs) not in exclude:
            out.append(xs)
    return out


def _pairs(task: str, seqs: list[list[str]], vocab: Vocab) -> list[tuple[list[int], list[int]]]:
    fn = TASKS[task]
    return [(vocab.encode(xs) + [vocab.eos_idx], vocab.encode(fn(xs))) for xs in seqs]


@torch.no_grad()
def exact_match(model: EncoderDecoder, task: str, seqs: list[list[str]]) -> float:
    """Share of sequences whose greedy output is exactly the task's answer (one batch, eval mode)."""
    vocab = toy_vocab()
    was_training = model.training
    model.eval()
    try:
        pairs = _pairs(task, seqs, vocab)
        src, _, _ = collate(pairs, list(range(len(pairs))), model.cfg.pad_idx, vocab.bos_idx, vocab.eos_idx)
        decoded = search(model, src, vocab.bos_idx, vocab.eos_idx, [len(s) + 2 for s, _ in pairs])
        return sum(d.ids == tgt and d.finished for d, (_, tgt) in zip(decoded, pairs)) / max(len(pairs), 1)
    finally:
        model.train(was_training)


def run_cross(run: ToyRun) -> np.ndarray:
    """(L, h, t, s) cross-attention of the fixed example in a finished run's model (the page never holds the model)."""
    return example_cross(run.translator.model, run.task)


@torch.no_grad()
def example_cross(model: EncoderDecoder, task: str, example: str = EXAMPLE) -> np.ndarray:
    """(L, h, t, s) cross-attention of the fixed example, teacher-forced on its right answer (axes never change)."""
    vocab = toy_vocab()
    xs = [c for c in example if not c.isspace()]
    src = torch.tensor([vocab.encode(xs) + [vocab.eos_idx]])
    tgt = torch.tensor([[vocab.bos_idx] + vocab.encode(TASKS[task](xs))])
    was_training = model.training
    model.eval()
    try:
        _, cache = model.run_with_cache(src, tgt, patterns)
    finally:
        model.train(was_training)
    return probs(cache, "cross", model.cfg.n_decoder_layers)


def train_toy(task: str, *, steps: int = DEFAULT_STEPS, seed: int = 0,
              callback: Callable[[int, float, np.ndarray], bool | None] | None = None, every: int = 25,
              threads: int = 1, target: float | None = None, eval_every: int = 50, lr: float = 5e-3,
              warmup: int = 50) -> ToyRun:
    """Train a fresh 2-layer model on `task` for `steps` optimizer steps of BATCH random sequences.

    Every `every` steps (and at the end) callback(step, mean loss since the last call, example_cross) is
    called; returning False stops the run. With `target`, held-out accuracy is measured every
    `eval_every` steps and the run stops once it is reached. torch.set_num_threads is process-wide:
    it is set for the run and restored after.
    """
    if task not in TASKS:
        raise ValueError(f"unknown toy task {task!r}: choose one of {', '.join(TASKS)}")
    old_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    rng_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)  # the initial weights; nothing later draws from torch's generator (no dropout)
        model = EncoderDecoder(toy_config())
    finally:
        torch.random.set_rng_state(rng_state)
    vocab, rng = toy_vocab(), random.Random(f"train {task} {seed}")
    try:  # the fused kernel: ~30 % less time per step than the per-tensor loop for this many small tensors
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, fused=True)
    except (RuntimeError, TypeError):  # a torch without the fused CPU Adam
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    seen: set[tuple[str, ...]] = set()
    test = None
    run = ToyRun(task, ToyTranslator(model, task), 0, 0.0, False)
    model.train()
    t0, loss_sum, loss_n = time.perf_counter(), 0.0, 0
    try:
        for step in range(1, steps + 1):
            seqs = random_sequences(rng, BATCH)
            seen.update(map(tuple, seqs))
            pairs = _pairs(task, seqs, vocab)
            src, tgt_in, tgt_out = collate(pairs, list(range(BATCH)), model.cfg.pad_idx, vocab.bos_idx, vocab.eos_idx)
            for g in opt.param_groups:  # warm-up, then linear decay to 0 at `steps`: the last errors go at low lr
                g["lr"] = lr * min(step / warmup, (steps - step + 1) / max(steps - warmup, 1), 1.0)
            log_probs = model(src, tgt_in)  # (b, t, V)
            loss = F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]), tgt_out.reshape(-1),
                              ignore_index=model.cfg.pad_idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
            run.steps = step
            loss_sum, loss_n = loss_sum + loss.item(), loss_n + 1
            if step % every == 0 or step == steps:
                run.losses.append((step, loss_sum / loss_n))
                loss_sum, loss_n = 0.0, 0
                if callback is not None and callback(step, run.losses[-1][1], example_cross(model, task)) is False:
                    run.stopped = True
                    break
            if target is not None and step % eval_every == 0:
                test = test or held_out(task, exclude=seen)
                if exact_match(model, task, test) >= target:
                    run.reached_at = step
                    break
    finally:
        run.seconds = time.perf_counter() - t0
        torch.set_num_threads(old_threads)
    model.eval()
    run.accuracy = exact_match(model, task, held_out(task, exclude=seen))
    return run
