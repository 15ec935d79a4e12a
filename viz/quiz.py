"""Presenter mode's quiz questions, computed from a decoding step's numbers (plain lists and NumPy, no plotly).

Two questions about one decoding step, asked before the step is shown:

- "which word comes next?": the options are the step's candidates (its top-k, plus the chosen token if it was
  forced from outside them) in a shuffled order, the answer is the token the decoding took, with its probability;
- "which source word will this step look at?": the options are the source tokens in sentence order, the answer is
  the token with the largest cross-attention weight (the weights the page passes: one head, or a mean of heads).

The shuffle depends only on a seed and the step (a hash, not a random generator whose stream could change with
NumPy's version), so every projector and every student's copy of a link lists the options in the same order.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from viz.text import fmt_prob

# Two values are "nearly tied" when the smaller is at least this share of the larger: the room should hear that the
# model hardly preferred its answer (an untrained model's attention is nearly uniform, so this is common there).
TIE_RATIO = 0.9
MAX_NAMED = 3  # at most this many tied options are named in the reveal; the rest are counted


@dataclass(frozen=True)
class Question:
    """One quiz question: the options in display order and which of them the model chose."""

    kind: str  # "next" (which word comes next) or "looks" (which source token the step attends to most)
    options: list[str]  # labels in display order (a repeated token gets its position: "Hund (3)")
    values: list[float]  # each option's probability ("next") or attention weight ("looks"), display order
    answer: int  # index into options of the model's answer
    top: int  # index into options of the largest value (the answer unless the token was forced or chosen by beam)
    tied: list[int]  # indices of the options within TIE_RATIO of the largest value, largest first (one: no tie)

    @property
    def value(self) -> float:
        """The answer's probability or weight."""
        return self.values[self.answer]

    def tie_sentence(self) -> str:
        """"" when the largest value stands clear, else which options were nearly tied, with their values."""
        if len(self.tied) < 2:
            return ""
        named = [f"{self.options[i]} ({fmt_prob(self.values[i])})" for i in self.tied[:MAX_NAMED]]
        more = len(self.tied) - len(named)
        listed = ", ".join(named[:-1]) + " and " + named[-1] if more == 0 else ", ".join(named) + f" and {more} more"
        return f"Nearly tied (within {round((1 - TIE_RATIO) * 100)} %): {listed}."


def shuffled(n: int, seed: int, step: int) -> list[int]:
    """A permutation of range(n) fixed by (seed, step): position -> original index."""
    def key(i: int) -> bytes:
        return hashlib.blake2b(f"{seed}/{step}/{i}".encode(), digest_size=8).digest()
    return sorted(range(n), key=key)


def distinct(labels: Sequence[str]) -> list[str]:
    """The labels with each repeated one followed by its 1-based position, so two options never read alike."""
    counts = Counter(labels)
    return [f"{t} ({i + 1})" if counts[t] > 1 else t for i, t in enumerate(labels)]


def nearly_tied(values: Sequence[float], ratio: float = TIE_RATIO) -> list[int]:
    """Indices of the values at least ``ratio`` × the largest, largest first (always holds the largest)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return []
    order = np.argsort(-v, kind="stable")
    top = v[order[0]]
    return [int(i) for i in order if v[i] >= ratio * top]


def next_word(tokens: Sequence[str], probs: Sequence[float], chosen: int, seed: int, step: int) -> Question:
    """"Which word comes next?" from one step's candidates (best first) and the index of the one the decoding took.

    The options are ``tokens`` shuffled by (seed, step); the answer is ``tokens[chosen]`` with its probability."""
    p = np.asarray(probs, dtype=np.float64)
    if len(tokens) != len(p) or not len(p):
        raise ValueError(f"{len(tokens)} candidate tokens but {len(p)} probabilities; pass the step's top-k")
    if not 0 <= chosen < len(p):
        raise ValueError(f"chosen index {chosen} is outside 0..{len(p) - 1}")
    order = shuffled(len(p), seed, step)  # display position -> candidate index
    values = [float(p[i]) for i in order]
    return Question("next", distinct([tokens[i] for i in order]), values, order.index(chosen),
                    int(np.argmax(values)), nearly_tied(values))


def looks_at(weights: np.ndarray, source_tokens: Sequence[str]) -> Question:
    """"Which source token will this step look at?" from the step's (s,) cross-attention weights over the source.

    The options are the source tokens in sentence order; the answer is the one with the largest weight."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if len(w) != len(source_tokens) or not len(w):
        raise ValueError(f"{len(w)} weights but {len(source_tokens)} source tokens; pass one step's (s,) row of "
                         "cross-attention (one head, or the mean of the heads)")
    top = int(np.argmax(w))
    return Question("looks", distinct(list(source_tokens)), w.tolist(), top, top, nearly_tied(w))
