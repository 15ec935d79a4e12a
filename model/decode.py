"""Greedy decoding recorded step by step, decoding from a forced prefix, and beam search.

Shape letters: b batch, s source positions, t decoded positions, L layers, h heads, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .trace import Trace
from .transformer import EncoderDecoder, HeadMask, make_src_mask, make_tgt_mask, reorder_cache


@dataclass
class Step:
    """One greedy step: what the decoder saw, what it proposed and what it picked."""

    prefix: list[int]  # decoder input ids so far, starting with <bos>
    top_ids: list[int]  # the k most probable next tokens, best first
    top_probs: list[float]
    chosen: int
    chosen_prob: float
    forced: bool  # True when the token came from a given prefix, not from the argmax
    dec_self: np.ndarray  # (L, h, t) the last query's self-attention over the prefix
    cross: np.ndarray  # (L, h, s) the last query's attention over the source


@dataclass
class GreedyResult:
    ids: list[int]  # output ids without <bos> and <eos>
    finished: bool  # True when <eos> was produced, False when max_len stopped it
    steps: list[Step] = field(default_factory=list)  # empty unless recorded
    trace: Trace | None = None  # the encoder and the last step's full decoder trace, when recorded


def decode_step(model: EncoderDecoder, memory, src_mask, tokens: torch.Tensor, cache: dict,
                head_mask: HeadMask | None = None) -> torch.Tensor:
    """(b, 1) newest tokens -> (b, V) next-token log-probabilities; `cache` carries the earlier positions."""
    x = model.decode(memory, src_mask, tokens, None, head_mask, cache=cache)  # one query sees every cached key
    return model.generator(x[:, -1])


@torch.inference_mode()
def greedy_decode(
    model: EncoderDecoder,
    src: torch.Tensor,  # (1, s)
    bos: int,
    eos: int,
    max_len: int,
    prefix: list[int] | None = None,
    record: bool = False,
    top_k: int = 5,
    head_mask: HeadMask | None = None,
    use_src_padding_mask: bool = True,
) -> GreedyResult:
    """Pick the most probable token at each step until <eos> or max_len tokens.

    Decoding is incremental (a key/value cache, one new position per step). `prefix` forces the
    first tokens (a user chose another candidate at some step). With `record`, the encoder runs
    traced and one traced teacher-forced decoder pass over <bos> + output follows: row i of its
    matrices is exactly what step i computed (tests check this), so it gives every step's
    candidates and attention, and the full trace.
    """
    prefix = list(prefix or [])
    pad = model.cfg.pad_idx
    src_mask = make_src_mask(src, pad, use_src_padding_mask)
    trace = Trace() if record else None
    memory = model.encode(src, src_mask, head_mask, trace)  # (1, s, d); the encoder runs once, traced if asked
    cache = model.new_cache()
    ys = [bos]
    finished = False
    while len(ys) - 1 < max_len:
        token = torch.tensor([[ys[-1]]], device=src.device)
        x = model.decode(memory, src_mask, token, None, head_mask, cache=cache)  # one query sees every cached key
        nxt = prefix[len(ys) - 1] if len(ys) - 1 < len(prefix) else int(model.generator.proj(x[0, -1]).argmax())
        if nxt == eos:
            finished = True
            break
        ys.append(nxt)
    if not record:
        return GreedyResult(ids=ys[1:], finished=finished)
    tgt = torch.tensor([ys], dtype=torch.long, device=src.device)
    trace.log_probs = model.generator(model.decode(memory, src_mask, tgt, make_tgt_mask(tgt, pad), head_mask, trace))
    decisions = ys[1:] + ([eos] if finished else [])
    probs = trace.log_probs[0, : len(decisions)].exp()  # (n, V): row i is step i's distribution
    top_p, top_i = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    chosen_p = probs[torch.arange(len(decisions)), torch.tensor(decisions, dtype=torch.long)].tolist()
    dec_self = torch.stack([a.probs[0] for a in trace.dec_self]).float().numpy()  # (L, h, t, t)
    cross = torch.stack([a.probs[0] for a in trace.cross]).float().numpy()  # (L, h, t, s)
    steps = [
        Step(prefix=ys[: i + 1], top_ids=ti, top_probs=tp, chosen=chosen, chosen_prob=cp, forced=i < len(prefix),
             dec_self=dec_self[:, :, i, : i + 1], cross=cross[:, :, i])
        for i, (chosen, cp, ti, tp) in enumerate(zip(decisions, chosen_p, top_i.tolist(), top_p.tolist()))
    ]
    return GreedyResult(ids=ys[1:], finished=finished, steps=steps, trace=trace)


@torch.inference_mode()
def greedy_decode_batch(model: EncoderDecoder, src: torch.Tensor, bos: int, eos: int, max_len: int,
                        head_mask: HeadMask | None = None) -> list[list[int]]:
    """Untraced greedy decoding of a padded batch (b, s); returns ids without <bos>/<eos>."""
    pad = model.cfg.pad_idx
    src_mask = make_src_mask(src, pad)
    memory = model.encode(src, src_mask, head_mask)
    b = src.shape[0]
    cache = model.new_cache()
    ys = torch.full((b, 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        nxt = decode_step(model, memory, src_mask, ys[:, -1:], cache, head_mask).argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    out = []
    for row in ys[:, 1:].tolist():
        ids = []
        for i in row:
            if i in (eos, pad):
                break
            ids.append(i)
        out.append(ids)
    return out


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation ((5 + |Y|) / 6)^alpha; alpha 0 switches it off."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.inference_mode()
def beam_search(
    model: EncoderDecoder,
    src: torch.Tensor,  # (1, s)
    bos: int,
    eos: int,
    max_len: int,
    beam_size: int = 5,
    alpha: float = 0.6,
) -> list[int]:
    """The best hypothesis by length-normalised log-probability; ids without <bos>/<eos>."""
    pad = model.cfg.pad_idx
    src_mask = make_src_mask(src, pad)
    memory = model.encode(src, src_mask)  # (1, s, d)
    ys = torch.full((1, 1), bos, dtype=torch.long, device=src.device)  # (n, t) the live beams
    scores = torch.zeros(1, device=src.device)  # (n,) summed log-probs
    finished: list[tuple[float, list[int]]] = []
    cache = model.new_cache()
    for t in range(1, max_len + 1):
        n = ys.shape[0]
        log_probs = decode_step(model, memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1), ys[:, -1:], cache)  # (n, V)
        V = log_probs.shape[-1]
        cand = (scores[:, None] + log_probs).view(-1)  # (n * V,)
        top_s, top_i = cand.topk(min(2 * beam_size, cand.shape[0]))
        keep_rows, keep_tok, keep_s = [], [], []
        for s_, i_ in zip(top_s.tolist(), top_i.tolist()):
            row, tok = divmod(i_, V)
            if tok == eos:
                finished.append((s_ / length_penalty(t, alpha), ys[row, 1:].tolist()))
            else:
                keep_rows.append(row)
                keep_tok.append(tok)
                keep_s.append(s_)
            if len(keep_rows) == beam_size:
                break
        best_done = max((f[0] for f in finished), default=float("-inf"))
        # Live beams only lose log-probability; stop when none can beat the best finished one
        # even at the most favourable length penalty that max_len allows.
        best_live = max(keep_s, default=float("-inf")) / length_penalty(max_len, alpha)
        if not keep_rows or best_live < best_done:
            break
        rows = torch.tensor(keep_rows, device=src.device)
        reorder_cache(cache, rows)
        ys = torch.cat([ys[rows], torch.tensor(keep_tok, device=src.device)[:, None]], dim=1)
        scores = torch.tensor(keep_s, device=src.device)
    if not finished:  # max_len reached: take the best live beam
        return ys[int(scores.argmax()), 1:].tolist()
    return max(finished, key=lambda f: f[0])[1]
