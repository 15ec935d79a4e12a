"""One search loop for greedy decoding (recorded, batched, from a forced prefix) and beam search.

Shape letters: see model/__init__.py.

`<bos>` and `<pad>` are never generated: at every step their log-probabilities are set to -inf and
the rest renormalised before anything is chosen, and a recorded Step reports that distribution,
the one the choice was made from. `<unk>` stays allowed (translator.py copies source words into it).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from model.nn.hooks import FwdHooks, Hooks
from model.nn.trace import for_trace, probs
from model.nn.transformer import EncoderDecoder, make_src_mask, make_tgt_mask, reorder_cache
from model.records import Step


@dataclass
class Decoded:
    """One sentence's search result."""

    ids: list[int]  # output ids without <bos> and <eos>
    finished: bool  # True when <eos> ended it, False when max_len stopped it
    steps: list[Step] = field(default_factory=list)  # empty unless recorded
    trace: dict | None = None  # when recorded: the activation cache (for_trace) of the encoder and the final pass
    log_probs: torch.Tensor | None = None  # when recorded: (1, t, V) the final teacher-forced pass's output


GreedyResult = Decoded  # the earlier name


def decode_step(model: EncoderDecoder, memory, src_mask, tokens: torch.Tensor, cache: dict,
                hooks: Hooks | None = None) -> torch.Tensor:
    """(b, 1) newest tokens -> (b, V) the generator's next-token log-probabilities.

    `cache` carries the earlier positions. Nothing is removed here: see allowed_log_probs.
    """
    x = model.decode(memory, src_mask, tokens, None, hooks, cache=cache)  # one query sees every cached key
    return model.generator(x[:, -1])


def never_generated(model: EncoderDecoder, bos: int, eos: int) -> list[int]:
    """Ids set to -inf at every step: the decoder's start token and <pad>, unless the start token is also the end
    token (M2M100, NLLB and mBART start from </s>)."""
    return sorted({bos, model.cfg.pad_idx} - {eos})


def allowed_log_probs(log_probs: torch.Tensor, banned: torch.Tensor) -> torch.Tensor:
    """(b, V) -> (b, V): the `banned` ids at -inf and the other tokens renormalised to sum to 1."""
    log_probs = log_probs.index_fill(-1, banned, float("-inf"))
    return log_probs - log_probs.logsumexp(-1, keepdim=True)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation ((5 + |Y|) / 6)^alpha; alpha 0 switches it off."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.inference_mode()
