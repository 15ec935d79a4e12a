"""model.translator: the <unk> rule, how a Translation says it was decoded, and the data-only API pages use."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from model.inference.translator import LONGER_EXAMPLE, Source, Translator
from model.inference.unknown import replace_unknown
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder
from model.text.tokenize import tokenize
from model.text.vocab import N_SPECIALS, SPECIALS, Vocab

torch.set_num_threads(1)

MERKEL = "Angela Merkel besucht Wolfsburg."  # only "besucht" and "." are known
MATCH = "Um 15:30 Uhr spielen 22 Spieler Fußball."  # "22" is known, "15:30" is not: both are numbers


# --------------------------------------------------------------------------- the <unk> rule


def test_replace_unknown_copies_unreadable_words_by_attention_each_once():
    src = ["Ein", "Zebra", "und", "7", "Gnus", "."]
    copyable = [False, True, False, True, True, False]
    tokens = ["A", "<unk>", "and", "<unk>", "<unk>", "<unk>", "<unk>"]
    t, L, h, s = len(tokens), 2, 3, len(src) + 1
    cross = np.full((t, L, h, s), 0.01, dtype=np.float32)
    cross[1, :, :, 2] = 0.9  # looks at "und", known: never copied ...
    cross[1, :, :, 1] = 0.5  # ... so the most attended copyable word, "Zebra", is
    cross[3, :, :, 1] = 0.9  # "Zebra" again: already used, so the next best free one, "Gnus"
    cross[3, :, :, 4] = 0.4
    cross[3, 0, 0, 3] = 1.5  # one head prefers "7", but the mean over layers and heads does not
    cross[4, :, :, 6] = 5.0  # the source <eos> is never copied; "7" is what is left
    out = replace_unknown(tokens, cross, src, copyable)
    assert out == ["A", "Zebra", "and", "Gnus", "7", "<unk>", "<unk>"]  # nothing left: <unk> stays visible
    assert tokens[1] == "<unk>"  # the input list is not modified
    assert replace_unknown(tokens, cross[:2], src, copyable)[3:] == ["<unk>"] * 4  # no attention row, no copy
    assert replace_unknown(tokens, cross, src, [False] * len(src)) == tokens


def test_copyable_source_words_are_unknown_words_and_numbers():
    source = Source(["Um", "15:30", "Uhr", "22", "Wolfsburg", "zwei"], [], [False, True, False, False, True, False])
    assert source.copyable == [False, True, False, True, True, False]


@pytest.fixture(scope="module")
def unk_translator():
    """A tiny untrained model that says <unk> at every step, with vocabularies built here."""
    sv = Vocab.build([tokenize("besucht Um Uhr spielen 22 Spieler Fußball .", "de")], min_freq=1)
    tv = Vocab.build([tokenize("A visits at players play soccer .", "en")], min_freq=1)
    cfg = ModelConfig(len(sv), len(tv), d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, attn_dropout=0.0, max_len=64)
    torch.manual_seed(5)
    model = EncoderDecoder(cfg)
    with torch.no_grad():
        model.generator.proj.bias[tv.unk_idx] = 30.0
    return Translator(model, sv, tv)


@pytest.mark.parametrize("text, copied", [(MERKEL, ["Angela", "Merkel", "Wolfsburg"]), (MATCH, ["15:30", "22"])])
def test_unknown_outputs_copy_only_unreadable_source_words(unk_translator, text, copied):
    tr = unk_translator
    source = tr.prepare(text)
    res = tr.translate(text, max_len=6)
    assert res.raw_tokens == ["<unk>"] * 6
    known = [t for t, ok in zip(source.tokens, source.copyable) if not ok]
    assert not set(known) & set(res.tokens), "a word the model could read was copied"
    assert sorted(t for t in res.tokens if t != "<unk>") == sorted(copied)  # each candidate exactly once
    assert res.tokens.count("<unk>") == 6 - len(copied) and "<unk>" in res.text
    # one rule on every path: traced, beam, batched, and switched off
    assert tr.trace(text, max_len=6).tokens == res.tokens
    assert tr.translate(text, beam=3, max_len=6).raw_tokens == ["<unk>"] * 6
    batch = tr.translate_batch([text, MERKEL + " " + MATCH, text], beam=1)
    assert batch[0] == batch[2] == tr.translate(text).text
    assert tr.translate(text, max_len=6, replace_unk=False).tokens == ["<unk>"] * 6


def test_unknown_replacement_follows_the_steps_cross_attention(unk_translator):
    tr = unk_translator
    res = tr.trace(MERKEL, max_len=1)
    weights = res.steps[0].cross.mean(axis=(0, 1))  # (s,)
    candidates = [k for k, ok in enumerate(res.source.copyable) if ok]
    best = max(candidates, key=lambda k: weights[k])
    assert res.tokens == [res.source.tokens[best]]


# --------------------------------------------------------------------------- how it was decoded, as data


def test_translation_says_how_it_was_decoded(translator, pairs):
    de = pairs[0][0]
    assert translator.translate(de).decoding == "greedy"
    assert translator.translate(de, beam=5).decoding == "beam 5"
    assert translator.trace(de).decoding == "greedy"
    assert translator.trace(de, prefix=["A", "woman"]).decoding == "greedy after a forced prefix of 2 tokens"
    assert translator.trace(de, prefix=["A"]).decoding == "greedy after a forced prefix of 1 token"
    assert translator.translate("", beam=3).decoding == "beam 3"


def test_beam_translation_reports_finished_honestly(translator, pairs):
    twin = translator.untrained_twin(seed=0)
    cut = twin.translate(pairs[1][0], beam=3, max_len=4)
    assert len(cut.raw_tokens) == 4 and cut.finished is False
    assert translator.translate(pairs[1][0], beam=3).finished is True


def test_steps_carry_token_strings(translator, pairs):
    res = translator.trace(pairs[0][0], prefix=["A", "woman"])
    v = translator.tgt_vocab
    assert res.steps[0].prefix_tokens == ["<bos>"]
    for k, step in enumerate(res.steps):
        assert step.prefix_tokens == v.decode(step.prefix) == ["<bos>"] + res.raw_tokens[:k]
        assert step.top_tokens == v.decode(step.top_ids)
        assert step.chosen_token == v.itos[step.chosen]
    assert [s.chosen_token for s in res.steps] == res.raw_tokens + ["<eos>"]
    assert res.trace.tgt_tokens == res.decoder_input


def test_embedding_matrix_parameter_counts_and_specials(translator):
    for side, vocab, lut in (("src", translator.src_vocab, translator.model.src_embed.lut),
                             ("tgt", translator.tgt_vocab, translator.model.tgt_embed.lut)):
        matrix, tokens = translator.embedding_matrix(side)
        assert matrix.dtype == np.float32 and matrix.shape == (len(vocab), translator.cfg.d_model)
        assert tokens == vocab.itos and tokens is not vocab.itos
        np.testing.assert_array_equal(matrix, lut.weight.detach().numpy())
        with pytest.raises(ValueError, match="read-only"):  # a view of the shared model: nobody may write to it
            matrix[:] = 0
        assert lut.weight.abs().sum() > 0
    with pytest.raises(ValueError, match="'src' or 'tgt'"):
        translator.embedding_matrix("de")
    counts = translator.parameter_counts()
    assert sum(counts.values()) == sum(p.numel() for p in translator.model.parameters())
    assert translator.n_specials == N_SPECIALS == len(SPECIALS) == 4


# --------------------------------------------------------------------------- heads switched off


def test_off_heads_build_the_gates_and_their_hooks(translator):
    cfg = translator.cfg
    assert translator.gates(None) is None and translator.gates([]) is None and translator.hooks(None) == []
    off = [("cross", 1, 2), ("enc_self", 0, 0), ("cross", 1, 2)]
    hm = translator.gates(off)
    # a hook only where a gate is 0: the other layers' products would change nothing
    assert [name for name, _ in translator.hooks(off)] == ["encoder.0.attn.hook_z", "decoder.1.cross_attn.hook_z"]
    assert {k: tuple(v.shape) for k, v in hm.items()} == {
        "enc_self": (cfg.n_encoder_layers, cfg.n_heads), "dec_self": (cfg.n_decoder_layers, cfg.n_heads),
        "cross": (cfg.n_decoder_layers, cfg.n_heads)}
    assert [(k, *map(int, idx)) for k, v in hm.items() for idx in (v == 0).nonzero()] == [("enc_self", 0, 0),
                                                                                           ("cross", 1, 2)]


@pytest.mark.parametrize("off, message", [
    ([("decoder", 0, 0)], "unknown attention kind 'decoder'"),
    ([("cross", 2, 0)], "cross layer 2 is out of range: 0-based, 0 to 1"),
    ([("enc_self", 0, 4)], "enc_self head 4 is out of range: 0-based, 0 to 3"),
    ([("dec_self", -1, 0)], "dec_self layer -1 is out of range"),
    ([("cross", 0.0, 1)], "cross layer 0.0 is out of range"),
    ([("cross", 0)], r"\(kind, layer, head\) triples"),
])
def test_off_heads_are_validated(translator, pairs, off, message):
    with pytest.raises(ValueError, match=message):
        translator.translate(pairs[0][0], off_heads=off)


def test_off_heads_change_what_every_entry_point_computes(translator, pairs):
    de, en = pairs[0]
    off = [("cross", layer, head) for layer in range(2) for head in range(4)]  # no cross-attention at all
    gold = tokenize(en, "en")
    assert translator.score(de, gold, off) < translator.score(de, gold) - 1.0
    blind = translator.translate(de, off_heads=off)
    assert blind.text != en
    assert translator.trace(de, off_heads=off).text == blind.text
    assert translator.translate_batch([de], off_heads=off) == [blind.text]
    assert isinstance(translator.translate(de, beam=3, off_heads=off).text, str)  # beam search takes them too
    with torch.inference_mode():
        src = torch.tensor([translator.prepare(de).ids])
        tgt = torch.tensor([[translator.tgt_vocab.bos_idx] + translator.tgt_vocab.encode(gold)])
        lp = translator.model.run_with_hooks(src, tgt, translator.hooks(off))
    ids = translator.tgt_vocab.encode(gold) + [translator.tgt_vocab.eos_idx]
    assert translator.score(de, gold, off) == pytest.approx(float(sum(lp[0, k, i] for k, i in enumerate(ids))),
                                                            abs=1e-4)


# --------------------------------------------------------------------------- the padding demonstration


def test_padded_batch_chooses_a_longer_partner(translator, pairs):
    de = pairs[0][0]
    demo = translator.padded_batch(de)
    assert demo["partner"] == LONGER_EXAMPLE
    assert demo["partner_tokens"] == translator.prepare(LONGER_EXAMPLE).axis_tokens
    st = demo["trace"]
    n_real = len(translator.prepare(de).ids)
    assert demo["n_pads"] == len(demo["partner_tokens"]) - n_real > 0
    assert st.src_tokens[n_real:] == ["<pad>"] * demo["n_pads"]
    mask = st.attn["enc_self"][0]["mask"]  # the mask the model used: pad keys hidden, every query a row
    assert mask.shape == (len(st.src_tokens),) * 2 and not mask[:, n_real:].any() and mask[:, :n_real].all()
    assert demo["alone"] == translator.translate(de).text and demo["encoder_shift"] < 1e-4
    off = translator.padded_batch(de, use_padding_mask=False)
    assert off["trace"].attn["enc_self"][0]["mask"].all() and off["encoder_shift"] > 1e-4
    # a partner that is not longer is lengthened by the sentence itself
    long_text = LONGER_EXAMPLE + " " + LONGER_EXAMPLE
    demo = translator.padded_batch(long_text)
    assert demo["partner"] == long_text + " " + LONGER_EXAMPLE and demo["n_pads"] > 0
    demo = translator.padded_batch(de, partner="Hund")
    assert demo["partner"] == de + " Hund" and demo["n_pads"] == 1


@pytest.mark.parametrize("use_mask", [True, False])
def test_padded_batch_reuses_a_greedy_decoding_it_is_handed(translator, pairs, use_mask):
    """The page hands in the header's greedy trace: the demonstration is the same as when it decodes alone itself."""
    de = pairs[1][0]
    own = translator.padded_batch(de, use_padding_mask=use_mask)
    shared = translator.padded_batch(de, use_padding_mask=use_mask, alone=translator.trace(de))
    for k in ("alone", "padded", "partner", "n_pads", "encoder_shift"):
        assert shared[k] == own[k], k
    a, b = own["trace"], shared["trace"]
    assert a.src_tokens == b.src_tokens and a.tgt_tokens == b.tgt_tokens
    for kind in ("enc_self", "dec_self", "cross"):
        for ra, rb in zip(a.attn[kind], b.attn[kind]):
            assert np.array_equal(ra["mask"], rb["mask"]) and np.array_equal(ra["probs"], rb["probs"])


