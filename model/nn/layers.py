"""Embeddings, positional encoding, feed-forward and the encoder/decoder layers, with their hook points.

Shape letters: see model/__init__.py. The hook points (model/nn/hooks.py) and their shapes: docs/hooks.md.
"""
from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.attention import MultiHeadAttention
from model.nn.hooks import Hooks, inside


def sinusoidal_encoding(n_positions: int, d_model: int, layout: str = "interleaved",
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The fixed table, always on the CPU with its values, also while a checkpoint's network is built under
    torch.device("meta"): there the same arithmetic would give a table without values, through torch's
    decompositions, whose import (torch._dynamo) was a large part of a load."""
    with torch.device("cpu"):
        return _sinusoidal(n_positions, d_model, layout, dtype)


def _sinusoidal(n_positions: int, d_model: int, layout: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (n, d) table of sines and cosines at wavelengths 10000^(2i/d), position 0 first, computed in `dtype`.
    float64 serves comparisons across machines: a float32 table's last bit (~6e-8) may differ between CPUs' vector
    code for sin/exp, a float64 one's only by ~1e-16.

    "interleaved" (the paper): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...).
    "sin_then_cos" (Marian): the same sines in columns 0..⌈d/2⌉-1, then the cosines.
    "fairseq" (M2M100, NLLB): sines then cosines at wavelengths 10000^(i/(d/2 - 1)), i < d/2 (a zero column
    last when d is odd); the rows are the table's own indices (M2M100 reads row pos + 2: `pos_offset`).
    """
    if layout == "fairseq":
        half = d_model // 2
        freq = torch.exp(torch.arange(half, dtype=torch.int64).to(dtype) * -(math.log(10000.0) / (half - 1)))
        angle = torch.arange(n_positions, dtype=torch.int64).to(dtype).unsqueeze(1) * freq.unsqueeze(0)  # (n, d/2)
        pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
        return torch.cat([pe, torch.zeros(n_positions, 1, dtype=dtype)], dim=1) if d_model % 2 else pe
    if layout == "sin_then_cos":
        # Computed in float64 as Marian's table is (transformers builds it with NumPy), then rounded once to dtype.
        pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (n, 1)
        i = torch.arange(d_model, dtype=torch.float64)
        angle = pos / torch.pow(10000.0, 2 * torch.div(i, 2, rounding_mode="floor") / d_model)  # (n, d)
        return torch.cat([torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])], dim=1).to(dtype)
    if layout != "interleaved":
        raise ValueError(f"unknown positional-encoding layout {layout!r}")
    pos = torch.arange(n_positions, dtype=dtype).unsqueeze(1)  # (n, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=dtype) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(n_positions, d_model, dtype=dtype)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d_model // 2]
    return pe


class GemmaRMSNorm(nn.Module):
    """Gemma's RMSNorm: x / √(mean(x²) + eps) × (1 + w), computed in float32 and cast back, as Hugging Face's
    T5GemmaRMSNorm (its weight starts at 0: a scale of 1)."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


def make_norm(d_model: int, kind: str = "layer", eps: float = 1e-5) -> nn.Module:
    """LayerNorm, RMSNorm (T5: x / √(mean(x²) + eps) × g, no mean subtracted, no bias) or Gemma's (× (1 + g))."""
    if kind == "gemma_rms":
        return GemmaRMSNorm(d_model, eps)
    return nn.RMSNorm(d_model, eps=eps) if kind == "rms" else nn.LayerNorm(d_model, eps=eps)


TABLES = ("sinusoidal", "learned")  # positions added to the embeddings as a table's vectors


