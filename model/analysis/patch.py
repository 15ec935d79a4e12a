"""What-if lab: switch one head off, or patch one component from a clean run into a corrupted one.

Shape letters: see model/__init__.py (L layers, h heads, s source positions, t target positions). P is the
number of target positions reported (all of them unless `positions` picks some).

What is measured. Everything is teacher-forced on a given target token list y_1 .. y_T (the translation
shown): decoder input <bos> y_1 .. y_{T-1}, and position i (0-based) scores tgt_tokens[i] = y_{i+1}, as in
model/analysis/attribution.py. The list is exactly the tokens given: append the end token to score the stop
decision too. Log-probabilities are the raw generator's (Translator.score's), in nats.

  head knockout       log p(y_i) with one head alone switched off (its output before W_O set to 0 by a
                      gate on hook_z) minus log p(y_i) with every head on: (L, h, P) per attention kind.
  activation patching run the corrupted source, replace one component's activation by the clean run's, and
                      report the normalised effect (lp_patched − lp_corrupt) / (lp_clean − lp_corrupt) of the
                      clean target token: 0 = nothing restored, 1 = all of it (values outside [0, 1] happen:
                      a patch may overshoot or hurt; below 0, the patch moved log p further from the clean
                      run's). Where |lp_clean − lp_corrupt| < min_gap (MIN_GAP, 1e-2 nats: see
                      model/records.py) the corruption moved that token's log-probability by less than a ratio
                      can be read from in float32, and the effect is NaN (a sentence patched against itself
                      gives NaN everywhere). Components:
                        enc_self / dec_self / cross (L, h): one head's output before W_O, at every query position;
                        enc_resid (L, s): the residual stream after encoder layer l at one source position;
                        dec_resid (L, t): the same after decoder layer l at one decoder position.
                      Clean and corrupted source must have the same number of tokens (position j of one is
                      patched into position j of the other); other pairs are refused with a ValueError.

How it runs. Interventions are forward hooks of the call (model/nn/hooks.py): torch.where puts 0 (a head
switched off) or the clean run's cached value into `hook_z` or `hook_resid_post`. One batch row per head or
component, so a grid costs a few batched passes, not one pass per cell; rows that touch only the decoder reuse the
encoder output. Nothing is stored on the model, which may serve other requests meanwhile.

The command line that writes knockout, patching and logit-lens results as JSON is model/patch.py.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.analysis.pairs import normalised_effect  # (torch-free, so pages can state the same ratio)
from model.nn.hooks import Hooks, attn_name
from model.nn.transformer import EncoderDecoder, make_src_mask, make_tgt_mask
from model.records import KINDS, MIN_GAP, Knockout, Patching

STREAMS = ("enc_resid", "dec_resid")
ENCODER_SIDE = ("enc_self", "enc_resid")
DEFAULT_BATCH_TOKENS = 8192  # source + target positions per batch row, summed over the rows of one pass
# One batch row's intervention: ("off", kind, layer, head) switches a head off; ("patch", component, layer, k)
# patches head k (enc_self, dec_self, cross) or position k (enc_resid, dec_resid); None leaves the row as it is.
Row = tuple[str, str, int, int] | None


@dataclass
class Run:
    """One teacher-forced pass of batch 1: the values patching copies, in its activation cache."""

    cache: dict[str, torch.Tensor]  # every hook_z (1, i, h, d_k), hook_resid_post (1, n, d) and hook_pattern
    memory: torch.Tensor  # (1, s, d) the encoder's output after its final norm
    states: torch.Tensor  # (1, t, d) the decoder's output after its final norm (the generator's input)


STREAM_POINT = {"enc_resid": "encoder.{}.hook_resid_post", "dec_resid": "decoder.{}.hook_resid_post"}


def point(component: str, layer: int) -> str:
    """The hook point a component of patch.py names: a kind's hook_z, or a stream's hook_resid_post."""
    return attn_name(component, layer, "hook_z") if component in KINDS else STREAM_POINT[component].format(layer)


def n_layers(model: EncoderDecoder, component: str) -> int:
    return model.cfg.n_encoder_layers if component in ENCODER_SIDE else model.cfg.n_decoder_layers


def forced_tensors(model: EncoderDecoder, src_ids: Sequence[int], tgt_ids: Sequence[int], bos: int):
    """(src (1, s), decoder input (1, T) = <bos> y_1 .. y_{T-1}, gold (T,) = y_1 .. y_T)."""
    if model.training:
        raise ValueError("the what-if lab needs the model in eval mode (dropout would make it random)")
    if not len(src_ids) or not len(tgt_ids):
        raise ValueError("needs a source and at least one target token")
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=device)
    tgt_in = torch.tensor([[bos] + list(tgt_ids[:-1])], dtype=torch.long, device=device)
    return src, tgt_in, torch.tensor(list(tgt_ids), dtype=torch.long, device=device)


def _positions(positions: Sequence[int] | None, t: int) -> list[int]:
    at = list(range(t)) if positions is None else [int(p) for p in positions]
    if not at or any(not 0 <= p < t for p in at):
        raise ValueError(f"positions must be target positions 0..{t - 1}, got {positions}")
    return at


@torch.inference_mode()
def record_run(model: EncoderDecoder, src: torch.Tensor, tgt_in: torch.Tensor) -> Run:
    """The clean (or corrupted) run: every head's hook_z and every layer's hook_resid_post, from one cached pass.
    Its patterns are kept too, so attention is written out (softmax, then V) as in the page's trace; the patched
    rows run the fused kernel, as a translation does."""
    pad = model.cfg.pad_idx
    src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt_in, pad)
    cache: dict[str, torch.Tensor] = {}
    hooks = Hooks(cache=cache, names_filter=lambda n: n.endswith((".hook_z", ".hook_resid_post", ".hook_pattern")))
    memory = model.encode(src, src_mask, hooks)
    return Run(cache, memory, model.decode(memory, src_mask, tgt_in, tgt_mask, hooks))


def _interventions(model: EncoderDecoder, rows: Sequence[Row], side: str, donor: Run | None) -> Hooks | None:
    """The hooks of one batch whose row r carries rows[r]; only the components of `side`. torch.where puts the
    donor's value ("patch") or 0 ("off": a head's output before W_O) exactly where a row marks it."""
    device = next(model.parameters()).device
    marks: dict[tuple[str, str], torch.Tensor] = {}  # (action, point) -> (b, h | n) bool
    for r, row in enumerate(rows):
        if row is None or (row[1] in ENCODER_SIDE) != (side == "encoder"):
            continue
        action, comp, l, k = row
        width = model.cfg.n_heads if comp in KINDS else donor.cache[point(comp, l)].shape[1]
        marks.setdefault((action, point(comp, l)), torch.zeros(len(rows), width, dtype=torch.bool, device=device))
        marks[(action, point(comp, l))][r, k] = True
    fwd = [(name, _put(where, donor.cache[name] if action == "patch" else torch.zeros((), device=device),
                       name.endswith(".hook_z"))) for (action, name), where in marks.items()]
    return Hooks(fwd) if fwd else None


def _put(where: torch.Tensor, value: torch.Tensor, heads: bool):
    where = where.view(where.shape[0], 1, -1, 1) if heads else where.unsqueeze(-1)  # (b, 1, h, 1) | (b, n, 1)
    return lambda x, name: torch.where(where, value.to(x.dtype), x)  # value: (1, i, h, d_k) | (1, n, d) | 0


def _states(model: EncoderDecoder, src, tgt_in, memory, rows: Sequence[Row], donor: Run | None) -> torch.Tensor:
    """(b, t, d) decoder states of one batch, row r with rows[r] applied; decoder-only rows reuse `memory`."""
    b, pad = len(rows), model.cfg.pad_idx
    src_b, tgt_b = src.expand(b, -1), tgt_in.expand(b, -1)
    src_mask = make_src_mask(src_b, pad)
    enc = [r for r, row in enumerate(rows) if row is not None and row[1] in ENCODER_SIDE]
    mem = memory.expand(b, -1, -1)  # (b, s, d)
    if enc:
        hooks = _interventions(model, [rows[r] for r in enc], "encoder", donor)
        mem = mem.index_copy(0, torch.tensor(enc, device=mem.device),
                             model.encode(src.expand(len(enc), -1), src_mask[enc], hooks))
    hooks = _interventions(model, rows, "decoder", donor)
    return model.decode(mem, src_mask, tgt_b, make_tgt_mask(tgt_b, pad), hooks)


def run_rows(model: EncoderDecoder, src, tgt_in, memory, rows: Sequence[Row], readout: Callable,
             donor: Run | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> np.ndarray:
    """(len(rows), k) float64: readout((b, t, d) decoder states) -> (b, k) of every row, a batch of rows per pass."""
    per = max(1, batch_tokens // (src.shape[1] + tgt_in.shape[1]))
    with torch.inference_mode():
        out = [readout(_states(model, src, tgt_in, memory, rows[i : i + per], donor))
               for i in range(0, len(rows), per)]
    return torch.cat(out).double().cpu().numpy()


def gold_readout(model: EncoderDecoder, gold: torch.Tensor, at: Sequence[int], max_floats: int = 1 << 24):
    """readout: (b, t, d) states -> (b, P) log p(gold[i]) at positions `at`, the generator run on a few rows
    at a time so that (rows, P, V) log-probabilities stay under `max_floats`."""
    at_t = torch.tensor(list(at), dtype=torch.long, device=gold.device)
    want = gold[at_t].view(1, -1, 1)  # (1, P, 1)

    def readout(states: torch.Tensor) -> torch.Tensor:
        x = states[:, at_t]  # (b, P, d)
        per = max(1, max_floats // (x.shape[1] * model.cfg.tgt_vocab_size))
        parts = [model.generator(x[i : i + per]) for i in range(0, x.shape[0], per)]  # each (c, P, V)
        return torch.cat([lp.gather(-1, want.expand(lp.shape[0], -1, 1))[..., 0] for lp in parts])  # (b, P)

    return readout


def head_rows(model: EncoderDecoder, action: str = "off") -> list[Row]:
    """One row per head of every kind and layer, in the order of KINDS, layers, heads."""
    return [(action, kind, l, hh) for kind in KINDS for l in range(n_layers(model, kind))
            for hh in range(model.cfg.n_heads)]


def by_kind(model: EncoderDecoder, values: np.ndarray) -> dict[str, np.ndarray]:
    """(rows of head_rows, k) -> kind -> (L, h, k)."""
    shapes = [(n_layers(model, kind), model.cfg.n_heads) for kind in KINDS]
    parts = np.split(values, np.cumsum([a * b for a, b in shapes])[:-1])
    return {kind: part.reshape(*shape, -1) for kind, part, shape in zip(KINDS, parts, shapes)}


def knockout_scores(model: EncoderDecoder, src, tgt_in, readout: Callable,
                    batch_tokens: int = DEFAULT_BATCH_TOKENS) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(readout with every head on (k,), kind -> (L, h, k) its change with that head alone off)."""
    with torch.inference_mode():
        memory = model.encode(src, make_src_mask(src, model.cfg.pad_idx))
    scores = run_rows(model, src, tgt_in, memory, [None] + head_rows(model), readout, None, batch_tokens)
    return scores[0], by_kind(model, scores[1:] - scores[0])


