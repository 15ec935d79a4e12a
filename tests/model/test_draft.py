"""model.draft: an int8 draft guesses a recorded greedy decoding's tokens; the model's traced pass checks them.

Whatever the draft guesses, the result must be the model's own greedy decoding: the same ids, the
steps' candidates and probabilities from the model's distributions, the same trace.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from test_model_decode import BOS, EOS, check_result_trace, check_steps_against_teacher_forcing, src_tensor

from model.inference import decode
from model.inference.decode import greedy_decode
from model.inference.draft import (
    MIN_GENERATOR_BYTES,
    Draft,
    Int8Rows,
    build_draft,
    draft_at_load,
    int8_linears,
    quantization_available,
    worth_a_draft,
)
from model.inference.translator import Translator
from model.nn.config import ModelConfig
from model.nn.hooks import gate_hooks
from model.nn.transformer import EncoderDecoder

pytestmark = pytest.mark.skipif(not quantization_available(), reason="this torch has no int8 engine")


def same_record(a, b):
    """Two recorded decodings agree: ids, end, every step and the whole trace."""
    assert a.ids == b.ids and a.finished == b.finished
    assert len(a.steps) == len(b.steps)
    for x, y in zip(a.steps, b.steps):
        assert (x.prefix, x.top_ids, x.chosen, x.forced) == (y.prefix, y.top_ids, y.chosen, y.forced)
        np.testing.assert_allclose(x.top_probs, y.top_probs, atol=1e-5)
        np.testing.assert_allclose(x.cross, y.cross, atol=1e-5)
        np.testing.assert_allclose(x.dec_self, y.dec_self, atol=1e-5)
    torch.testing.assert_close(a.log_probs, b.log_probs, atol=1e-5, rtol=1e-5)
    assert sorted(a.trace) == sorted(b.trace)  # the same points cached
    for name in a.trace:
        torch.testing.assert_close(a.trace[name], b.trace[name], atol=1e-5, rtol=1e-5, msg=name)


def test_the_draft_is_int8_and_shares_the_embeddings(trained_model):
    draft = Draft(trained_model)
    assert draft.tgt_embed is trained_model.tgt_embed  # shared, not copied
    linears = [m for m in draft.modules() if type(m) is torch.nn.Linear]
    assert linears == []  # every projection of the decoder and the generator was replaced
    quantized = [m for m in draft.modules() if isinstance(m, Int8Rows)]
    n_dec = len(trained_model.decoder)
    assert len(quantized) == n_dec * (4 + 4 + 2) + 1  # self Q K V O, cross Q K V O, FFN 2, generator
    # the norms are the model's own tensors, not copies
    assert draft.decoder[0].sub[0].norm.weight is trained_model.decoder[0].sub[0].norm.weight
    # the model itself is untouched
    assert all(type(m.w_q) is torch.nn.Linear for m in [trained_model.decoder[0].attn])


@pytest.mark.parametrize("which", ["trained", "untrained", "t5-like"])
def test_drafted_record_equals_the_unaided_one(which, trained_model, tiny_model, make_model, vocabs, pairs):
    """The draft shares what it does not quantize: the target embeddings, the norms, a relative-position bias."""
    from test_families_nn import T5_LIKE

    model = {"trained": trained_model, "untrained": tiny_model}.get(which) or make_model(**T5_LIKE)
    draft = build_draft(model)
    sv, _ = vocabs
    for de, _ in pairs[:6]:
        src = src_tensor(sv, de)
        for max_len in (30, 3):
            plain = greedy_decode(model, src, BOS, EOS, max_len, record=True, top_k=4)
            drafted = greedy_decode(model, src, BOS, EOS, max_len, record=True, top_k=4, draft=draft)
            same_record(plain, drafted)
            lp, trace = check_steps_against_teacher_forcing(model, src, drafted)
            check_result_trace(drafted, lp, trace)


def test_a_draft_that_guesses_wrong_still_gives_the_models_greedy_output(trained_model, make_model, vocabs, pairs,
                                                                       monkeypatch):
    """A draft of another (random) model disagrees at almost every step: each round must keep the model's token."""
    wrong = build_draft(make_model(seed=7))
    passes = []
    real = decode._teacher_forced
    monkeypatch.setattr(decode, "_teacher_forced", lambda *a: passes.append(1) or real(*a))
    sv, _ = vocabs
    for de, _ in pairs[:6]:
        src = src_tensor(sv, de)
        plain = greedy_decode(trained_model, src, BOS, EOS, 30, record=True)
        passes.clear()
        drafted = greedy_decode(trained_model, src, BOS, EOS, 30, record=True, draft=wrong)
        assert plain.finished and len(plain.ids) > 2
        assert len(passes) > 2  # the guesses were corrected, round after round
        # and not once per token: after DRAFT_ROUNDS wrong guesses the model guesses the rest itself
        assert len(passes) <= decode.DRAFT_ROUNDS + 2, len(passes)
        same_record(plain, drafted)


