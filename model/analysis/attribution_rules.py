"""The attribution rules, pure NumPy: attention rollout and the encoder-decoder relevance rules.

Rollout is Abnar & Zuidema 2020; the relevance rules are those of Chefer, Gur & Wolf 2021 ("Generic
Attention-model Explainability for Interpreting Bi-Modal and Encoder-Decoder Transformers"), on head-aggregated
maps. model/analysis/attribution.py feeds them plain attention (rollout) or gradient-weighted attention
(relevance); the tests check each rule by hand. Shape letters: see model/__init__.py.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
