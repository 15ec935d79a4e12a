"""Word alignment's plain NumPy part: a pair's measures, the links read from a matrix, talp gold links and AER (Och &
Ney 2003). Pages use it directly; model/analysis/align.py runs the model to fill a Pair.

A target piece is linked to the source piece that receives the most (cross-attention weight, value norm or ALTI+
contribution); two words are aligned when any of their pieces are (the rule of awesome-align and SimAlign). The end
token and a language token belong to no word and are never linked. Which decoder row stands for a target piece is the
**reading**: the row that *predicts* it, or, shifted, the row whose *input* is the piece (Chen et al. 2020's
Shift-Att).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

METHODS = ("attention", "value-norm", "alti")
_LINK = re.compile(r"^(\d+)([-p])(\d+)$")


@dataclass
class Pair:
    """One pair's pieces, the word each piece belongs to, and its cross-attention measures (all decoder rows)."""

    src_words: list[str]
    tgt_words: list[str]
    src_word_of: list[int | None]  # per source position (the model's input): its word, None for the end token
    tgt_word_of: list[int]  # per target piece: its word
    offset: int  # decoder rows before the first target piece's predicting row (a forced language token)
    attention: np.ndarray  # (L, H, T, S)
    value_norm: np.ndarray  # (L, H, T, S)
    value_norm_layer: np.ndarray  # (L, T, S)
    alti: np.ndarray  # (L, T, S): the cross-attention block's contributions, its residual column left out


def matrix(pair: Pair, method: str, layer: int | None, head: int | None) -> np.ndarray:
    """(T, S) of ``method`` at 0-based ``layer`` and ``head`` (None: the mean of the layers, of the heads; the value
    norms of a layer's heads together are ‖Σ_h α f_h‖; ALTI+ is a layer's, whatever the head)."""
    if method == "attention":
        m = pair.attention if head is None else pair.attention[:, head: head + 1]
        m = m.mean(1)
    elif method == "value-norm":
        m = pair.value_norm_layer if head is None else pair.value_norm[:, head]
    elif method == "alti":
        m = pair.alti
    else:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}")
    return m.mean(0) if layer is None else m[layer]


def links(pair: Pair, m: np.ndarray, shift: bool = False) -> set[tuple[int, int]]:
    """0-based (source word, target word) links: each target piece to the source piece of the largest value in its
    row of ``m`` (T, S) (the predicting row, or with ``shift`` the row that reads the piece)."""
    words = [j for j, w in enumerate(pair.src_word_of) if w is not None]  # positions that belong to a word
    out = set()
    for k, tw in enumerate(pair.tgt_word_of):
        row = pair.offset + k + (1 if shift else 0)
        best = words[int(np.argmax(m[row, words]))]
        out.add((pair.src_word_of[best], tw))
    return out


def read_talp(line: str, n_src: int, n_tgt: int, where: str) -> tuple[set, set]:
    """(sure, possible ⊇ sure) 0-based links of a talp line (`i-j` sure, `ipj` possible, 1-based; German first);
    ValueError naming ``where`` for a malformed item or a word out of range."""
    sure, possible = set(), set()
    for item in line.split():
        m = _LINK.match(item)
        if not m:
            raise ValueError(f"{where}: {item!r} is not a link (i-j sure, ipj possible)")
        i, j = int(m[1]) - 1, int(m[3]) - 1
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            raise ValueError(f"{where}: {item!r} is outside the pair ({n_src} source, {n_tgt} target words)")
        possible.add((i, j))
        if m[2] == "-":
            sure.add((i, j))
    return sure, possible


def aer(predicted: list[set], sure: list[set], possible: list[set]) -> float:
    """The corpus's alignment error rate in percent: 1 − (|A∩S| + |A∩P|) / (|A| + |S|), summed over the pairs."""
    a = sum(len(p) for p in predicted)
    s = sum(len(x) for x in sure)
    hits = sum(len(p & x) + len(p & y) for p, x, y in zip(predicted, sure, possible))
    return 100.0 * (1.0 - hits / (a + s)) if a + s else 0.0


def pharaoh(found: set[tuple[int, int]]) -> str:
    """0-based `i-j` links, sorted (source word i, target word j)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(found))


def word_matrix(pair: Pair, m: np.ndarray, shift: bool = False) -> np.ndarray:
    """``m`` (T, S) at word level (target words, source words): each target word's rows (its pieces' predicting
    rows, or with ``shift`` the rows that read them) averaged, each source word's columns summed (the end token's
    and a language token's left out)."""
    rows = np.stack([m[pair.offset + k + (1 if shift else 0)] for k in range(len(pair.tgt_word_of))])  # (pieces, S)
    out = np.zeros((len(pair.tgt_words), len(pair.src_words)))
    counts = np.zeros(len(pair.tgt_words))
    for k, tw in enumerate(pair.tgt_word_of):
        for j, sw in enumerate(pair.src_word_of):
            if sw is not None:
                out[tw, sw] += rows[k, j]
        counts[tw] += 1
    return out / counts[:, None]


_PUNCT = ".,;:!?\"'()[]„“”‚‘’…"  # split off a word's ends, as the annotated pairs are tokenised (their README)


def words(text: str) -> list[str]:
    """A sentence's words as the annotated pairs have them: split on white space, then leading and trailing
    punctuation split off as words of their own (word-internal hyphens and apostrophes stay)."""
    out = []
    for chunk in text.split():
        lead = []
        while chunk and chunk[0] in _PUNCT:
            lead.append(chunk[0])
            chunk = chunk[1:]
        trail = []
        while chunk and chunk[-1] in _PUNCT:
            trail.insert(0, chunk[-1])
            chunk = chunk[:-1]
        out += lead + ([chunk] if chunk else []) + trail
    return out