def search(
    model: EncoderDecoder,
    src: torch.Tensor,  # (b, s), padded with cfg.pad_idx
    bos: int,
    eos: int,
    max_len: int | Sequence[int],  # per sentence, or one for all
    beam_size: int = 1,
    alpha: float = 0.0,
    prefix: list[int] | None = None,
    record: bool = False,
    top_k: int = 5,
    fwd_hooks: FwdHooks = (),
    use_src_padding_mask: bool = True,
    draft=None,
) -> list[Decoded]:
    """Beam search over a batch of sentences; beam_size 1 with alpha 0 is exactly greedy decoding.

    Each sentence keeps its `beam_size` best live hypotheses by summed log-probability. A
    hypothesis ends when <eos> is among the candidates that fill the beam, scored by
    log-probability / length_penalty; a sentence stops when no live hypothesis can beat its best
    ended one (live scores only fall; the most favourable penalty is that of max_len), or at
    max_len, where the best live hypothesis, cut off, competes with the ended ones (it then
    reports finished=False). With one beam and no length penalty this stops exactly when <eos> is
    the argmax: greedy decoding.

    The first tokens can be forced (`prefix`, the same for every sentence): a user chose another
    candidate at some step. Decoding is incremental (a key/value cache, one new position per step)
    and finished sentences leave the batch. With `record` (one sentence, greedy), every step's
    candidates are kept, the encoder runs traced, and one traced teacher-forced decoder pass over
    <bos> + output follows: row i of its matrices is what step i computed (tests check this), so it
    gives every step's attention and the full trace. A recorded search may take a `draft`
    (model/inference/draft.py) that guesses the tokens; the model's teacher-forced pass checks every guess, so
    the result is the same greedy decoding (see checked_greedy).

    `fwd_hooks` (model/nn/hooks.py) hold in every pass of this search: the encoder's, each step's (a hook sees
    the new position only) and the recorded teacher-forced pass.
    """
    b = src.shape[0]
    max_lens = [int(max_len)] * b if isinstance(max_len, int) else [int(m) for m in max_len]
    if len(max_lens) != b:
        raise ValueError(f"{len(max_lens)} max_len values for {b} sentences")
    if record and (b != 1 or beam_size != 1):
        raise ValueError("only greedy decoding of one sentence (beam_size 1) can be recorded")
    banned_list = never_generated(model, bos, eos)
    prefix = list(prefix or [])
    if any(tok in banned_list for tok in prefix):
        raise ValueError("a forced prefix cannot hold the start token or <pad>: the model never generates them")
    banned = torch.tensor(banned_list, device=src.device)
    src_mask = make_src_mask(src, model.cfg.pad_idx, use_src_padding_mask)  # (b, 1, 1, s)
    trace: dict | None = {} if record else None
    hooks = Hooks(fwd_hooks) if fwd_hooks else None
    recording = Hooks(fwd_hooks, trace, for_trace) if record else None
    memory = model.encode(src, src_mask, recording or hooks)  # (b, s, d); the encoder runs once
    if record and draft is not None:
        return [checked_greedy(model, draft, memory, src_mask, bos, eos, max_lens[0], prefix, top_k, fwd_hooks,
                               banned, trace)]
    beams = _Beams(list(range(b)), torch.full((b, 1), bos, dtype=torch.long, device=src.device),
                   torch.zeros(b, device=src.device), src_mask, model.new_cache(), [[] for _ in range(b)], [None] * b)
    steps: list[Step] = []
    for t in range(1, max(max_lens, default=0) + 1):
        # `memory` is read only at t = 1 (when n == b); afterwards the cache holds the cross-attention keys/values.
        log_probs = allowed_log_probs(decode_step(model, memory, beams.rows_mask, beams.ys[:, -1:], beams.cache,
                                                  hooks), banned)  # (n, V)
        forced = prefix[t - 1] if t <= len(prefix) else None
        cand_s, cand_row, cand_tok = _candidates(beams.scores[:, None] + log_probs, len(beams.active), beam_size,
                                                 forced)
        if record:
            steps.append(_recorded_step(beams.ys[0], log_probs[0], int(cand_tok[0, 0]), top_k, forced is not None))
        kept = _settle(beams, t, cand_s, cand_row, cand_tok, max_lens, 1 if forced is not None else beam_size,
                       beam_size, alpha, eos)
        if not kept[3]:
            break
        _advance(beams, *kept)
    results = [Decoded([], False) if r is None else r for r in beams.results]  # None: max_len 0
    if record:
        _attach_record(model, memory, src_mask, bos, fwd_hooks, trace, results[0], steps)
    return results


@dataclass
class _Beams:
    """A batched search between steps: every unfinished sentence's live hypotheses, ended ones, results."""

    active: list[int]  # the unfinished sentences, in row order; each has the same number of rows
    ys: torch.Tensor  # (n, t) the live hypotheses
    scores: torch.Tensor  # (n,) their summed log-probabilities
    rows_mask: torch.Tensor  # (n, 1, 1, s): each row's source mask
    cache: dict  # the decoder's keys and values, one row per live hypothesis
    ended: list[list[tuple[float, list[int]]]]  # per sentence: (normalised score, ids)
    results: list[Decoded | None]  # per sentence, once it stopped


def _candidates(total: torch.Tensor, groups: int, beam_size: int, forced: int | None):
    """(n, V) summed log-probabilities -> (score, row, token), each (groups, c), best first per sentence.

    A forced token is one candidate per row (a prefix keeps one row per sentence); otherwise each sentence's
    2 x beam_size best over all its rows, so that <eos> candidates leave enough live ones to fill the beam.
    """
    n, V = total.shape
    if forced is not None:
        rows = torch.arange(n, device=total.device)[:, None]
        return total[:, forced : forced + 1], rows, torch.full((n, 1), forced, device=total.device)
    rows_per = n // groups
    flat = total.view(groups, rows_per * V)  # rows are grouped by sentence
    cand_s, flat_i = flat.topk(min(2 * beam_size, flat.shape[1]), dim=-1)  # (groups, c), best first
    cand_row = flat_i // V + torch.arange(groups, device=total.device)[:, None] * rows_per
    return cand_s, cand_row, flat_i % V