@pytest.mark.parametrize("use_mask", [True, False])
def test_padded_batch_line_is_a_greedy_search_of_the_padded_sentence(translator, pairs, use_mask):
    """"In the padded batch" comes from checking the translation alone against the padded pass (decode.
    greedy_from_guess): it must be what a plain greedy search of the padded sentence gives, mask on or off."""
    from pathlib import Path

    import torch

    from model.inference.decode import greedy_decode
    from model.inference.translator import Translator

    # The shipped model too: without the mask its translation of a padded sentence changes (the tiny test model's
    # often does not), so the search after a disagreement is exercised as well.
    shipped = Translator.from_checkpoint(Path(__file__).resolve().parents[2] / "checkpoints" / "multi30k-de-en",
                                         draft=False)
    cases = [(translator, de) for de, _ in pairs[:4]] + [(shipped, de) for de in
                                                         ("Eine ältere Frau spielt im Park in einem blauen Hemd.",
                                                          "Ein Mann schläft im Wasser mit einer Tasche.")]
    changed = 0
    for translator, de in cases:
        v, pad = translator.tgt_vocab, translator.cfg.pad_idx
        demo = translator.padded_batch(de, use_padding_mask=use_mask)
        changed += demo["padded"] != demo["alone"]
        a = translator.prepare(de)
        src = torch.tensor([a.ids + [pad] * demo["n_pads"]])
        with torch.inference_mode():
            dec = greedy_decode(translator.model, src, v.bos_idx, v.eos_idx, translator.max_steps(a, None),
                                use_src_padding_mask=use_mask)
        want = translator._finish(a, dec, 0.0, src, None, True, "greedy", None, use_mask).text
        assert demo["padded"] == want, de
    # With the mask the pads change nothing but float rounding; without it the shipped model's two translations change.
    assert changed == 0 if use_mask else changed >= 2


