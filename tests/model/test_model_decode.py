"""model.decode: one search loop for greedy (recorded, forced prefix, batched) and beam search; threads (beam search's
own checks: test_model_beam.py)."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from model.inference.decode import (
    allowed_log_probs,
    greedy_decode,
    greedy_decode_batch,
    greedy_from_guess,
    search,
)
from model.inference.translator import Translator
from model.nn.trace import patterns, probs
from model.text.tokenize import tokenize

torch.set_num_threads(1)

UNK, PAD, BOS, EOS = 0, 1, 2, 3


def src_tensor(sv, text: str) -> torch.Tensor:
    return torch.tensor([sv.encode(tokenize(text, "de")) + [sv.eos_idx]], dtype=torch.long)


def teacher_forced(model, src, ids):
    """(log-probs (t, V), {kind: (L, h, i, j) patterns}) of one teacher-forced pass over <bos> + ids."""
    with torch.inference_mode():
        lp, cache = model.run_with_cache(src, torch.tensor([[BOS] + ids]), patterns)
    cfg = model.cfg
    n = {"enc_self": cfg.n_encoder_layers, "dec_self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    return lp[0], {kind: probs(cache, kind, layers) for kind, layers in n.items()}


def decoding_probs(lp):
    """The distribution decoding chooses from: <bos> and <pad> removed, the rest renormalised."""
    p = lp.exp().clone()
    p[..., [BOS, PAD]] = 0.0
    return p / p.sum(-1, keepdim=True)


def check_steps_against_teacher_forcing(model, src, res):
    lp, trace = teacher_forced(model, src, res.ids)
    probs = decoding_probs(lp)
    assert len(res.steps) == len(res.ids) + int(res.finished)
    for k, step in enumerate(res.steps):
        assert step.prefix == [BOS] + res.ids[:k]
        np.testing.assert_allclose(step.top_probs, probs[k, step.top_ids].numpy(), atol=1e-5, rtol=1e-4)
        # the top-k really are the k most probable tokens, best first
        np.testing.assert_allclose(step.top_probs, probs[k].topk(len(step.top_ids)).values.numpy(), atol=1e-5)
        assert step.chosen_prob == pytest.approx(float(probs[k, step.chosen]), abs=1e-5)
        assert BOS not in step.top_ids and PAD not in step.top_ids and sum(step.top_probs) <= 1 + 1e-6
        expected_next = res.ids[k] if k < len(res.ids) else EOS
        assert step.chosen == expected_next
        if not step.forced:
            assert step.chosen == step.top_ids[0]
        L = len(trace["cross"])
        assert step.cross.shape == (L, model.cfg.n_heads, src.shape[1])
        assert step.dec_self.shape == (L, model.cfg.n_heads, k + 1)
        for layer in range(L):
            np.testing.assert_allclose(step.cross[layer], trace["cross"][layer, :, k], atol=1e-5)
            np.testing.assert_allclose(step.dec_self[layer], trace["dec_self"][layer, :, k, : k + 1], atol=1e-5)
    return lp, trace


def check_result_trace(res, lp, trace):
    """The recorded trace equals the teacher-forced pass over <bos> + output."""
    t = len(res.ids) + 1
    assert res.log_probs.shape[1] == t
    torch.testing.assert_close(res.log_probs[0], lp, atol=1e-5, rtol=1e-5)
    for kind in ("enc_self", "dec_self", "cross"):
        np.testing.assert_allclose(probs(res.trace, kind, len(trace[kind])), trace[kind], atol=1e-5)
    assert trace["dec_self"].shape[2] == t


def test_greedy_steps_equal_teacher_forced_pass(trained_model, vocabs, pairs):
    sv, _ = vocabs
    for de, _ in pairs[:2]:
        src = src_tensor(sv, de)
        res = greedy_decode(trained_model, src, BOS, EOS, max_len=30, record=True, top_k=4)
        assert res.finished and len(res.ids) > 2
        assert all(len(s.top_ids) == 4 for s in res.steps)
        lp, trace = check_steps_against_teacher_forcing(trained_model, src, res)
        check_result_trace(res, lp, trace)


def test_greedy_stopped_by_max_len_untrained(tiny_model, vocabs, pairs):
    """An untrained model rarely emits <eos>: max_len stops it, and the record still matches teacher forcing."""
    sv, _ = vocabs
    src = src_tensor(sv, pairs[2][0])
    res = greedy_decode(tiny_model, src, BOS, EOS, max_len=6, record=True)
    if res.finished:  # pragma: no cover - depends on the random init; the seed makes it deterministic
        pytest.fail("expected the untrained model not to stop by itself within 6 tokens")
    assert len(res.ids) == 6 and len(res.steps) == 6
    assert not any(s.forced for s in res.steps)
    lp, trace = check_steps_against_teacher_forcing(tiny_model, src, res)
    # the trace covers every output token as a decoder query (<bos> + output), like Translation.decoder_input
    check_result_trace(res, lp, trace)


@pytest.mark.parametrize("which", ["trained", "untrained"])
def test_greedy_from_a_guess_is_the_greedy_decoding_whatever_the_guess(which, trained_model, tiny_model, vocabs,
                                                                      pairs):
    """The model checks a guess of its output by one teacher-forced pass (Masks: the translation alone, checked on
    the padded sentence): a right guess is taken without a search, a wrong, cut or empty one is searched on from
    where the model disagrees. Either way the result is greedy_decode's, with or without the padding mask."""
    model = trained_model if which == "trained" else tiny_model
    sv, tv = vocabs
    for text, _ in pairs[:3]:
        src = src_tensor(sv, text)
        padded = torch.cat([src, torch.full((1, 3), PAD)], dim=1)  # (1, s + 3): pads the mask can hide, or not
        for source, use_mask in ((src, True), (padded, True), (padded, False)):
            for max_len in (30, 4):
                want = greedy_decode(model, source, BOS, EOS, max_len, use_src_padding_mask=use_mask)
                other = tv.stoi["snow"] if want.ids[:1] != [tv.stoi["snow"]] else tv.stoi["dog"]
                guesses = [(want.ids, want.finished), (want.ids[:1], False), ([], False),
                           (want.ids[:1] + [other] + want.ids[2:], want.finished), (want.ids + [other], True)]
                if want.ids:
                    guesses.append((want.ids[:-1], True))  # stops one token early
                for guess, finished in guesses:
                    with torch.inference_mode():
                        lp = model(source, torch.tensor([[BOS] + guess]), use_src_padding_mask=use_mask)
                    got = greedy_from_guess(model, source, BOS, EOS, max_len, guess, finished, lp[0],
                                            use_src_padding_mask=use_mask)
                    assert (got.ids, got.finished) == (want.ids, want.finished), (text, use_mask, max_len, guess)
    with pytest.raises(ValueError, match="cannot check"):  # fewer rows than guessed tokens: nothing to check them by
        greedy_from_guess(model, src, BOS, EOS, 30, [5, 6], True, lp[0][:1])