def _recorded_step(prefix_ids: torch.Tensor, log_probs: torch.Tensor, chosen: int, top_k: int, forced: bool) -> Step:
    """The Step a recorded search reports: the distribution (V,) the choice was made from and its top_k."""
    probs = log_probs.exp()
    top_p, top_i = probs.topk(min(top_k, probs.shape[-1]))
    return Step(prefix=prefix_ids.tolist(), top_ids=top_i.tolist(), top_probs=top_p.tolist(), chosen=chosen,
                chosen_prob=float(probs[chosen]), forced=forced)


def _settle(beams: _Beams, t: int, cand_s, cand_row, cand_tok, max_lens: list[int], rows_wanted: int,
            beam_size: int, alpha: float, eos: int) -> tuple[list[int], list[int], list[float], list[int]]:
    """Each unfinished sentence's candidates at step t: <eos> ones end a hypothesis, the best others stay live,
    and a sentence that can no longer improve gets its result. Returns the rows, tokens and scores that go on
    (rows_wanted per sentence) and the sentences still going."""
    keep_rows, keep_tok, keep_s, still = [], [], [], []
    for g, (c_s, c_row, c_tok) in enumerate(zip(cand_s.tolist(), cand_row.tolist(), cand_tok.tolist())):
        j = beams.active[g]
        live = []  # (score, row, token), best first
        for s_, row, tok in zip(c_s, c_row, c_tok):
            if s_ == float("-inf"):
                break  # a banned token: so is every later candidate
            if tok == eos:
                beams.ended[j].append((s_ / length_penalty(t, alpha), beams.ys[row, 1:].tolist()))
            else:
                live.append((s_, row, tok))
            if len(live) == beam_size:
                break
        done = _result_if_stopped(beams, j, t, live, c_row, max_lens[j], alpha)
        if done is not None:
            beams.results[j] = done
            continue
        still.append(j)
        while len(live) < rows_wanted:  # a tiny vocabulary ran out of candidates:
            live.append((float("-inf"), live[0][1], live[0][2]))  # a dead row keeps the groups the same size
        for s_, row, tok in live:
            keep_rows.append(row)
            keep_tok.append(tok)
            keep_s.append(s_)
    return keep_rows, keep_tok, keep_s, still


def _result_if_stopped(beams: _Beams, j: int, t: int, live: list, c_row: list[int], max_len: int,
                       alpha: float) -> Decoded | None:
    """Sentence j's result when no live hypothesis can beat its best ended one, or at its max_len; else None."""
    ended = beams.ended[j]
    best_ended = max((e[0] for e in ended), default=float("-inf"))
    best_live = live[0][0] / length_penalty(max_len, alpha) if live else float("-inf")
    if live and best_live > best_ended and t < max_len:
        return None
    # At max_len a cut-off hypothesis competes too (normalised by its own length): a complete
    # but improbable translation should not beat a far likelier one that ran out of steps.
    at_limit = live[:1] if t >= max_len else []
    cut = [(s_ / length_penalty(t, alpha), beams.ys[row, 1:].tolist() + [tok]) for s_, row, tok in at_limit]
    options = [(e[0], e[1], True) for e in ended] + [(c[0], c[1], False) for c in cut]
    best = max(options, key=lambda o: o[0], default=(0.0, beams.ys[c_row[0], 1:].tolist(), False))
    return Decoded(best[1], best[2])


def _advance(beams: _Beams, keep_rows: list[int], keep_tok: list[int], keep_s: list[float], still: list[int]) -> None:
    """The kept rows (reordered, the cache with them) each grow by their token; the stopped sentences leave."""
    device = beams.ys.device
    if keep_rows != list(range(beams.ys.shape[0])):  # greedy without a finished sentence keeps every row in place
        rows = torch.tensor(keep_rows, device=device)
        reorder_cache(beams.cache, rows)
        beams.rows_mask, beams.ys = beams.rows_mask.index_select(0, rows), beams.ys.index_select(0, rows)
    beams.ys = torch.cat([beams.ys, torch.tensor(keep_tok, device=device)[:, None]], dim=1)
    beams.scores = torch.tensor(keep_s, device=device)
    beams.active = still


def _attach_record(model, memory, src_mask, bos, fwd_hooks, trace: dict, res: Decoded, steps: list[Step]) -> None:
    """One traced teacher-forced decoder pass over <bos> + output: every step's attention and the full trace."""
    log_probs = _teacher_forced(model, memory, src_mask, bos, res.ids, fwd_hooks, trace)
    _attach_steps(model, trace, log_probs, res, steps)


