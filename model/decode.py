"""Greedy decoding recorded step by step, decoding from a forced prefix, and beam search.

Shape letters: b batch, s source positions, t decoded positions, L layers, h heads, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .trace import Trace
from .transformer import EncoderDecoder, HeadMask, make_src_mask, make_tgt_mask


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

    `prefix` forces the first tokens (a user chose another candidate at some step). With
    `record`, every step keeps its top-k candidates and attention, and the result carries the
    full trace of the last step, which equals a teacher-forced pass over <bos> + output.
    """
    prefix = list(prefix or [])
    src_mask = make_src_mask(src, model.cfg.pad_idx, use_src_padding_mask)
    enc_trace = Trace() if record else None
    memory = model.encode(src, src_mask, head_mask, enc_trace)  # (1, s, d)
    ys = [bos]
    steps: list[Step] = []
    last_trace = None
    finished = False
    while len(ys) - 1 < max_len:
        tgt = torch.tensor([ys], dtype=torch.long, device=src.device)
        step_trace = Trace() if record else None
        x = model.decode(memory, src_mask, tgt, make_tgt_mask(tgt, model.cfg.pad_idx), head_mask, step_trace)
        log_probs = model.generator(x[:, -1])[0]  # (V,)
        forced = len(ys) - 1 < len(prefix)
        nxt = prefix[len(ys) - 1] if forced else int(log_probs.argmax())
        if record:
            probs = log_probs.exp()
            top_p, top_i = probs.topk(min(top_k, probs.shape[0]))
            steps.append(
                Step(
                    prefix=list(ys),
                    top_ids=top_i.tolist(),
                    top_probs=top_p.tolist(),
                    chosen=nxt,
                    chosen_prob=float(probs[nxt]),
                    forced=forced,
                    dec_self=torch.stack([a.probs[0, :, -1] for a in step_trace.dec_self]).float().numpy(),
                    cross=torch.stack([a.probs[0, :, -1] for a in step_trace.cross]).float().numpy(),
                )
            )
            last_trace, last_x = step_trace, x
        if nxt == eos:
            finished = True
            break
        ys.append(nxt)
    if record and not finished and last_trace is not None and len(ys) <= model.cfg.max_len:
        # max_len stopped it: the last pass did not see the last chosen token, so trace <bos> + output once more.
        tgt = torch.tensor([ys], dtype=torch.long, device=src.device)
        last_trace = Trace()
        last_x = model.decode(memory, src_mask, tgt, make_tgt_mask(tgt, model.cfg.pad_idx), head_mask, last_trace)
    trace = None
    if record and last_trace is not None:
        trace = Trace(enc_trace.src_embed, last_trace.tgt_embed, enc_trace.enc_self, last_trace.dec_self, last_trace.cross)
        trace.log_probs = model.generator(last_x)  # (1, t, V) for every position, not only the last
    return GreedyResult(ids=ys[1:], finished=finished, steps=steps, trace=trace)


@torch.inference_mode()
def greedy_decode_batch(model: EncoderDecoder, src: torch.Tensor, bos: int, eos: int, max_len: int,
                        head_mask: HeadMask | None = None) -> list[list[int]]:
    """Untraced greedy decoding of a padded batch (b, s); returns ids without <bos>/<eos>."""
    pad = model.cfg.pad_idx
    src_mask = make_src_mask(src, pad)
    memory = model.encode(src, src_mask, head_mask)
    b = src.shape[0]
    ys = torch.full((b, 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        x = model.decode(memory, src_mask, ys, make_tgt_mask(ys, pad), head_mask)
        nxt = model.generator(x[:, -1]).argmax(-1)
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
    for t in range(1, max_len + 1):
        n = ys.shape[0]
        x = model.decode(memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1), ys, make_tgt_mask(ys, pad))
        log_probs = model.generator(x[:, -1])  # (n, V)
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
        ys = torch.cat([ys[rows], torch.tensor(keep_tok, device=src.device)[:, None]], dim=1)
        scores = torch.tensor(keep_s, device=src.device)
    if not finished:  # max_len reached: take the best live beam
        return ys[int(scores.argmax()), 1:].tolist()
    return max(finished, key=lambda f: f[0])[1]