def test_greedy_without_record_keeps_nothing(trained_model, vocabs, pairs):
    sv, _ = vocabs
    src = src_tensor(sv, pairs[0][0])
    plain = greedy_decode(trained_model, src, BOS, EOS, max_len=30)
    recorded = greedy_decode(trained_model, src, BOS, EOS, max_len=30, record=True)
    assert plain.steps == [] and plain.trace is None
    assert plain.ids == recorded.ids and plain.finished == recorded.finished


def test_forced_prefix_is_kept_and_decoding_continues_greedily(trained_model, vocabs, pairs):
    sv, tv = vocabs
    src = src_tensor(sv, pairs[0][0])  # "A man rides a bike."
    free = greedy_decode(trained_model, src, BOS, EOS, max_len=30, record=True)
    alt = [i for i in free.steps[1].top_ids if i != free.ids[1]][0]  # the runner-up at step 2
    prefix = [free.ids[0], alt]
    res = greedy_decode(trained_model, src, BOS, EOS, max_len=30, prefix=prefix, record=True)
    assert res.ids[:2] == prefix
    assert [s.forced for s in res.steps[:2]] == [True, True]
    assert not any(s.forced for s in res.steps[2:]) and len(res.steps) > 2
    assert res.steps[1].chosen == alt and res.steps[1].top_ids[0] != alt
    check_steps_against_teacher_forcing(trained_model, src, res)
    # a prefix that forces a token the model would never choose
    odd = [tv.stoi["snow"], tv.stoi["snow"], tv.stoi["snow"]]
    res = greedy_decode(trained_model, src, BOS, EOS, max_len=30, prefix=odd, record=True)
    assert res.ids[:3] == odd and [s.forced for s in res.steps[:3]] == [True] * 3
    check_steps_against_teacher_forcing(trained_model, src, res)
    # and without record the same ids come out
    assert greedy_decode(trained_model, src, BOS, EOS, max_len=30, prefix=odd).ids == res.ids


def test_translator_trace_with_prefix_words(translator, pairs):
    full = translator.trace(pairs[0][0])
    assert full.text == pairs[0][1] and full.finished
    assert len(full.steps) == len(full.raw_tokens) + 1
    assert full.decoder_input == ["<bos>"] + full.raw_tokens
    for layer in full.trace.attn["dec_self"]:
        assert layer["probs"].shape[1] == len(full.decoder_input)  # (h, i, j)
    forced = translator.trace(pairs[0][0], prefix=["A", "woman"])
    assert forced.raw_tokens[:2] == ["A", "woman"]
    assert [s.forced for s in forced.steps[:2]] == [True, True]