def _teacher_forced(model, memory, src_mask, bos, ids: list[int], fwd_hooks, trace: dict) -> torch.Tensor:
    """The decoder pass over <bos> + ids, its points kept in `trace`; (1, t, V) log_probs."""
    tgt = torch.tensor([[bos] + ids], dtype=torch.long, device=memory.device)
    tgt_mask = make_tgt_mask(tgt, model.cfg.pad_idx)
    return model.generator(model.decode(memory, src_mask, tgt, tgt_mask, Hooks(fwd_hooks, trace, for_trace)))


def _attach_steps(model, trace: dict, log_probs: torch.Tensor, res: Decoded, steps: list[Step]) -> None:
    """Row i of the teacher-forced pass is what step i computed: give each step its attention."""
    n = model.cfg.n_decoder_layers
    dec_self, cross = probs(trace, "dec_self", n), probs(trace, "cross", n)  # (L, h, t, t), (L, h, t, s)
    for i, step in enumerate(steps):
        step.dec_self, step.cross = dec_self[:, :, i, : i + 1], cross[:, :, i]
    res.steps, res.trace, res.log_probs = steps, trace, log_probs


def _draft_greedy(draft, memory, src_mask, bos, eos, max_len, known: list[int], fwd_hooks,
                  banned, cache: dict) -> tuple[list[int], bool]:
    """The draft's greedy continuation of `known` (forced tokens): (ids, ended with <eos>).

    `cache`: the draft's own, new or from an earlier round, whose positions' inputs were <bos> and that round's tokens.
    Those `known` still starts with are kept (EncoderDecoder.cut_cache) and decoding goes on from there, so a
    corrected guess costs the steps after it, not the whole sentence again.
    """
    done = 0 if eos in known else min(cache["len"], len(known))
    EncoderDecoder.cut_cache(cache, done)
    ids, last = list(known[:done]), known[done - 1] if done else bos
    hooks = Hooks(fwd_hooks) if fwd_hooks else None
    for t in range(done + 1, max_len + 1):
        x = draft.decode(memory, src_mask, torch.tensor([[last]], device=memory.device), None, hooks, cache=cache)
        if t <= len(known):  # forced: the cache needs the position, the choice is made
            last = known[t - 1]
        else:
            last = int(allowed_log_probs(draft.generator(x[:, -1]), banned)[0].argmax())
        if last == eos:
            return ids, True
        ids.append(last)
    return ids, False


DRAFT_ROUNDS = 2  # the draft's guesses checked before the model guesses for itself


def checked_greedy(model, draft, memory, src_mask, bos: int, eos: int, max_len: int, prefix: list[int], top_k: int,
                   fwd_hooks, banned, trace: dict) -> Decoded:
    """Greedy decoding of one sentence whose tokens the draft guesses and the model's traced pass checks.

    Row i of the teacher-forced pass over <bos> + guess is the model's distribution after the first i
    tokens. Where every row's argmax is the guessed token (and <eos> after the last one when the guess
    ended), the guess is the model's greedy output. At the first row where it is not, the model's own
    token is kept and the draft guesses again from there (from its own cache, cut back). Each round fixes at least
    one more token, so this ends; the steps report the model's distributions, never the draft's. After DRAFT_ROUNDS
    wrong guesses the model guesses the rest itself (its incremental greedy decoding), which its traced pass then
    confirms: where the draft's int8 rounding keeps flipping near-tied tokens (random weights), a trace costs little
    more than without a draft instead of a pass per flip.
    """
    known, rounds, caches = list(prefix), 0, {}  # forced, or already the model's own argmax; each guesser's cache
    while True:
        guesser = draft if rounds < DRAFT_ROUNDS else model
        rounds += 1
        if id(guesser) not in caches:
            caches[id(guesser)] = guesser.new_cache()
        cache = caches[id(guesser)]
        ids, finished = _draft_greedy(guesser, memory, src_mask, bos, eos, max_len, known, fwd_hooks, banned, cache)
        raw = _teacher_forced(model, memory, src_mask, bos, ids, fwd_hooks, trace)  # (1, t, V)
        log_probs = allowed_log_probs(raw[0], banned)
        best = log_probs.argmax(-1).tolist()  # (t,) the model's choice after each prefix
        want = ids + [eos] if finished else ids
        wrong = next((i for i in range(len(known), len(want)) if best[i] != want[i]), None)
        if wrong is None:
            break
        known = ids[:wrong] + [best[wrong]]
        if best[wrong] == eos or len(known) >= max_len:  # the model's token ends it: trace exactly that output
            finished = best[wrong] == eos
            ids = ids[:wrong] if finished else known
            want = ids + [eos] if finished else ids
            raw = _teacher_forced(model, memory, src_mask, bos, ids, fwd_hooks, trace)
            log_probs = allowed_log_probs(raw[0], banned)
            break
    steps = []
    probs = log_probs.exp()  # (t, V)
    top_p, top_i = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    for i, chosen in enumerate(want):
        steps.append(Step(prefix=[bos] + ids[:i], top_ids=top_i[i].tolist(), top_probs=top_p[i].tolist(),
                          chosen=chosen, chosen_prob=float(probs[i, chosen]), forced=i < len(prefix)))
    res = Decoded(ids, finished)
    _attach_steps(model, trace, raw, res, steps)
    return res


