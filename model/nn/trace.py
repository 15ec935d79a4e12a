"""What forward hands back when asked for a trace: plain data, never module state.

Shape letters: see model/__init__.py.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from model.records import SentenceTrace


def _np(t: torch.Tensor | None, index: int) -> np.ndarray | None:
    if t is None:
        return None
    t = t[index] if t.shape[0] > 1 else t[0]
    t = t.detach().cpu()
    return t.numpy() if t.dtype == torch.bool else t.float().numpy()


@dataclass
class AttentionTrace:
    """One attention sub-layer's internals, per head."""

    q: torch.Tensor  # (b, h, i, d_k) queries after the head's projection
    k: torch.Tensor  # (b, h, j, d_k)
    v: torch.Tensor  # (b, h, j, d_k)
    scores: torch.Tensor  # (b, h, i, j) QKᵀ/√d_k, before the mask
    mask: torch.Tensor  # (b, 1, i, j) bool, True = may attend; all True when no mask was used
    probs: torch.Tensor  # (b, h, i, j) softmax of the masked scores (before dropout)
    out: torch.Tensor  # (b, h, i, d_k) probs @ V, the head's output before the output projection

    def numpy(self, index: int = 0) -> dict[str, np.ndarray]:
        """One example's arrays; the mask is broadcast to (i, j)."""
        d = {f.name: _np(getattr(self, f.name), index) for f in fields(self)}
        d["mask"] = d["mask"][0]  # (i, j)
        return d


@dataclass
class EmbeddingTrace:
    """The stages of the input embedding."""

    token: torch.Tensor  # (b, n, d) rows of the embedding matrix
    scaled: torch.Tensor  # (b, n, d) token * √d_model
    positional: torch.Tensor  # (n, d) sinusoidal encoding added
    total: torch.Tensor  # (b, n, d) scaled + positional: what enters layer 1 (before dropout)

    def numpy(self, index: int = 0) -> dict[str, np.ndarray]:
        return {
            "token": _np(self.token, index),
            "scaled": _np(self.scaled, index),
            "positional": self.positional.detach().cpu().float().numpy(),
            "total": _np(self.total, index),
        }


@dataclass
class Trace:
    """Everything one forward pass computed on the way, per layer."""

    src_embed: EmbeddingTrace | None = None
    tgt_embed: EmbeddingTrace | None = None
    enc_self: list[AttentionTrace] | None = None  # one per encoder layer
    dec_self: list[AttentionTrace] | None = None  # one per decoder layer
    cross: list[AttentionTrace] | None = None  # one per decoder layer
    log_probs: torch.Tensor | None = None  # (b, i, V_tgt) the generator's output

    def attention(self, kind: str) -> list[AttentionTrace]:
        """The per-layer traces of 'enc_self', 'dec_self' or 'cross'."""
        if kind not in ("enc_self", "dec_self", "cross"):
            raise ValueError(f"unknown attention kind {kind!r}")
        return getattr(self, kind) or []

    def probs(self, kind: str, index: int = 0) -> np.ndarray:
        """(L, h, i, j) attention probabilities of one example, all layers stacked."""
        return np.stack([_np(a.probs, index) for a in self.attention(kind)])


def to_sentence_trace(trace: Trace, src_tokens: list[str], tgt_tokens: list[str], index: int = 0) -> SentenceTrace:
    """Convert one example of a torch Trace, checking that the token lists fit its axes."""
    s, t = trace.enc_self[0].probs.shape[-1], trace.dec_self[0].probs.shape[-1]
    if (len(src_tokens), len(tgt_tokens)) != (s, t):
        raise ValueError(f"token lists ({len(src_tokens)}, {len(tgt_tokens)}) do not fit the trace ({s}, {t})")
    return SentenceTrace(
        src_tokens=list(src_tokens),
        tgt_tokens=list(tgt_tokens),
        src_embed=trace.src_embed.numpy(index),
        tgt_embed=trace.tgt_embed.numpy(index),
        attn={kind: [a.numpy(index) for a in trace.attention(kind)] for kind in ("enc_self", "dec_self", "cross")},
        log_probs=_np(trace.log_probs, index),
    )