class Embeddings(nn.Module):
    """Token embedding × √d_model (or × 1 without `scale`) + the positions, an optional norm (mBART), dropout.

    positions: "sinusoidal" (a fixed table in `pe_layout`), "learned" (a trained table, `pos` here), "relative"
    (none: the model adds a bias to the attention scores instead, RelativePositionBias) or "rotary" (none: the
    self-attention turns its queries and keys, model/nn/rotary.py). Position p reads row p + `pos_offset` of the
    table (M2M100 and mBART keep two rows before position 0).
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float, pad_idx: int,
                 scale: bool = True, pe_layout: str = "interleaved", init: bool = True, positions: str = "sinusoidal",
                 pos_offset: int = 0, norm: str | None = None, eps: float = 1e-5):
        super().__init__()
        # Without init a table of its own is given, so nn.Embedding skips its normal_(): on the meta device that call
        # alone imports torch._dynamo (a large part of a load).
        self.lut = nn.Embedding(vocab_size, d_model, padding_idx=pad_idx,
                                _weight=None if init else torch.empty(vocab_size, d_model))
        if init:  # without: the weights are loaded next (EncoderDecoder's `init`)
            nn.init.normal_(self.lut.weight, mean=0.0, std=d_model**-0.5)
            with torch.no_grad():
                self.lut.weight[pad_idx].zero_()
        self.scale = math.sqrt(d_model) if scale else 1.0
        # pe_layout is kept so that the table can be computed again (in another precision: tests/reference_outputs.py)
        self.max_len, self.offset, self.positions, self.pe_layout = max_len, pos_offset, positions, pe_layout
        if positions == "sinusoidal":
            self.register_buffer("pe", sinusoidal_encoding(max_len + pos_offset, d_model, pe_layout), persistent=False)
        elif positions == "learned":
            self.pos = nn.Embedding(max_len + pos_offset, d_model,
                                    _weight=None if init else torch.empty(max_len + pos_offset, d_model))
            if init:
                nn.init.normal_(self.pos.weight, mean=0.0, std=d_model**-0.5)
        self.norm = make_norm(d_model, norm, eps) if norm else None
        self.dropout = nn.Dropout(dropout)

    def hook_points(self) -> list[str]:
        """The points forward passes, in order, without a prefix: the model names the encoder's at its top and the
        decoder's inside `decoder.` (model/nn/hooks.py module_points)."""
        return ["hook_token_embed", "hook_embed", *["hook_pos_embed"] * (self.positions in TABLES),
                *["embed_ln.hook_normalized"] * (self.norm is not None)]

    def table(self) -> torch.Tensor | None:
        """(max_len, d) the position vectors of positions 0.., or None for relative and rotary positions."""
        if self.positions not in TABLES:
            return None
        full = self.pe if self.positions == "sinusoidal" else self.pos.weight
        return full[self.offset:]

    def forward(self, ids: torch.Tensor, hooks: Hooks | None = None, offset: int = 0) -> torch.Tensor:
        """(b, n) ids -> (b, n, d). `offset` is the position of ids[:, 0] (incremental decoding feeds one
        position at a time)."""
        b, n = ids.shape
        if offset + n > self.max_len:
            raise ValueError(f"sequence of {offset + n} tokens is longer than max_len {self.max_len}")
        token = self.lut(ids)  # (b, n, d)
        if hooks is not None:
            token = hooks("hook_token_embed", token)
        total = scaled = token * self.scale  # × 1.0 when unscaled: the points are the same
        if hooks is not None:
            total = scaled = hooks("hook_embed", scaled)
        table = self.table()
        if table is not None:
            pe = table[offset : offset + n]  # (n, d)
            if hooks is not None:
                pe = hooks("hook_pos_embed", pe.expand(b, n, pe.shape[-1]))
            total = scaled + pe
        if self.norm is not None:
            total = self.norm(total)
            if hooks is not None:
                total = hooks("embed_ln.hook_normalized", total)
        return self.dropout(total) if self.training else total  # skip no-op calls: decoding is per token


class RelativePositionBias(nn.Module):
    """T5's positions: a learned bias per head and bucket of the key's distance from the query, added to every
    layer's self-attention scores (computed once per stack). Distances up to n_buckets/2 (bidirectional: /4, each
    direction) have a bucket each; longer ones share buckets on a log scale up to `max_distance`. The decoder is
    causal: keys after the query all fall in bucket 0, which the mask hides anyway."""

    def __init__(self, n_buckets: int, max_distance: int, n_heads: int, bidirectional: bool):
        super().__init__()
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional
        self.bias = nn.Embedding(n_buckets, n_heads)

    def buckets(self, distance: torch.Tensor) -> torch.Tensor:
        """Bucket of each key - query distance (as transformers' T5Attention._relative_position_bucket)."""
        n, out = self.n_buckets, torch.zeros_like(distance)
        if self.bidirectional:
            n //= 2
            out = out + (distance > 0).long() * n
            distance = distance.abs()
        else:
            distance = -torch.clamp(distance, max=0)
        exact = n // 2
        large = exact + (torch.log(distance.float() / exact) / math.log(self.max_distance / exact)
                         * (n - exact)).long()
        large = torch.clamp(large, max=n - 1)
        return out + torch.where(distance < exact, distance, large)

    def forward(self, n_queries: int, n_keys: int, offset: int = 0) -> torch.Tensor:
        """(1, h, i, j): the bias of queries offset..offset+i-1 over keys 0..j-1."""
        query = torch.arange(offset, offset + n_queries, device=self.bias.weight.device).unsqueeze(1)
        key = torch.arange(n_keys, device=self.bias.weight.device).unsqueeze(0)
        return self.bias(self.buckets(key - query)).permute(2, 0, 1).unsqueeze(0)