def greedy_from_guess(model: EncoderDecoder, src: torch.Tensor, bos: int, eos: int, max_len: int, guess: list[int],
                      guess_finished: bool, log_probs: torch.Tensor, use_src_padding_mask: bool = True,
                      forced: int = 0) -> Decoded:
    """Greedy decoding of one sentence src (1, s), starting from a guess of its output that the model checks.

    `log_probs` (t, V) are the model's own teacher-forced log-probabilities for this source over <bos> + guess
    (row i: after the first i guessed tokens), from a pass the caller runs anyway. Where every row's allowed
    argmax is the guessed token, and <eos> after the last one when the guess ended, the guess is the greedy
    decoding, as checked_greedy decides for a draft's guess, and no search runs. Otherwise the search runs on
    from the first row that disagrees, with the model's own tokens before it forced (they are its argmax). The
    first `forced` tokens of the guess were forced (a target language's token), not chosen: they are not checked.
    """
    want = (list(guess) + [eos] if guess_finished else list(guess))[:max_len]  # the tokens greedy would choose
    if log_probs.shape[0] < len(want):
        raise ValueError(f"{log_probs.shape[0]} rows of log-probabilities cannot check {len(want)} tokens")
    banned = torch.tensor(never_generated(model, bos, eos), device=log_probs.device)
    best = allowed_log_probs(log_probs, banned).argmax(-1).tolist()  # (t,) the model's choice after each prefix
    wrong = next((i for i in range(forced, len(want)) if best[i] != want[i]), None)
    known = want if wrong is None else want[:wrong] + [best[wrong]]  # the model's own choices so far
    if known[-1:] == [eos]:  # the model ends it here
        return Decoded(known[:-1], True)
    if len(known) == max_len:  # cut off by the limit, as greedy_decode would be
        return Decoded(known, False)
    return greedy_decode(model, src, bos, eos, max_len, prefix=known, use_src_padding_mask=use_src_padding_mask)


def greedy_decode(
    model: EncoderDecoder,
    src: torch.Tensor,  # (1, s)
    bos: int,
    eos: int,
    max_len: int,
    prefix: list[int] | None = None,
    record: bool = False,
    top_k: int = 5,
    fwd_hooks: FwdHooks = (),
    use_src_padding_mask: bool = True,
    draft=None,
) -> Decoded:
    """The most probable allowed token at each step until <eos> or max_len tokens (see search)."""
    return search(model, src, bos, eos, max_len, 1, 0.0, prefix, record, top_k, fwd_hooks, use_src_padding_mask,
                  draft)[0]


def greedy_decode_batch(model: EncoderDecoder, src: torch.Tensor, bos: int, eos: int, max_len: int | Sequence[int],
                        fwd_hooks: FwdHooks = ()) -> list[Decoded]:
    """Greedy decoding of a padded batch (b, s); each sentence's result equals greedy_decode's."""
    return search(model, src, bos, eos, max_len, 1, 0.0, fwd_hooks=fwd_hooks)


def beam_search(
    model: EncoderDecoder,
    src: torch.Tensor,  # (1, s)
    bos: int,
    eos: int,
    max_len: int,
    beam_size: int = 5,
    alpha: float = 0.6,
    fwd_hooks: FwdHooks = (),
) -> Decoded:
    """The best hypothesis by length-normalised log-probability (see search), and whether it ended."""
    return search(model, src, bos, eos, max_len, beam_size, alpha, fwd_hooks=fwd_hooks)[0]
