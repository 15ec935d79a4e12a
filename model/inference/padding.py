"""A sentence padded in one batch with a longer one, as in training: what the padding mask changes.

Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import time

import torch

from model.inference.decode import greedy_decode, greedy_from_guess
from model.nn.trace import for_trace, to_sentence_trace
from model.nn.transformer import make_src_mask
from model.records import Source, Translation


@torch.inference_mode()
def padded_batch(translator, text: str, partner: str | None = None, use_padding_mask: bool = True,
                 alone: Translation | None = None, max_len: int | None = None) -> dict:
    """`text` padded in one batch with a longer sentence, as in training.

    The partner is `padding_example` unless given; when it is not longer than `text`, `text` + " " +
    partner is used, so that padding appears (unless `text` is already at the length limit).
    Returns "trace": the padded sentence's SentenceTrace (its source axis ends in <pad> tokens;
    attn[kind][layer]["mask"] are the masks the model used), "partner" and "partner_tokens", "n_pads",
    "encoder_shift": max |memory(padded) - memory(alone)| over the real positions, and the greedy translations
    "alone" and "padded".

    `alone` may hand in the sentence's greedy decoding made elsewhere (`trace` or `translate` with every
    head on, no prefix and the default length limit), so that the two halves of the demonstration (mask on,
    mask off) and the page's own decoding share one search instead of three. What can be checked is
    (`_greedy_ids`): greedy, the same source ids, not cut off by a shorter limit. `max_len` is the step limit of
    both searches (None: the automatic one), the page's own, so that a session's limit is the demonstration's.
    """
    a = translator.prepare(text)
    steps = translator.max_steps(a, max_len)
    alone_ids = _greedy_ids(translator, a, alone, steps) if alone is not None else None
    partner = translator.padding_example if partner is None else partner
    if len(translator.prepare(partner).ids) <= len(a.ids):
        partner = text + " " + partner  # the partner must be longer for padding to appear
    b = translator.prepare(partner)
    width = max(len(a.ids), len(b.ids))
    pad = translator.cfg.pad_idx
    src = torch.full((2, width), pad, dtype=torch.long)
    src[0, : len(a.ids)], src[1, : len(b.ids)] = torch.tensor(a.ids), torch.tensor(b.ids)
    v = translator.tgt_vocab
    t0 = time.perf_counter()
    alone_src = translator._src_tensor(a)
    if alone_ids is None:
        decoded = greedy_decode(translator.model, alone_src, v.bos_idx, v.eos_idx, steps, translator.start_prefix)
        alone_ids, alone_finished = decoded.ids, decoded.finished
        alone_text = translator._finish(a, decoded, t0, alone_src, [], True, "greedy").text
    else:
        alone_text, alone_finished = alone.text, alone.finished
    tgt = torch.tensor([[v.bos_idx] + alone_ids] * 2, dtype=torch.long)
    tgt[1] = v.bos_idx  # the longer sentence's decoder input does not matter here
    log_probs, cache = translator.model.run_with_cache(src, tgt, for_trace, use_src_padding_mask=use_padding_mask)
    memory = lambda s, m: translator.model.encode(s, make_src_mask(s, pad, m))  # noqa: E731
    n = len(a.ids)
    shift = float((memory(src, use_padding_mask)[0, :n] - memory(alone_src, True)[0]).abs().max())
    # The padded sentence's greedy decoding. Row 0 of the pass above is the model reading the padded sentence
    # teacher-forced on the translation alone: where its argmax agrees at every step, that is the padded
    # decoding and no search runs (usually so with the mask on); where not, the search goes on from there.
    padded = greedy_from_guess(translator.model, src[:1], v.bos_idx, v.eos_idx, steps,
                               alone_ids, alone_finished, log_probs[0], use_src_padding_mask=use_padding_mask,
                               forced=len(translator.start_prefix))
    src_axis = a.axis_tokens + [translator.src_vocab.token("pad")] * (width - n)
    return {
        "trace": to_sentence_trace(cache, log_probs, src_axis, [v.token("bos")] + v.decode(alone_ids), index=0),
        "partner": partner,
        "partner_tokens": b.axis_tokens,
        "n_pads": width - n,
        "encoder_shift": shift,
        "alone": alone_text,
        "padded": translator._finish(a, padded, t0, src[:1], [], True, "greedy", None, use_padding_mask).text,
    }

def _greedy_ids(translator, source: Source, done: Translation, limit: int) -> list[int]:
    """The output ids of `done`, a greedy decoding of `source` by this translator under the step limit `limit`
    (ValueError otherwise)."""
    v = translator.tgt_vocab
    ids = v.encode(done.raw_tokens)
    if (done.decoding != "greedy" or done.source.ids != source.ids or v.decode(ids) != done.raw_tokens
            or len(ids) > limit or (not done.finished and len(ids) != limit)  # cut off by a shorter limit
            or len(v.stoi) != len(v.itos)):  # a token string named twice would not encode back to its id
        raise ValueError("not this sentence's plain greedy decoding by this model")
    return ids
