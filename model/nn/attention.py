"""Multi-head attention, written out so that every step has a named hook point.

Shape letters: see model/__init__.py. Points (model/nn/hooks.py, inside `attn.` or `cross_attn.`): hook_q, hook_k,
hook_v and hook_z are (b, pos, h, d_head); hook_scaled_scores (QKᵀ/√d_head before the mask, plus the position
bias where the model has one: T5, which also leaves the scores unscaled), hook_attn_scores (after the mask: -inf
where a key is hidden) and hook_pattern (the softmax) are (b, h, query, key).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.hooks import EXPLICIT, Hooks


class MultiHeadAttention(nn.Module):
    """softmax(QKᵀ/√d_k + B) V for h heads in parallel, then an output projection; B is a position bias (T5's
    relative positions) or nothing, and T5 leaves out the 1/√d_k (`scale=False`)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, scale: bool = True,
                 d_head: int = 0):
        """`d_head` 0: d_model / n_heads, as the paper; T5's d_kv may be another width (h · d_head ≠ d_model)."""
        super().__init__()
        assert d_head or d_model % n_heads == 0
        self.h, self.d_k = n_heads, d_head or d_model // n_heads
        inner = n_heads * self.d_k
        self.w_q = nn.Linear(d_model, inner, bias=bias)
        self.w_k = nn.Linear(d_model, inner, bias=bias)
        self.w_v = nn.Linear(d_model, inner, bias=bias)
        self.w_o = nn.Linear(inner, d_model, bias=bias)
        self.dropout = dropout
        self.scaled = scale

    # TransformerLens's weights, views of the linear layers' own (nn.Linear keeps (out, in)): W_Q, W_K, W_V
    # (h, d, d_head) and W_O (h, d_head, d) with x @ W_Q[h] + b_Q[h] the head's query; a bias the model lacks is 0.
    @property
    def W_Q(self) -> torch.Tensor:
        return self._in(self.w_q)

    @property
    def W_K(self) -> torch.Tensor:
        return self._in(self.w_k)

    @property
    def W_V(self) -> torch.Tensor:
        return self._in(self.w_v)

    @property
    def W_O(self) -> torch.Tensor:
        d = self.w_o.weight.shape[0]
        return self.w_o.weight.view(d, self.h, self.d_k).permute(1, 2, 0)

    @property
    def b_Q(self) -> torch.Tensor:
        return self._bias(self.w_q, (self.h, self.d_k))

    @property
    def b_K(self) -> torch.Tensor:
        return self._bias(self.w_k, (self.h, self.d_k))

    @property
    def b_V(self) -> torch.Tensor:
        return self._bias(self.w_v, (self.h, self.d_k))

    @property
    def b_O(self) -> torch.Tensor:
        return self._bias(self.w_o, (self.w_o.weight.shape[0],))

    def _in(self, linear: nn.Linear) -> torch.Tensor:
        return linear.weight.view(self.h, self.d_k, linear.weight.shape[1]).transpose(1, 2)

    @staticmethod
    def _bias(linear: nn.Linear, shape: tuple) -> torch.Tensor:
        return linear.bias.view(shape) if linear.bias is not None else linear.weight.new_zeros(shape)

    def hook_points(self) -> list[str]:
        """Its points in the order forward reaches them (the explicit path's: the fused kernel skips EXPLICIT)."""
        return ["hook_q", "hook_k", "hook_v", *EXPLICIT, "hook_z"]

    def _heads(self, x: torch.Tensor, hooks: Hooks | None, name: str) -> torch.Tensor:
        """(b, n, d) projection -> (b, h, n, d_k), through its hook point in (b, n, h, d_k)."""
        b, n, _ = x.shape
        x = x.view(b, n, self.h, self.d_k)
        if hooks is not None:
            x = hooks(name, x)
        return x.transpose(1, 2)

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
        q = self._heads(self.w_q(query), hooks, "hook_q")
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = self._heads(self.w_k(key), hooks, "hook_k"), self._heads(self.w_v(value), hooks, "hook_v")
            if cache is not None:
                if "k" in cache:  # self-attention: the new positions join the cached ones
                    k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        p_drop = self.dropout if self.training else 0.0
        if hooks is not None and hooks.wants(*EXPLICIT):
            scores = q @ k.transpose(-2, -1)  # (b, h, i, j)
            scores = scores / math.sqrt(self.d_k) if self.scaled else scores
            if pos_bias is not None:
                scores = scores + pos_bias
            scores = hooks("hook_scaled_scores", scores)
            masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
            masked = hooks("hook_attn_scores", masked)
            probs = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # a fully masked row gives 0, not NaN
            probs = hooks("hook_pattern", probs)
            heads = F.dropout(probs, p_drop, self.training) @ v  # (b, h, i, d_k)
        else:
            # Fused kernel: same maths, no probabilities kept (tests check both paths agree).
            if pos_bias is not None:  # one additive mask: the bias, and -inf where a key is hidden
                mask = pos_bias if mask is None else pos_bias.masked_fill(~mask, float("-inf"))
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop,
                                                   scale=None if self.scaled else 1.0)
        z = heads.transpose(1, 2)  # (b, i, h, d_k) each head's output before W_O
        if hooks is not None:
            z = hooks("hook_z", z)
        b, i = z.shape[:2]
        return self.w_o(z.reshape(b, i, self.h * self.d_k))  # (b, i, d)