def test_forced_prefix_and_switched_off_heads_with_a_draft(trained_model, vocabs, pairs):
    sv, tv = vocabs
    draft = build_draft(trained_model)
    src = src_tensor(sv, pairs[0][0])
    odd = [tv.stoi["snow"], tv.stoi["snow"]]
    gates = {"cross": torch.ones(len(trained_model.decoder), trained_model.cfg.n_heads)}
    gates["cross"][0, 0] = 0.0
    off = gate_hooks(gates)
    for prefix, hooks in ((odd, ()), ((), off), (odd, off)):
        plain = greedy_decode(trained_model, src, BOS, EOS, 30, prefix=prefix, record=True, fwd_hooks=hooks)
        drafted = greedy_decode(trained_model, src, BOS, EOS, 30, prefix=prefix, record=True, fwd_hooks=hooks,
                                draft=draft)
        same_record(plain, drafted)
        if prefix:
            assert drafted.ids[:2] == odd and [s.forced for s in drafted.steps[:3]] == [True, True, False]


def test_translator_uses_a_draft_only_where_it_pays(translator, pairs):
    """The tests' tiny models get none, a model of the shipped one's size does; one asked for gets one and translates
    the same."""
    assert translator.draft is None and not worth_a_draft(translator.model)
    shipped = ModelConfig(src_vocab_size=8000, tgt_vocab_size=7931, d_model=256, n_heads=4, n_encoder_layers=1,
                          n_decoder_layers=1, d_ff=64)  # the shipped model's generator: 256 x 7931
    assert worth_a_draft(EncoderDecoder(shipped)) == quantization_available()
    # (a source table twice the generator's: the int8 copy must stay within DRAFT_MEMORY_SHARE of the weights)
    rows = MIN_GENERATOR_BYTES // (4 * 64)
    big = ModelConfig(src_vocab_size=2 * rows, tgt_vocab_size=rows, d_model=64, n_heads=2, n_encoder_layers=1,
                      n_decoder_layers=1, d_ff=64)
    assert worth_a_draft(EncoderDecoder(big)) and not worth_a_draft(EncoderDecoder(big.__class__(
        **{**big.__dict__, "tgt_vocab_size": big.tgt_vocab_size - 1})))
    # Where the decoder layers outweigh the generator a wrong guess's checking pass costs more than int8 saves:
    # Flan-T5-base's shape gets none, NLLB-600M's does (built on the meta device: shapes only, no memory).
    flan = ModelConfig(src_vocab_size=32128, tgt_vocab_size=32128, d_model=768, n_heads=12, n_encoder_layers=1,
                       n_decoder_layers=12, d_ff=2048, ff_gated=True, bias=False, positions="relative", norm="rms")
    nllb = ModelConfig(src_vocab_size=256206, tgt_vocab_size=256206, d_model=1024, n_heads=16, n_encoder_layers=1,
                       n_decoder_layers=12, d_ff=4096, max_len=1024)
    # T5Gemma S-S's shape: Gemma's 256k-row generator is most of its weights; its int8 copy would take the process
    # past 1.5× its weights
    gemma_ss = ModelConfig(src_vocab_size=256000, tgt_vocab_size=256000, d_model=512, n_heads=8, n_encoder_layers=8,
                           n_decoder_layers=8, d_ff=1024, ff_gated=True, bias=False, share_embeddings=True)
    with torch.device("meta"):
        assert not worth_a_draft(EncoderDecoder(flan, init=False))
        assert worth_a_draft(EncoderDecoder(nllb, init=False)) == quantization_available()
        assert not worth_a_draft(EncoderDecoder(gemma_ss, init=False))
    drafted = Translator(translator.model, translator.src_vocab, translator.tgt_vocab, draft=True)
    assert drafted.draft is not None
    for de, _ in pairs[:4]:
        a, b = translator.trace(de), drafted.trace(de)
        assert a.raw_tokens == b.raw_tokens and a.text == b.text
        assert [s.top_tokens for s in a.steps] == [s.top_tokens for s in b.steps]
        np.testing.assert_allclose(a.trace.log_probs, b.trace.log_probs, atol=1e-5)


def test_only_a_trace_starts_building_the_draft(translator, pairs, monkeypatch):
    """A model that wants a draft gets none while it only translates; its first trace starts the build, and
    traces before and after the draft is there give the same result."""
    import time

    from model.inference import draft as draft_module

    monkeypatch.setattr(draft_module, "MIN_GENERATOR_BYTES", 0)  # the tiny test model "wants" one now
    monkeypatch.setattr(draft_module, "DRAFT_SHARE", 0.0)
    tr = Translator(translator.model, translator.src_vocab, translator.tgt_vocab)
    tr.translate(pairs[0][0])
    time.sleep(0.2)
    assert tr.draft is None and not tr._draft_started
    first = tr.trace(pairs[0][0])
    assert tr._draft_started
    deadline = time.time() + 30
    while tr.draft is None and time.time() < deadline:
        time.sleep(0.05)
    assert isinstance(tr.draft, Draft)
    again = tr.trace(pairs[0][0])
    assert first.raw_tokens == again.raw_tokens
    assert [s.top_tokens for s in first.steps] == [s.top_tokens for s in again.steps]


