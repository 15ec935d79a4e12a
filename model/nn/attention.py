"""Multi-head attention, written out so that every step can be returned.

Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.trace import AttentionTrace


class MultiHeadAttention(nn.Module):
    """softmax(QKᵀ/√d_k) V for h heads in parallel, then an output projection."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.h, self.d_k = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.h, self.d_k).transpose(1, 2)  # (b, h, n, d_k)

    def forward(
        self,
        query: torch.Tensor,  # (b, i, d)
        key: torch.Tensor,  # (b, j, d)
        value: torch.Tensor,  # (b, j, d)
        mask: torch.Tensor | None = None,  # bool (b, 1, i|1, j); True = may attend
        head_mask: torch.Tensor | None = None,  # (h,) or (b, h) per sentence: 1 keeps a head, 0 switches it off
        return_trace: bool = False,  # also return an AttentionTrace (the explicit path)
        cache: dict | None = None,  # the caller's per-request key/value cache for incremental decoding
        static_kv: bool = False,  # keys/values do not grow (cross-attention): project them once
        head_patch: tuple[torch.Tensor, torch.Tensor] | None = None,  # (where, value): activation patching
    ) -> tuple[torch.Tensor, AttentionTrace | None]:
        """`head_patch` = (where bool (b, h), value (1|b, h, i, d_k)) replaces the outputs of the heads where
        `where` is True with `value` (another run's head outputs before W_O), after `head_mask`: torch.where, so
        a patched head outputs exactly the value given."""
        q = self._split(self.w_q(query))
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = self._split(self.w_k(key)), self._split(self.w_v(value))  # (b, h, j, d_k)
            if cache is not None:
                if "k" in cache:  # self-attention: the new positions join the cached ones
                    k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        p_drop = self.dropout if self.training else 0.0
        if return_trace:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (b, h, i, j)
            masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
            probs = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # a fully masked row gives 0, not NaN
            heads = F.dropout(probs, p_drop, self.training) @ v  # (b, h, i, d_k)
            b, _, i, j = scores.shape
            if mask is None:
                full_mask = torch.ones(b, 1, i, j, dtype=torch.bool, device=scores.device)
            else:
                full_mask = mask.expand(b, 1, i, j)  # masks carry no head dimension
            record = AttentionTrace(q=q, k=k, v=v, scores=scores, mask=full_mask, probs=probs, out=heads)
        else:
            # Fused kernel: same maths, no probabilities kept (tests check both paths agree).
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
            record = None
        if head_mask is not None:
            heads = heads * head_mask.view(-1, self.h, 1, 1).to(heads.dtype)  # (1|b, h, 1, 1)
        if head_patch is not None:
            where, value = head_patch
            heads = torch.where(where.view(-1, self.h, 1, 1), value.to(heads.dtype), heads)  # (b, h, i, d_k)
        b, _, i, _ = heads.shape
        out = self.w_o(heads.transpose(1, 2).reshape(b, i, self.h * self.d_k))  # (b, i, d)
        return out, record
