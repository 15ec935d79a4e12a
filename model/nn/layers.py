"""Embeddings, positional encoding, feed-forward and the encoder/decoder layers, with their hook points.

Shape letters: see model/__init__.py. The hook points (model/nn/hooks.py) and their shapes: docs/hooks.md.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.attention import MultiHeadAttention
from model.nn.hooks import Hooks, inside


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

    def forward(self, ids: torch.Tensor, hooks: Hooks | None = None, offset: int = 0) -> torch.Tensor:
        """(b, n) ids -> (b, n, d). `offset` is the position of ids[:, 0] (incremental decoding feeds one
        position at a time)."""
        b, n = ids.shape
        if offset + n > self.pe.shape[0]:
            raise ValueError(f"sequence of {offset + n} tokens is longer than max_len {self.pe.shape[0]}")
        token = self.lut(ids)  # (b, n, d)
        pe = self.pe[offset : offset + n]  # (n, d)
        if hooks is not None:
            token = hooks("hook_token_embed", token)
        scaled = token * self.scale  # × 1.0 when unscaled: the points are the same
        if hooks is not None:
            scaled = hooks("hook_embed", scaled)
            pe = hooks("hook_pos_embed", pe.expand(b, n, pe.shape[-1]))
        total = scaled + pe
        return self.dropout(total) if self.training else total  # skip no-op calls: decoding is per token


ACTIVATION = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu}  # gelu: exact (erf), as Marian's


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, applied at every position alike; act is ReLU in the paper."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu"):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = ACTIVATION[activation]

    def forward(self, x: torch.Tensor, hooks: Hooks | None = None) -> torch.Tensor:
        pre = self.w_1(x)  # (b, n, d_ff)
        if hooks is not None:
            pre = hooks("hook_pre", pre)
        h = self.act(pre)
        if hooks is not None:
            h = hooks("hook_post", h)
        return self.w_2(self.dropout(h) if self.training else h)


class SublayerConnection(nn.Module):
    """Residual + LayerNorm around a sub-layer: pre-norm x + f(LN(x)) or post-norm LN(x + f(x))."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer, hooks: Hooks | None = None, out: str = "") -> torch.Tensor:
        """`out` names the point of the sub-layer's output f(·) before it joins the stream."""
        y = sublayer(self.norm(x) if self.norm_first else x)
        if hooks is not None:
            y = hooks(out, y)
        y = self.dropout(y) if self.training else y
        return x + y if self.norm_first else self.norm(x + y)


def _point(hooks: Hooks | None, name: str, x: torch.Tensor) -> torch.Tensor:
    return x if hooks is None else hooks(name, x)


class EncoderLayer(nn.Module):
    """Self-attention over the source, then feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attn_dropout: float, norm_first: bool,
                 activation: str = "relu"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub = nn.ModuleList([SublayerConnection(d_model, dropout, norm_first) for _ in range(2)])

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None, hooks: Hooks | None = None) -> torch.Tensor:
        """(b, s, d) -> (b, s, d); `hooks` seen from inside this block (`encoder.{l}.`)."""
        attn, mlp = inside(hooks, "attn"), inside(hooks, "mlp")
        x = _point(hooks, "hook_resid_pre", x)
        x = self.sub[0](x, lambda y: self.self_attn(y, y, y, src_mask, attn), hooks, "hook_attn_out")
        x = _point(hooks, "hook_resid_mid", x)
        x = self.sub[1](x, lambda y: self.ff(y, mlp), hooks, "hook_mlp_out")
        return _point(hooks, "hook_resid_post", x)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder memory, then feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attn_dropout: float, norm_first: bool,
                 activation: str = "relu"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attn_dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub = nn.ModuleList([SublayerConnection(d_model, dropout, norm_first) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask, hooks: Hooks | None = None, cache: dict | None = None):
        """(b, t, d) -> (b, t, d); `hooks` seen from inside this block (`decoder.{l}.`). `cache`
        ({"self": {}, "cross": {}}, owned by the caller) turns on incremental decoding."""
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache["self"], cache["cross"]
        attn, cross, mlp = inside(hooks, "attn"), inside(hooks, "cross_attn"), inside(hooks, "mlp")
        x = _point(hooks, "hook_resid_pre", x)
        x = self.sub[0](x, lambda y: self.self_attn(y, y, y, tgt_mask, attn, self_cache), hooks, "hook_attn_out")
        x = _point(hooks, "hook_resid_mid", x)
        x = self.sub[1](x, lambda y: self.cross_attn(y, memory, memory, src_mask, cross, cross_cache, static_kv=True),
                        hooks, "hook_cross_attn_out")
        x = _point(hooks, "hook_resid_mid_cross", x)
        x = self.sub[2](x, lambda y: self.ff(y, mlp), hooks, "hook_mlp_out")
        return _point(hooks, "hook_resid_post", x)
