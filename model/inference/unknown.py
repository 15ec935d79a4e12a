"""Copying source words into a word model's output <unk>s, guided by cross-attention.

A word vocabulary cannot hold every name or number; a source word the model could not read often belongs in
the translation unchanged, and the step that produced <unk> usually attended to it. Translator._finish applies
this to word models only (a SentencePiece model spells every word out of pieces).
"""
from __future__ import annotations

import numpy as np

from model.text.vocab import UNK


def replace_unknown(tokens: list[str], cross: np.ndarray, src_tokens: list[str], copyable: list[bool]) -> list[str]:
    """Copy into each output <unk> a source word the model could not read, each word at most once.

    `copyable[k]` says whether source token k may be copied (Source.copyable: unknown to the source
    vocabulary, or a number). Output <unk>s are filled left to right; each takes, among the copyable
    positions not used yet, the one its step attended to most (cross-attention averaged over layers
    and heads). When none is left the <unk> stays, visibly. `cross` is (t, L, h, s) with
    s >= len(src_tokens) (the source <eos> and any padding come after the words and are never copied).
    """
    out = list(tokens)
    free = [k for k, ok in enumerate(copyable) if ok]
    for i, tok in enumerate(tokens):
        if tok != UNK or not free or i >= cross.shape[0]:
            continue
        weights = cross[i].mean(axis=(0, 1))[: len(src_tokens)]  # (s,) without <eos>
        best = max(free, key=lambda k: weights[k])
        free.remove(best)
        out[i] = src_tokens[best]
    return out