@pytest.mark.parametrize("bias", [True, False])
def test_int8_rows_is_torch_s_per_channel_int8_linear_in_blocks(bias):
    """Blocks of rows (the last one shorter), each row with its own scale: the product is torch.ao's dynamic int8
    Linear with per-channel weights (its own observer's scales), and the float32 one to int8 precision."""
    import warnings

    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 103, bias=bias)
    with torch.no_grad():
        linear.weight[7] *= 50  # a row far larger than the others keeps its own scale
    q = int8_linears([linear], rows=16, threads=2)[0]
    assert len(q.packed) == 7 and (q.in_features, q.out_features) == (48, 103)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(linear), {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig})
    for x in (torch.randn(1, 48), torch.randn(5, 48)):
        got = q(x)
        torch.testing.assert_close(got, reference(x), atol=1e-5, rtol=1e-5)
        want = linear(x).detach()
        ok = (got - want).abs() <= 0.05 * want.abs().amax(-1, keepdim=True).clamp_min(1.0)
        assert bool(ok[:, torch.arange(103) != 7].all())  # the large row's error is the activation's 7-bit step


def test_a_model_with_a_very_large_generator_gets_its_draft_at_load(translator, pairs, monkeypatch):
    """Where the generator is very large the draft is built with the Translator (the model loading), so the first
    trace is guessed too and nothing is built after it; the trace is the model's own."""
    from model.inference import draft as draft_module

    model = translator.model
    assert not draft_at_load(model)
    plain = Translator(model, translator.src_vocab, translator.tgt_vocab, draft=False)
    monkeypatch.setattr(draft_module, "MIN_GENERATOR_BYTES", 0)
    monkeypatch.setattr(draft_module, "DRAFT_SHARE", 0.0)
    monkeypatch.setattr(draft_module, "DRAFT_AT_LOAD_BYTES", 0)
    monkeypatch.setattr(draft_module, "ROWS_PER_BLOCK", 16)  # the generator in several blocks
    assert draft_at_load(model)
    tr = Translator(model, translator.src_vocab, translator.tgt_vocab)
    built = tr.draft
    assert isinstance(built, Draft) and tr._draft_started
    assert len(built.generator.proj.packed) == -(-model.cfg.tgt_vocab_size // 16)
    got, want = tr.trace(pairs[0][0]), plain.trace(pairs[0][0])
    assert tr.draft is built and not any(t.name == "atlas-draft" for t in threading.enumerate())
    assert got.raw_tokens == want.raw_tokens
    assert [s.top_tokens for s in got.steps] == [s.top_tokens for s in want.steps]
    np.testing.assert_allclose(got.trace.log_probs, want.trace.log_probs, atol=1e-5)


@pytest.mark.parametrize("which", ["trained", "t5-like"])
def test_a_corrected_guess_goes_on_from_the_drafts_cache(which, trained_model, make_model, vocabs, pairs):
    """After a wrong guess the draft keeps its cache up to the corrected token and decodes only what follows: the
    tokens are those of a fresh decoding of the same forced start, in fewer steps."""
    from test_families_nn import T5_LIKE

    model = trained_model if which == "trained" else make_model(**T5_LIKE)
    draft = build_draft(model)
    calls = []
    real = draft.decode
    draft.decode = lambda *a, **k: calls.append(1) or real(*a, **k)
    sv, _ = vocabs
    src = src_tensor(sv, pairs[1][0])
    with torch.inference_mode():
        mask = (src != model.cfg.pad_idx).unsqueeze(1).unsqueeze(1)  # (1, 1, 1, s)
        memory = model.encode(src, mask)
        banned = torch.tensor(decode.never_generated(model, BOS, EOS))
        cache = draft.new_cache()
        first, _ = decode._draft_greedy(draft, memory, mask, BOS, EOS, 30, [], (), banned, cache)
        assert len(first) > 4
        known = first[:3] + [next(t for t in range(5, 20) if t != first[3])]  # a "corrected" 4th token
        calls.clear()
        resumed = decode._draft_greedy(draft, memory, mask, BOS, EOS, 30, known, (), banned, cache)
        steps_resumed = len(calls)
        calls.clear()
        fresh = decode._draft_greedy(draft, memory, mask, BOS, EOS, 30, known, (), banned, draft.new_cache())
    assert resumed == fresh
    assert steps_resumed == len(calls) - 4  # <bos> and the three kept tokens were not decoded again
