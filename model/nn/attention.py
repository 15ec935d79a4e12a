"""Multi-head attention, written out so that every step has a named hook point.

Shape letters: see model/__init__.py. Points (model/nn/hooks.py, inside `attn.` or `cross_attn.`): hook_q and hook_z
are (b, pos, h, d_head), hook_k and hook_v (b, pos, h_kv, d_head) with h_kv = h but under grouped-query attention
(T5Gemma), as TransformerLens's; rotary models (T5Gemma's self-attention) add hook_rot_q and hook_rot_k, the same
after the rotation. hook_scaled_scores (QKᵀ/√d_head before the mask, plus the position bias where the model has one:
T5, which also leaves the scores unscaled), hook_softcapped_scores (cap·tanh(scores/cap), only in a model that caps
them: Gemma 2), hook_attn_scores (after the mask: -inf where a key is hidden) and hook_pattern (the softmax) are
(b, h, query, key).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.hooks import EXPLICIT, Hooks
from model.nn.rotary import rotary_cos_sin, rotate, softcap


class MultiHeadAttention(nn.Module):
    """softmax(QKᵀ/√d_k + B) V for h heads in parallel, then an output projection; B is a position bias (T5's
    relative positions) or nothing, and T5 leaves out the 1/√d_k (`scale=False`). Gemma 2 (T5Gemma) adds grouped
    key/value heads (`n_kv_heads`), rotary positions (`rope_base`), soft-capped scores (`softcap`) and scores ×
    `scalar`^-0.5 in place of ÷ √d_k."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, scale: bool = True,
                 d_head: int = 0, n_kv_heads: int = 0, rope_base: float = 0.0, softcap: float = 0.0,
                 scalar: float = 0.0):
        """`d_head` 0: d_model / n_heads, as the paper; T5's d_kv may be another width (h · d_head ≠ d_model).
        `n_kv_heads` 0: n_heads; `rope_base` 0: no rotation (cross-attention never has one)."""
        super().__init__()
        assert d_head or d_model % n_heads == 0
        self.h, self.d_k = n_heads, d_head or d_model // n_heads
        self.h_kv = n_kv_heads or n_heads
        assert self.h % self.h_kv == 0
        inner = n_heads * self.d_k
        self.w_q = nn.Linear(d_model, inner, bias=bias)
        self.w_k = nn.Linear(d_model, self.h_kv * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, self.h_kv * self.d_k, bias=bias)
        self.w_o = nn.Linear(inner, d_model, bias=bias)
        self.dropout = dropout
        self.scaled = scale
        self.rope_base, self.softcap = rope_base, softcap
        self.scaling = scalar**-0.5 if scalar else None  # Gemma 2's query_pre_attn_scalar, multiplied as HF does

    # TransformerLens's weights, views of the linear layers' own (nn.Linear keeps (out, in)): W_Q, W_K, W_V
    # (h, d, d_head) and W_O (h, d_head, d) with x @ W_Q[h] + b_Q[h] the head's query; a bias the model lacks is 0.
    # Under grouped-query attention W_K, W_V, b_K and b_V are each query head's (its key/value head's, repeated: a
    # copy), and _W_K, _W_V, _b_K, _b_V the h_kv heads' own, as TransformerLens's GroupedQueryAttention has them.
    @property
    def W_Q(self) -> torch.Tensor:
        return self._in(self.w_q, self.h)

    @property
    def W_K(self) -> torch.Tensor:
        return self._per_query(self._W_K)

    @property
    def W_V(self) -> torch.Tensor:
        return self._per_query(self._W_V)

    @property
    def _W_K(self) -> torch.Tensor:
        return self._in(self.w_k, self.h_kv)

    @property
    def _W_V(self) -> torch.Tensor:
        return self._in(self.w_v, self.h_kv)

    @property
    def W_O(self) -> torch.Tensor:
        d = self.w_o.weight.shape[0]
        return self.w_o.weight.view(d, self.h, self.d_k).permute(1, 2, 0)

    @property
    def b_Q(self) -> torch.Tensor:
        return self._bias(self.w_q, (self.h, self.d_k))

    @property
    def b_K(self) -> torch.Tensor:
        return self._per_query(self._b_K)

    @property
    def b_V(self) -> torch.Tensor:
        return self._per_query(self._b_V)

    @property
    def _b_K(self) -> torch.Tensor:
        return self._bias(self.w_k, (self.h_kv, self.d_k))

    @property
    def _b_V(self) -> torch.Tensor:
        return self._bias(self.w_v, (self.h_kv, self.d_k))

    @property
    def b_O(self) -> torch.Tensor:
        return self._bias(self.w_o, (self.w_o.weight.shape[0],))

    def _in(self, linear: nn.Linear, heads: int) -> torch.Tensor:
        return linear.weight.view(heads, self.d_k, linear.weight.shape[1]).transpose(1, 2)

    def _per_query(self, x: torch.Tensor) -> torch.Tensor:
        """(h_kv, ...) key/value heads' tensors -> (h, ...), each query head's; itself without grouping."""
        return x if self.h_kv == self.h else x.repeat_interleave(self.h // self.h_kv, dim=0)

    @staticmethod
    def _bias(linear: nn.Linear, shape: tuple) -> torch.Tensor:
        return linear.bias.view(shape) if linear.bias is not None else linear.weight.new_zeros(shape)

    def hook_points(self) -> list[str]:
        """Its points in the order forward reaches them (the explicit path's: the fused kernel skips EXPLICIT)."""
        return ["hook_q", "hook_k", "hook_v", *["hook_rot_q", "hook_rot_k"] * bool(self.rope_base), EXPLICIT[0],
                *["hook_softcapped_scores"] * bool(self.softcap), *EXPLICIT[1:], "hook_z"]

    def _heads(self, x: torch.Tensor, heads: int, hooks: Hooks | None, name: str) -> torch.Tensor:
        """(b, n, d) projection -> (b, heads, n, d_k), through its hook point in (b, n, heads, d_k)."""
        b, n, _ = x.shape
        x = x.view(b, n, heads, self.d_k)
        if hooks is not None:
            x = hooks(name, x)
        return x.transpose(1, 2)

    def _rotated(self, q: torch.Tensor, k: torch.Tensor, past: int, hooks: Hooks | None) -> tuple[torch.Tensor, ...]:
        """q (b, h, i, d_k) and the new keys k (b, h_kv, i, d_k), at positions past..past+i-1, rotated; through
        hook_rot_q and hook_rot_k in (b, i, heads, d_k)."""
        cos, sin = rotary_cos_sin(q.shape[2], past, self.d_k, self.rope_base, q)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if hooks is not None:
            q = hooks("hook_rot_q", q.transpose(1, 2)).transpose(1, 2)
            k = hooks("hook_rot_k", k.transpose(1, 2)).transpose(1, 2)
        return q, k

    def _keys_values(self, key, value, q, hooks, cache, static_kv) -> tuple[torch.Tensor, ...]:
        """(q, k, v): q rotated where the model rotates; k, v (b, h_kv, j, d_k), the cached ones included."""
        if cache is not None and static_kv and "k" in cache:
            return q, cache["k"], cache["v"]
        k = self._heads(self.w_k(key), self.h_kv, hooks, "hook_k")
        v = self._heads(self.w_v(value), self.h_kv, hooks, "hook_v")
        if self.rope_base:  # self-attention: the new positions follow the cached ones
            q, k = self._rotated(q, k, 0 if cache is None or "k" not in cache else cache["k"].shape[2], hooks)
        if cache is not None:
            if "k" in cache:  # self-attention: the new positions join the cached ones
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        return q, k, v

    def forward(
        self,
        query: torch.Tensor,  # (b, i, d)
        key: torch.Tensor,  # (b, j, d)
        value: torch.Tensor,  # (b, j, d)
        mask: torch.Tensor | None = None,  # bool (b, 1, i|1, j); True = may attend
        hooks: Hooks | None = None,  # this call's hook points (model/nn/hooks.py), inside this attention's name
        cache: dict | None = None,  # the caller's per-request key/value cache for incremental decoding
        static_kv: bool = False,  # keys/values do not grow (cross-attention): project them once
        pos_bias: torch.Tensor | None = None,  # (1, h, i, j) added to the scores (relative positions)
    ) -> torch.Tensor:
        """(b, i, d). With a `cache`, hook_k and hook_v see the new positions only (cross-attention: the first
        call's), as TransformerLens's with a key/value cache."""
        q = self._heads(self.w_q(query), self.h, hooks, "hook_q")
        q, k, v = self._keys_values(key, value, q, hooks, cache, static_kv)
        if self.h_kv != self.h:  # each key/value head serves h / h_kv neighbouring query heads
            k, v = (x.repeat_interleave(self.h // self.h_kv, dim=1) for x in (k, v))  # (b, h, j, d_k)
        p_drop = self.dropout if self.training else 0.0
        if self.softcap or (hooks is not None and hooks.wants(*EXPLICIT, "hook_softcapped_scores")):
            heads = self._explicit(q, k, v, mask, hooks, pos_bias, p_drop)
        else:
            # Fused kernel: same maths, no probabilities kept (tests check both paths agree); soft-capped scores
            # have no fused kernel.
            if pos_bias is not None:  # one additive mask: the bias, and -inf where a key is hidden
                mask = pos_bias if mask is None else pos_bias.masked_fill(~mask, float("-inf"))
            scale = self.scaling if self.scaling is not None else (None if self.scaled else 1.0)
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop, scale=scale)
        z = heads.transpose(1, 2)  # (b, i, h, d_k) each head's output before W_O
        if hooks is not None:
            z = hooks("hook_z", z)
        b, i = z.shape[:2]
        return self.w_o(z.reshape(b, i, self.h * self.d_k))  # (b, i, d)

    def _explicit(self, q, k, v, mask, hooks: Hooks | None, pos_bias, p_drop: float) -> torch.Tensor:
        """(b, h, i, d_k) the heads' outputs with every step written out, through its points."""
        point = (lambda name, x: x) if hooks is None else hooks
        scores = q @ k.transpose(-2, -1)  # (b, h, i, j)
        if self.scaling is not None:
            scores = scores * self.scaling
        elif self.scaled:
            scores = scores / math.sqrt(self.d_k)
        if pos_bias is not None:
            scores = scores + pos_bias
        scores = point("hook_scaled_scores", scores)
        if self.softcap:
            scores = point("hook_softcapped_scores", softcap(scores, self.softcap))
        masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
        masked = point("hook_attn_scores", masked)
        probs = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # a fully masked row gives 0, not NaN
        probs = point("hook_pattern", probs)
        return F.dropout(probs, p_drop, self.training) @ v  # (b, h, i, d_k)
