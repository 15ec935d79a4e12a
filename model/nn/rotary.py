"""What Gemma 2's attention adds (T5Gemma): rotary positions, sliding windows and soft-capping, computed as Hugging
Face's modeling_t5gemma.py computes them, operation for operation, so that an imported model runs exactly.

Shape letters: see model/__init__.py. Rotary positions add no vector to the embeddings: each head's queries and keys
are turned, pair of dimensions by pair, by an angle proportional to their position; pair i joins dimension i with
i + d_head/2 (rotate_half) and turns by p·θ_i at position p, θ_i = base^(−2i/d_head). A query's score for a key then
depends on their positions only through the distance. Nothing is stored: the angles are computed for the positions of
each call, on the device of its queries (a network built on the meta device holds no table to fill).
"""
from __future__ import annotations

import torch


def rotary_cos_sin(n: int, offset: int, d_head: int, base: float, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(n, d_head) cos and sin of the angles of positions offset..offset+n-1, in `like`'s dtype (float32 angles, as
    T5GemmaRotaryEmbedding computes them)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.float, device=like.device) / d_head))
    positions = torch.arange(offset, offset + n, device=like.device).float()
    freqs = positions[:, None] * inv_freq  # (n, d_head / 2)
    angle = torch.cat((freqs, freqs), dim=-1)  # (n, d_head): pair i's angle at i and i + d_head/2
    return angle.cos().to(like.dtype), angle.sin().to(like.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): (x1, x2) -> (−x2, x1) for the halves x1, x2."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """(b, h, n, d) queries or keys turned by their positions' angles (cos, sin: (n, d))."""
    return (x * cos) + (rotate_half(x) * sin)


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap·tanh(x / cap): scores (or logits) squashed smoothly into (−cap, cap); cap 0 leaves them."""
    return torch.tanh(x / cap) * cap if cap else x


def window_mask(n_queries: int, n_keys: int, offset: int, window: int, causal: bool, device=None) -> torch.Tensor:
    """(1, 1, i, j) bool, True where query offset+q may see key k: |q − k| ≤ window in an encoder (bidirectional),
    q − window < k in a decoder (its causal mask hides the keys after the query), as transformers' masking_utils."""
    query = torch.arange(offset, offset + n_queries, device=device).unsqueeze(1)
    key = torch.arange(n_keys, device=device).unsqueeze(0)
    near = (query - key) < window if causal else (query - key).abs() <= window
    return near.view(1, 1, n_queries, n_keys)


def layer_masks(mask: torch.Tensor | None, windows: tuple[int, ...], n_queries: int, n_keys: int, offset: int,
                causal: bool, device=None) -> list[torch.Tensor | None]:
    """Each layer's self-attention mask: `mask` for a full layer (window 0), `mask` and its window for a local one
    (one tensor per window size, shared by the layers that have it)."""
    made: dict[int, torch.Tensor] = {}
    for w in set(windows) - {0}:
        near = window_mask(n_queries, n_keys, offset, w, causal, device)
        made[w] = near if mask is None else mask & near
    return [made[w] if w else mask for w in windows]
