"""The app's trace of a sentence, read from an activation cache (model/nn/hooks.py): plain NumPy, never module state.

Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import numpy as np
import torch

from model.nn.hooks import ATTENTION
from model.records import KINDS, PER_HEAD_ROWS, TRACE_ATTENTION, TRACE_EMBED, SentenceTrace

# The attention points a SentenceTrace holds, by its field names (the masked scores become its mask), and the
# embedding's: records.py's one table, read the other way.
ATTENTION_POINTS = {field: point for point, field in TRACE_ATTENTION.items()} | {"masked": "hook_attn_scores"}
PER_POSITION = PER_HEAD_ROWS  # points in (b, pos, h, d_head): a trace holds them per head, (h, pos, d_head)
OPTIONAL = ("rot_q", "rot_k", "capped")  # only in the models that make them (rotary, soft-capped: T5Gemma)
EMBEDDING_POINTS = {field: point for point, field in TRACE_EMBED.items()}
EMBED_NORM = "embed_ln.hook_normalized"  # the embedding norm's output (mBART), kept to know the model has one
# Relative positions (T5): the bias each stack adds to its self-attention scores, (1, h, i, j).
POS_BIAS_POINTS = {"src": "hook_pos_bias", "tgt": "decoder.hook_pos_bias"}


def for_trace(name: str) -> bool:
    """names_filter of the points a SentenceTrace is made of."""
    last = name.rsplit(".", 1)[-1]
    return (last in ATTENTION_POINTS.values() or last in EMBEDDING_POINTS.values()
            or name in ("encoder.0.hook_resid_pre", "decoder.0.hook_resid_pre", EMBED_NORM, "decoder." + EMBED_NORM)
            or name in POS_BIAS_POINTS.values())


def patterns(name: str) -> bool:
    """names_filter of every attention pattern."""
    return name.endswith(".hook_pattern")


def _np(t: torch.Tensor, index: int) -> np.ndarray:
    t = (t[index] if t.shape[0] > 1 else t[0]).detach().cpu()
    return t.numpy() if t.dtype == torch.bool else t.float().numpy()


def attention_arrays(cache: dict, kind: str, layer: int, index: int = 0) -> dict[str, np.ndarray]:
    """One attention's arrays of batch row `index`: q, k, v, out (h, pos, d_head), k and v with the key/value heads
    (h_kv, pos, d_head); scores (QKᵀ, /√d_head where the model scales, + the position bias where it has one (T5),
    before the mask), probs (h, i, j); mask (i, j), True where a key may be attended (the masked scores are finite;
    a sliding window hides keys too). Where the model makes them (T5Gemma): rot_q, rot_k (after the rotation, as q
    and k) and capped (h, i, j), the soft-capped scores the mask and softmax read."""
    at = ATTENTION[kind].format(layer) + "."
    d = {}
    for field, point in ATTENTION_POINTS.items():
        if field in OPTIONAL and at + point not in cache:
            continue
        x = _np(cache[at + point], index)
        d[field] = x.transpose(1, 0, 2) if field in PER_POSITION else x
    d["mask"] = np.isfinite(d.pop("masked")[0])  # masks carry no head dimension
    return d


def embedding_arrays(cache: dict, side: str, index: int = 0) -> dict[str, np.ndarray]:
    """The stages of one side's embedding: token rows, × √d_model, positional (pos, d), "total" what enters layer 1
    (after the embedding norm where the model has one). A model without a position table (T5) has no "positional";
    one with an embedding norm (mBART) also has "sum", scaled + positional: the norm's input."""
    at = "" if side == "src" else "decoder."
    d = {field: _np(cache[at + point], index) for field, point in EMBEDDING_POINTS.items() if at + point in cache}
    if at + EMBED_NORM in cache:  # the points before the norm add up to its input, exactly as the model added them
        d["sum"] = d["scaled"] + d["positional"] if "positional" in d else d["scaled"].copy()
    d["total"] = _np(cache[("encoder" if side == "src" else "decoder") + ".0.hook_resid_pre"], index)
    return d


def pos_bias(cache: dict, side: str, index: int = 0) -> np.ndarray | None:
    """(h, i, j) the relative-position bias one stack added to its self-attention scores ("src": the encoder's,
    "tgt": the decoder's), or None for a model with a position table."""
    name = POS_BIAS_POINTS[side]
    return _np(cache[name], index) if name in cache else None


def probs(cache: dict, kind: str, n_layers: int, index: int = 0) -> np.ndarray:
    """(L, h, i, j) attention patterns of one kind, all layers stacked."""
    return np.stack([_np(cache[ATTENTION[kind].format(l) + ".hook_pattern"], index) for l in range(n_layers)])


def to_sentence_trace(cache: dict, log_probs: torch.Tensor, src_tokens: list[str], tgt_tokens: list[str],
                      index: int = 0) -> SentenceTrace:
    """Batch row `index` of a cache kept with names_filter=for_trace, checking that the token lists fit its axes."""
    layers = {k: sum(1 for l in range(len(cache)) if ATTENTION[k].format(l) + ".hook_pattern" in cache) for k in KINDS}
    s, t = cache["encoder.0.attn.hook_pattern"].shape[-1], cache["decoder.0.attn.hook_pattern"].shape[-1]
    if (len(src_tokens), len(tgt_tokens)) != (s, t):
        raise ValueError(f"token lists ({len(src_tokens)}, {len(tgt_tokens)}) do not fit the trace ({s}, {t})")
    return SentenceTrace(
        src_tokens=list(src_tokens),
        tgt_tokens=list(tgt_tokens),
        src_embed=embedding_arrays(cache, "src", index),
        tgt_embed=embedding_arrays(cache, "tgt", index),
        attn={kind: [attention_arrays(cache, kind, l, index) for l in range(layers[kind])] for kind in KINDS},
        log_probs=_np(log_probs, index),
        src_pos_bias=pos_bias(cache, "src", index),
        tgt_pos_bias=pos_bias(cache, "tgt", index),
    )