def test_padded_batch_refuses_a_decoding_that_is_not_the_sentence_greedy_one(translator, pairs):
    de, other = pairs[1][0], pairs[2][0]
    for wrong in (translator.translate(de, beam=3), translator.trace(other),
                  translator.trace(de, prefix=translator.trace(de).raw_tokens[:1])):
        with pytest.raises(ValueError, match="plain greedy"):
            translator.padded_batch(de, alone=wrong)
    assert len(translator.trace(de).raw_tokens) > 2
    cut = translator.trace(de, max_len=2)  # stopped by a shorter limit than the demonstration's own
    assert not cut.finished
    with pytest.raises(ValueError, match="plain greedy"):
        translator.padded_batch(de, alone=cut)


def test_padded_batch_searches_with_the_sessions_length_limit(translator, pairs):
    """A session that caps translations hands in its capped trace: accepted under the same limit, and both searches
    stop there (a capped page never runs the uncapped search of a model that does not end its sentence)."""
    de = pairs[1][0]
    cut = translator.trace(de, max_len=2)
    assert not cut.finished
    shared = translator.padded_batch(de, alone=cut, max_len=2)
    own = translator.padded_batch(de, max_len=2)
    for k in ("alone", "padded", "n_pads", "encoder_shift"):
        assert shared[k] == own[k], k
    assert shared["alone"] == cut.text and len(shared["trace"].tgt_tokens) == 3  # <bos> + 2 steps
    assert translator.padded_batch(de)["alone"] != cut.text  # the automatic limit goes on