ACTIVATION = {"relu": F.relu, "gelu": F.gelu, "gelu_new": partial(F.gelu, approximate="tanh"), "swish": F.silu,
              "silu": F.silu}  # gelu: exact (erf), as Marian's; gelu_new: the tanh form, as T5 v1.1's


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, applied at every position alike; act is ReLU in the paper.

    Gated (T5 v1.1): W2 (act(W_gate x) ⊙ W1 x); hook_pre is act's input, hook_pre_linear the other factor, as in
    TransformerLens's gated MLPs."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu", gated: bool = False,
                 bias: bool = True):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff, bias=bias), nn.Linear(d_ff, d_model, bias=bias)
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.dropout = nn.Dropout(dropout)
        self.act = ACTIVATION[activation]

    def hook_points(self) -> list[str]:
        return ["hook_pre", *["hook_pre_linear"] * (self.w_gate is not None), "hook_post"]

    def forward(self, x: torch.Tensor, hooks: Hooks | None = None) -> torch.Tensor:
        pre = (self.w_1 if self.w_gate is None else self.w_gate)(x)  # (b, n, d_ff)
        if hooks is not None:
            pre = hooks("hook_pre", pre)
        h = self.act(pre)
        if self.w_gate is not None:
            linear = self.w_1(x)
            if hooks is not None:
                linear = hooks("hook_pre_linear", linear)
            h = h * linear
        if hooks is not None:
            h = hooks("hook_post", h)
        return self.w_2(self.dropout(h) if self.training else h)


class SublayerConnection(nn.Module):
    """Residual + norm around a sub-layer: pre-norm x + f(N(x)) or post-norm N(x + f(x)); N is LayerNorm, RMSNorm or
    Gemma's. Gemma 2 normalises the sub-layer's output too: x + P(f(N(x))), P being the layer's post norm (f here
    ends with it: Layer._sub)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, norm: str = "layer", eps: float = 1e-5):
        super().__init__()
        self.norm = make_norm(d_model, norm, eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer, hooks: Hooks | None = None, out: str = "") -> torch.Tensor:
        """`out` names the point of the sub-layer's output f(·) before it joins the stream (Gemma 2: P(f(·)))."""
        y = sublayer(self.norm(x) if self.norm_first else x)
        if hooks is not None:
            y = hooks(out, y)
        y = self.dropout(y) if self.training else y
        return x + y if self.norm_first else self.norm(x + y)


def _point(hooks: Hooks | None, name: str, x: torch.Tensor) -> torch.Tensor:
    return x if hooks is None else hooks(name, x)


def block_parts(cfg) -> dict:
    """The keyword arguments a layer takes from the model's config (model/nn/config.py)."""
    return {"norm": cfg.norm, "eps": cfg.norm_eps, "gated": cfg.ff_gated, "bias": cfg.bias,
            "scale": cfg.scale_attention, "d_head": cfg.d_head, "n_kv_heads": cfg.n_kv_heads,
            "rope_base": cfg.rope_base if cfg.positions == "rotary" else 0.0, "softcap": cfg.attn_softcap,
            "scalar": cfg.query_pre_attn_scalar, "post_norm": cfg.sublayer_post_norm}


class Stack(nn.ModuleList):
    """The layers of the encoder or the decoder, a list as before (`model.decoder[l].cross_attn`, len, iteration),
    under the name TransformerLens gives the stack, so that a point's name is its module's path. `points` are the
    points a pass reaches in the stack's name before its first layer (the decoder's embedding: `decoder.hook_embed`,
    ...): other modules make them, the embeddings staying in src_embed/tgt_embed so that stored keys keep their
    names."""

    def __init__(self, layers=(), points: tuple[str, ...] = ()):
        super().__init__(layers)
        self.points = tuple(points)

    def hook_points(self) -> list[str]:
        return [*self.points, *map(str, range(len(self)))]


RESID = {"attn": "hook_resid_mid", "cross_attn": "hook_resid_mid_cross", "mlp": "hook_resid_post"}  # after each