def test_greedy_batch_equals_per_sentence(trained_model, vocabs, pairs):
    sv, _ = vocabs
    texts = [de for de, _ in pairs] + ["Ein Hund spielt im Schnee.", "Frau"]
    srcs = [src_tensor(sv, t)[0] for t in texts]
    width = max(len(s) for s in srcs)
    batch = torch.full((len(srcs), width), sv.pad_idx, dtype=torch.long)
    for r, s in enumerate(srcs):
        batch[r, : len(s)] = s
    got = [d.ids for d in greedy_decode_batch(trained_model, batch, BOS, EOS, max_len=20)]
    want = [greedy_decode(trained_model, s[None], BOS, EOS, max_len=20).ids for s in srcs]
    assert got == want
    assert len(set(map(tuple, got))) >= 4  # different sentences really give different outputs


def test_greedy_batch_equals_per_sentence_untrained(tiny_model, vocabs, pairs):
    """Also when max_len stops the decoding (no <eos>)."""
    sv, _ = vocabs
    srcs = [src_tensor(sv, de)[0] for de, _ in pairs]
    width = max(len(s) for s in srcs)
    batch = torch.full((len(srcs), width), sv.pad_idx, dtype=torch.long)
    for r, s in enumerate(srcs):
        batch[r, : len(s)] = s
    got = greedy_decode_batch(tiny_model, batch, BOS, EOS, max_len=5)
    want = [greedy_decode(tiny_model, s[None], BOS, EOS, max_len=5) for s in srcs]
    assert [(d.ids, d.finished) for d in got] == [(d.ids, d.finished) for d in want]


# --------------------------------------------------------------------------- threads


def _summary(tr):
    return {
        "text": tr.text,
        "tokens": tr.tokens,
        "top_probs": [s.top_probs for s in tr.steps],
        "top_ids": [s.top_ids for s in tr.steps],
        "cross": [s.cross for s in tr.steps],
        "probs": {k: tr.trace.probs(k) for k in ("enc_self", "dec_self", "cross")},
        "src": tr.source.tokens,
    }


def _same(a, b):
    assert a["text"] == b["text"] and a["tokens"] == b["tokens"] and a["src"] == b["src"]
    assert a["top_ids"] == b["top_ids"]
    np.testing.assert_allclose(np.array(a["top_probs"]), np.array(b["top_probs"]), atol=1e-6)
    for x, y in zip(a["cross"], b["cross"], strict=True):
        np.testing.assert_allclose(x, y, atol=1e-6)
    for k in a["probs"]:
        assert a["probs"][k].shape == b["probs"][k].shape
        np.testing.assert_allclose(a["probs"][k], b["probs"][k], atol=1e-6)


def test_threads_share_one_translator_and_each_get_their_own_trace(translator, pairs):
    texts = [de for de, _ in pairs] + [
        "Ein Hund liest ein Buch.",
        "Zwei Kinder spielen.",
        "Eine Frau fährt im Schnee.",
        "Ein Mann isst einen Apfel und liest ein Buch.",
    ]
    assert len(texts) == 8
    expected = [_summary(translator.trace(t)) for t in texts]
    # every sentence really is different (otherwise a mix-up could not be seen)
    assert len({e["text"] + "|" + " ".join(e["src"]) for e in expected}) == 8
    assert len({e["probs"]["cross"].shape for e in expected}) > 1
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait(timeout=30)
        return i, _summary(translator.trace(texts[i])), translator.translate(texts[i]).text

    with ThreadPoolExecutor(max_workers=8) as pool:
        for round_ in range(3):
            order = list(range(8)) if round_ % 2 == 0 else list(reversed(range(8)))
            for i, got, text in pool.map(work, order):
                _same(got, expected[i])
                assert text == expected[i]["text"]


def test_untrained_twin_is_fixed_and_leaves_the_global_rng_alone(translator, pairs):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = translator.untrained_twin(seed=0)
    b = translator.untrained_twin(seed=0)
    assert torch.equal(torch.random.get_rng_state(), before)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.model.src_embed.lut.weight, translator.model.src_embed.lut.weight)
    assert a.src_vocab is translator.src_vocab and "untrained" in a.metrics["note"]
    assert isinstance(a, Translator) and isinstance(a.translate(pairs[0][0], max_len=4).text, str)