def knockout_ids(model: EncoderDecoder, src_ids: Sequence[int], tgt_ids: Sequence[int], bos: int,
                 positions: Sequence[int] | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> dict:
    """{"log_probs": (P,), "delta": kind -> (L, h, P)}: head knockout, one batch row per head."""
    src, tgt_in, gold = forced_tensors(model, src_ids, tgt_ids, bos)
    at = _positions(positions, len(tgt_ids))
    base, delta = knockout_scores(model, src, tgt_in, gold_readout(model, gold, at), batch_tokens)
    return {"positions": at, "log_probs": base, "delta": delta}


def patching_ids(model: EncoderDecoder, clean_ids: Sequence[int], corrupt_ids: Sequence[int],
                 tgt_ids: Sequence[int], bos: int, positions: Sequence[int] | None = None,
                 batch_tokens: int = DEFAULT_BATCH_TOKENS, min_gap: float = MIN_GAP) -> dict:
    """Activation patching clean -> corrupted (see the module docstring); the sources must have one length.

    Returns {"positions", "clean_log_probs" (P,), "corrupt_log_probs" (P,), "log_probs" and "effect":
    component -> (L, h, P) for enc_self / dec_self / cross, (L, s, P) enc_resid, (L, t, P) dec_resid}.
    """
    if len(clean_ids) != len(corrupt_ids):
        raise ValueError(f"clean and corrupted sources need the same number of tokens to patch position by "
                         f"position: {len(clean_ids)} and {len(corrupt_ids)} (with the end token)")
    clean_src, tgt_in, gold = forced_tensors(model, clean_ids, tgt_ids, bos)
    corrupt_src, _, _ = forced_tensors(model, corrupt_ids, tgt_ids, bos)
    at = _positions(positions, len(tgt_ids))
    readout = gold_readout(model, gold, at)
    clean, corrupt = record_run(model, clean_src, tgt_in), record_run(model, corrupt_src, tgt_in)
    with torch.inference_mode():
        lp_clean = readout(clean.states)[0].double().cpu().numpy()
    s, t = clean_src.shape[1], tgt_in.shape[1]
    streams = [("patch", c, l, p) for c, n in zip(STREAMS, (s, t)) for l in range(n_layers(model, c))
               for p in range(n)]
    heads = head_rows(model, "patch")
    rows = [None] + heads + streams  # row 0: the corrupted run as it is
    scores = run_rows(model, corrupt_src, tgt_in, corrupt.memory, rows, readout, clean, batch_tokens)
    lp_corrupt = scores[0]
    log_probs = by_kind(model, scores[1 : 1 + len(heads)])
    rest = scores[1 + len(heads) :]
    n_enc = model.cfg.n_encoder_layers * s
    log_probs["enc_resid"] = rest[:n_enc].reshape(model.cfg.n_encoder_layers, s, -1)
    log_probs["dec_resid"] = rest[n_enc:].reshape(model.cfg.n_decoder_layers, t, -1)
    effect = {c: normalised_effect(v, lp_clean, lp_corrupt, min_gap) for c, v in log_probs.items()}
    return {"positions": at, "clean_log_probs": lp_clean, "corrupt_log_probs": lp_corrupt, "log_probs": log_probs,
            "effect": effect}


def knockout(translator, text: str, tgt_tokens: Sequence[str], positions: Sequence[int] | None = None,
             batch_tokens: int = DEFAULT_BATCH_TOKENS) -> Knockout:
    """Head knockout of `text` teacher-forced on `tgt_tokens` (a token outside the vocabulary counts as <unk>)."""
    source, tv = translator.prepare(text), translator.tgt_vocab
    res = knockout_ids(translator.model, source.ids, tv.encode(list(tgt_tokens)), tv.bos_idx, positions,
                       batch_tokens)
    return Knockout(source.axis_tokens, list(tgt_tokens), res["positions"], res["log_probs"], res["delta"])


def patching(translator, clean: str, corrupt: str, tgt_tokens: Sequence[str], positions: Sequence[int] | None = None,
             batch_tokens: int = DEFAULT_BATCH_TOKENS, min_gap: float = MIN_GAP) -> Patching:
    """Activation patching from `clean` into `corrupt`, both teacher-forced on `tgt_tokens` (the clean
    translation). ValueError unless both sources have the same number of tokens after tokenization."""
    a, b, tv = translator.prepare(clean), translator.prepare(corrupt), translator.tgt_vocab
    if len(a.ids) != len(b.ids):
        raise ValueError(f"clean and corrupted sentences need the same number of tokens to patch position by "
                         f"position: {len(a.tokens)} ({' '.join(a.tokens)}) and {len(b.tokens)} "
                         f"({' '.join(b.tokens)})")
    res = patching_ids(translator.model, a.ids, b.ids, tv.encode(list(tgt_tokens)), tv.bos_idx, positions,
                       batch_tokens, min_gap)
    return Patching(a.axis_tokens, b.axis_tokens, list(tgt_tokens), res["positions"], res["clean_log_probs"],
                    res["corrupt_log_probs"], res["log_probs"], res["effect"], min_gap)