class Layer(nn.Module):
    """What the encoder's and the decoder's layers share: their sub-layers' attention and norms, from the config's
    parts (block_parts). Gemma 2's norms after a sub-layer are `{sub-layer}_post_ln` (attn_post_ln, ...)."""

    SUBLAYERS: tuple[str, ...] = ()

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attn_dropout: float, norm_first: bool,
                 activation: str = "relu", norm: str = "layer", eps: float = 1e-5, gated: bool = False,
                 bias: bool = True, scale: bool = True, d_head: int = 0, n_kv_heads: int = 0,
                 rope_base: float = 0.0, softcap: float = 0.0, scalar: float = 0.0, post_norm: bool = False):
        super().__init__()
        shared = dict(dropout=attn_dropout, bias=bias, scale=scale, d_head=d_head, n_kv_heads=n_kv_heads,
                      softcap=softcap, scalar=scalar)
        self.attn = MultiHeadAttention(d_model, n_heads, rope_base=rope_base, **shared)
        if "cross_attn" in self.SUBLAYERS:  # cross-attention has no rotary positions
            self.cross_attn = MultiHeadAttention(d_model, n_heads, **shared)
        self.mlp = FeedForward(d_model, d_ff, dropout, activation, gated, bias)
        self.sub = nn.ModuleList([SublayerConnection(d_model, dropout, norm_first, norm, eps)
                                  for _ in self.SUBLAYERS])
        for name in self.SUBLAYERS if post_norm else ():
            setattr(self, f"{name}_post_ln", make_norm(d_model, norm, eps))
        self.post_norm = post_norm

    def hook_points(self) -> list[str]:
        """Its points in the order forward reaches them; a child's name stands for the child's points."""
        out = ["hook_resid_pre"]
        for name in self.SUBLAYERS:
            out += [name, *[f"{name}_post_ln.hook_normalized"] * self.post_norm, f"hook_{name}_out", RESID[name]]
        return out

    def _sub(self, n: int, x: torch.Tensor, f, hooks: Hooks | None) -> torch.Tensor:
        """Sub-layer n (named SUBLAYERS[n]) around f, f followed by its post norm where the model has one."""
        name = self.SUBLAYERS[n]
        post = getattr(self, f"{name}_post_ln", None)
        g = f if post is None else (lambda y: _point(hooks, f"{name}_post_ln.hook_normalized", post(f(y))))
        return self.sub[n](x, g, hooks, f"hook_{name}_out")


class EncoderLayer(Layer):
    """Self-attention over the source, then feed-forward."""

    SUBLAYERS = ("attn", "mlp")

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None, hooks: Hooks | None = None,
                pos_bias: torch.Tensor | None = None) -> torch.Tensor:
        """(b, s, d) -> (b, s, d); `hooks` seen from inside this block (`encoder.{l}.`); `pos_bias` (1, h, s, s)
        is added to the self-attention scores (relative positions)."""
        attn, mlp = inside(hooks, "attn"), inside(hooks, "mlp")
        x = _point(hooks, "hook_resid_pre", x)
        x = self._sub(0, x, lambda y: self.attn(y, y, y, src_mask, attn, pos_bias=pos_bias), hooks)
        x = _point(hooks, "hook_resid_mid", x)
        x = self._sub(1, x, lambda y: self.mlp(y, mlp), hooks)
        return _point(hooks, "hook_resid_post", x)


class DecoderLayer(Layer):
    """Masked self-attention, cross-attention to the encoder memory, then feed-forward."""

    SUBLAYERS = ("attn", "cross_attn", "mlp")

    def forward(self, x, memory, src_mask, tgt_mask, hooks: Hooks | None = None, cache: dict | None = None,
                pos_bias: torch.Tensor | None = None):
        """(b, t, d) -> (b, t, d); `hooks` seen from inside this block (`decoder.{l}.`). `cache`
        ({"self": {}, "cross": {}}, owned by the caller) turns on incremental decoding. `pos_bias` (1, h, t, t+past)
        is added to the self-attention scores (relative positions); cross-attention has none."""
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache["self"], cache["cross"]
        attn, cross, mlp = inside(hooks, "attn"), inside(hooks, "cross_attn"), inside(hooks, "mlp")
        x = _point(hooks, "hook_resid_pre", x)
        x = self._sub(0, x, lambda y: self.attn(y, y, y, tgt_mask, attn, self_cache, pos_bias=pos_bias), hooks)
        x = _point(hooks, "hook_resid_mid", x)
        x = self._sub(1, x, lambda y: self.cross_attn(y, memory, memory, src_mask, cross, cross_cache,
                                                      static_kv=True), hooks)
        x = _point(hooks, "hook_resid_mid_cross", x)
        x = self._sub(2, x, lambda y: self.mlp(y, mlp), hooks)
        return _point(hooks, "hook_resid_post", x)