def test_incremental_cached_steps_equal_teacher_forced_pass(trained_model, tiny_model, vocabs, pairs):
    """decode_step with the key/value cache gives, position by position, the teacher-forced distributions."""
    from model.inference.decode import decode_step
    from model.nn.transformer import make_src_mask

    sv, _ = vocabs
    for model in (trained_model, tiny_model):
        for de, _ in pairs:
            src = src_tensor(sv, de)
            res = greedy_decode(model, src, BOS, EOS, max_len=8)
            tgt = torch.tensor([[BOS] + res.ids])
            with torch.inference_mode():
                lp = model(src, tgt)  # (1, t, V) teacher forced, fused path
                src_mask = make_src_mask(src, model.cfg.pad_idx)
                memory = model.encode(src, src_mask)
                cache = model.new_cache()
                for i in range(tgt.shape[1]):
                    step_lp = decode_step(model, memory, src_mask, tgt[:, i : i + 1], cache)[0]
                    torch.testing.assert_close(step_lp, lp[0, i], atol=1e-4, rtol=1e-4)
                assert cache["len"] == tgt.shape[1]


def test_reordered_cache_follows_the_selected_rows(trained_model, vocabs, pairs):
    """Beam search reorders cached keys/values; the result must equal decoding those rows afresh."""
    from model.inference.decode import decode_step
    from model.nn.transformer import make_src_mask, reorder_cache

    sv, _ = vocabs
    src = src_tensor(sv, pairs[0][0])
    with torch.inference_mode():
        src_mask = make_src_mask(src, trained_model.cfg.pad_idx)
        memory = trained_model.encode(src, src_mask)
        a, b = 5, 9  # two different first tokens in a batch of two beams
        cache = trained_model.new_cache()
        decode_step(trained_model, memory, src_mask, torch.tensor([[BOS]]), cache)
        reorder_cache(cache, torch.tensor([0, 0]))
        decode_step(trained_model, memory.expand(2, -1, -1), src_mask.expand(2, -1, -1, -1),
                    torch.tensor([[a], [b]]), cache)
        reorder_cache(cache, torch.tensor([1]))  # keep only the beam that read b
        got = decode_step(trained_model, memory, src_mask, torch.tensor([[7]]), cache)[0]
        lp = trained_model(src, torch.tensor([[BOS, b, 7]]))
    torch.testing.assert_close(got, lp[0, 2], atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- one loop: what it may generate, when it stops


@pytest.fixture
def bos_lover(make_model):
    """An untrained model whose generator prefers <bos> and <pad> to everything else."""
    model = make_model(seed=2)
    with torch.no_grad():
        model.generator.proj.bias[BOS] = 20.0
        model.generator.proj.bias[PAD] = 19.0
    return model


def test_allowed_log_probs_removes_and_renormalises():
    lp = torch.log_softmax(torch.tensor([[0.0, 3.0, 5.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0]]), -1)
    out = allowed_log_probs(lp, torch.tensor([BOS, PAD]))
    assert torch.isneginf(out[:, [BOS, PAD]]).all()
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2))
    torch.testing.assert_close(out[1].exp()[[UNK, EOS, 4]], torch.full((3,), 1 / 3))  # <unk> stays allowed


def test_bos_and_pad_are_never_generated(bos_lover, vocabs, pairs):
    sv, _ = vocabs
    src = src_tensor(sv, pairs[0][0])
    with torch.inference_mode():
        assert int(bos_lover(src, torch.tensor([[BOS]]))[0, 0].argmax()) == BOS  # the raw model wants <bos>
    res = greedy_decode(bos_lover, src, BOS, EOS, max_len=8, record=True, top_k=6)
    assert res.ids and not {BOS, PAD} & set(res.ids)
    check_steps_against_teacher_forcing(bos_lover, src, res)  # steps report the distribution the choice used
    for step in res.steps:
        assert step.chosen == step.top_ids[0] and step.chosen_prob == pytest.approx(step.top_probs[0])
        assert 0 < sum(step.top_probs) <= 1 + 1e-6
    srcs = [src_tensor(sv, de)[0] for de, _ in pairs]
    batch = torch.full((len(srcs), max(map(len, srcs))), PAD, dtype=torch.long)
    for r, s in enumerate(srcs):
        batch[r, : len(s)] = s
    for dec in (greedy_decode_batch(bos_lover, batch, BOS, EOS, max_len=6)
                + search(bos_lover, batch, BOS, EOS, 6, 3, 0.6)):
        assert dec.ids and not {BOS, PAD} & set(dec.ids)


def test_a_prefix_cannot_force_bos_or_pad(trained_model, vocabs, pairs):
    src = src_tensor(vocabs[0], pairs[0][0])
    for bad in (BOS, PAD):
        with pytest.raises(ValueError, match="cannot hold the start token or <pad>"):
            greedy_decode(trained_model, src, BOS, EOS, max_len=5, prefix=[5, bad])
    with pytest.raises(ValueError, match="recorded"):
        search(trained_model, src, BOS, EOS, 5, beam_size=2, record=True)


