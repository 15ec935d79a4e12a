"""Embeddings, positional encoding, feed-forward and the encoder/decoder layers.

Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.attention import MultiHeadAttention
from model.nn.trace import AttentionTrace, EmbeddingTrace


def sinusoidal_encoding(n_positions: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """The (n, d) table of sines and cosines at wavelengths 10000^(2i/d), position 0 first.

    "interleaved" (the paper): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...).
    "sin_then_cos" (Marian): the same sines in columns 0..⌈d/2⌉-1, then the cosines.
    """
    if layout == "sin_then_cos":
        # Computed in float64 as Marian's table is (transformers builds it with NumPy), then rounded once.
        pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (n, 1)
        i = torch.arange(d_model, dtype=torch.float64)
        angle = pos / torch.pow(10000.0, 2 * torch.div(i, 2, rounding_mode="floor") / d_model)  # (n, d)
        return torch.cat([torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])], dim=1).float()
    if layout != "interleaved":
        raise ValueError(f"unknown positional-encoding layout {layout!r}")
    pos = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # (n, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d_model // 2]
    return pe


class Embeddings(nn.Module):
    """Token embedding × √d_model (or × 1 without `scale`) + sinusoidal positional encoding, then dropout."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float, pad_idx: int,
                 scale: bool = True, pe_layout: str = "interleaved", init: bool = True):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model, padding_idx=pad_idx)
        if init:  # without: the weights are loaded next (EncoderDecoder's `init`)
            nn.init.normal_(self.lut.weight, mean=0.0, std=d_model**-0.5)
            with torch.no_grad():
                self.lut.weight[pad_idx].zero_()
        self.scale = math.sqrt(d_model) if scale else 1.0
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, pe_layout), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, return_trace: bool = False,
                offset: int = 0) -> tuple[torch.Tensor, EmbeddingTrace | None]:
        """`offset` is the position of ids[:, 0] (incremental decoding feeds one position at a time)."""
        n = ids.shape[1]
        if offset + n > self.pe.shape[0]:
            raise ValueError(f"sequence of {offset + n} tokens is longer than max_len {self.pe.shape[0]}")
        token = self.lut(ids)  # (b, n, d)
        scaled = token * self.scale  # × 1.0 when unscaled: the trace keeps the same stages
        pe = self.pe[offset : offset + n]
        total = scaled + pe
        record = EmbeddingTrace(token, scaled, pe, total) if return_trace else None
        return (self.dropout(total) if self.training else total), record  # skip no-op calls: decoding is per token


ACTIVATION = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu}  # gelu: exact (erf), as Marian's


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, applied at every position alike; act is ReLU in the paper."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu"):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = ACTIVATION[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.w_1(x))
        return self.w_2(self.dropout(h) if self.training else h)


class SublayerConnection(nn.Module):
    """Residual + LayerNorm around a sub-layer: pre-norm x + f(LN(x)) or post-norm LN(x + f(x))."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer) -> tuple[torch.Tensor, object]:
        if self.norm_first:
            y, extra = sublayer(self.norm(x))
            return x + (self.dropout(y) if self.training else y), extra
        y, extra = sublayer(x)
        return self.norm(x + (self.dropout(y) if self.training else y)), extra


class EncoderLayer(nn.Module):
    """Self-attention over the source, then feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attn_dropout: float, norm_first: bool,
                 activation: str = "relu"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub = nn.ModuleList([SublayerConnection(d_model, dropout, norm_first) for _ in range(2)])

    def forward(self, x, src_mask, head_mask=None, return_trace=False,
                head_patch=None) -> tuple[torch.Tensor, AttentionTrace | None]:
        """`head_patch`: (where, value) for the self-attention's head outputs (MultiHeadAttention.forward)."""
        x, rec = self.sub[0](x, lambda y: self.self_attn(y, y, y, src_mask, head_mask, return_trace,
                                                         head_patch=head_patch))
        x, _ = self.sub[1](x, lambda y: (self.ff(y), None))
        return x, rec


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder memory, then feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attn_dropout: float, norm_first: bool,
                 activation: str = "relu"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub = nn.ModuleList([SublayerConnection(d_model, dropout, norm_first) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask, self_head_mask=None, cross_head_mask=None, return_trace=False,
                cache: dict | None = None, self_head_patch=None, cross_head_patch=None):
        """`cache` ({"self": {}, "cross": {}}, owned by the caller) turns on incremental decoding.

        `self_head_patch`, `cross_head_patch`: (where, value) for the head outputs (MultiHeadAttention.forward).
        """
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache["self"], cache["cross"]
        x, self_rec = self.sub[0](x, lambda y: self.self_attn(y, y, y, tgt_mask, self_head_mask, return_trace,
                                                              self_cache, head_patch=self_head_patch))
        x, cross_rec = self.sub[1](
            x, lambda y: self.cross_attn(y, memory, memory, src_mask, cross_head_mask, return_trace, cross_cache,
                                         static_kv=True, head_patch=cross_head_patch)
        )
        x, _ = self.sub[2](x, lambda y: (self.ff(y), None))
        return x, self_rec, cross_rec
