"""model.tokenize, model.vocab and Translator.prepare: text in, ids out."""
from __future__ import annotations

import json

import pytest
import torch

from model.inference.translator import MAX_CHARS, MAX_SRC_TOKENS, Translation
from model.text.tokenize import clean_text, detokenize, tokenize
from model.text.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab

torch.set_num_threads(1)


# --------------------------------------------------------------------------- tokenize / detokenize


@pytest.mark.parametrize(
    "text,lang,tokens",
    [
        ("Ein Mann fährt Fahrrad.", "de", ["Ein", "Mann", "fährt", "Fahrrad", "."]),
        ("Das ist z.B. ein Test.", "de", ["Das", "ist", "z.B.", "ein", "Test", "."]),
        ("Zwei Hunde spielen im Schnee.", "de", ["Zwei", "Hunde", "spielen", "im", "Schnee", "."]),
        ("Eine Frau, die einen Hut trägt, sitzt.", "de",
         ["Eine", "Frau", ",", "die", "einen", "Hut", "trägt", ",", "sitzt", "."]),
        ("GROSSE Straße", "de", ["GROSSE", "Straße"]),
        ("A man's dog isn't here.", "en", ["A", "man", "'s", "dog", "is", "n't", "here", "."]),
        ("Two dogs are playing in the snow.", "en", ["Two", "dogs", "are", "playing", "in", "the", "snow", "."]),
        ('"Hello", he said.', "en", ['"', "Hello", '"', ",", "he", "said", "."]),
    ],
)
def test_tokenize(text, lang, tokens):
    assert tokenize(text, lang) == tokens


def test_tokenize_cleans_first():
    assert tokenize("  Ein \u202eMann\u200b  fährt\n\tFahrrad . ", "de") == ["Ein", "Mann", "fährt", "Fahrrad", "."]
    assert tokenize("", "de") == [] and tokenize(" \n\t ", "en") == []


def test_clean_text():
    assert clean_text("a\u202eb\u0000c  \t\n d\u200b e") == "a b c d e"
    assert clean_text("\u2066Mann\u2069 \u200fgeht\u200e\x7f\x85") == "Mann geht"
    assert clean_text("  many   spaces\r\nand lines \n") == "many spaces and lines"
    assert clean_text("fa\u0308hrt") == "fährt" and len(clean_text("fa\u0308hrt")) == 5  # NFC
    assert clean_text("Straße, Größe: 5 €") == "Straße, Größe: 5 €"  # ordinary text is untouched
    assert clean_text("") == ""


@pytest.mark.parametrize(
    "tokens,text",
    [
        ("A man 's dog is n't here .", "A man's dog isn't here."),
        ("They do n't know .", "They don't know."),
        ("A dog , a cat and a bird .", "A dog, a cat and a bird."),
        ("Is it ( really ) true ?", "Is it (really) true?"),
        ("A woman in a \" red \" dress !", 'A woman in a "red" dress!'),
    ],
)
def test_detokenize(tokens, text):
    assert detokenize(tokens.split()) == text


@pytest.mark.parametrize(
    "text",
    [
        "A man's dog isn't here.",
        "Two dogs are playing in the snow.",
        "A woman, wearing a red hat, sits on a bench.",
        "The kids don't like it.",
        "Three people (two men and a woman) walk down the street!",
    ],
)
def test_tokenize_detokenize_round_trip(text):
    assert detokenize(tokenize(text, "en")) == text


def test_detokenize_empty():
    assert detokenize([]) == ""


# --------------------------------------------------------------------------- vocab


def test_vocab_build_specials_min_freq_and_order():
    sents = [["a", "b", "a"], ["c", "a", "b"], ["d"], ["<pad>", "<unk>"]]
    v = Vocab.build(sents, min_freq=2)
    assert v.itos[:4] == list(SPECIALS) == [UNK, PAD, BOS, EOS]
    assert (v.unk_idx, v.pad_idx, v.bos_idx, v.eos_idx) == (0, 1, 2, 3)
    assert v.itos[4:] == ["a", "b"]  # most frequent first; c and d are too rare; specials not repeated
    assert len(v) == 6 and "a" in v and "c" not in v
    v1 = Vocab.build(sents, min_freq=1)
    assert v1.itos[4:] == ["a", "b", "c", "d"]  # ties alphabetical
    assert Vocab.build(sents, min_freq=1, max_size=5).itos == list(SPECIALS) + ["a"]
    assert Vocab.build(sents, min_freq=1, max_size=2).itos == list(SPECIALS)
    assert Vocab.build(reversed(sents), min_freq=1).itos == v1.itos  # builds repeat


def test_vocab_encode_decode_unknown():
    v = Vocab.build([["Hund", "Katze"]], min_freq=1)
    assert v.encode(["Hund", "Maus", "Katze", "hund"]) == [v.stoi["Hund"], 0, v.stoi["Katze"], 0]
    assert v.decode(v.encode(["Katze", "Hund"])) == ["Katze", "Hund"]
    assert v.decode([0, 1, 2, 3]) == [UNK, PAD, BOS, EOS]


def test_vocab_save_load_round_trip(tmp_path):
    v = Vocab.build([["fährt", "Straße", "z.B.", "\"", "€"], ["fährt"]], min_freq=1)
    v.save(tmp_path / "v.json")
    raw = (tmp_path / "v.json").read_text(encoding="utf-8")
    assert "fährt" in raw  # stored readable, not \u-escaped
    assert json.loads(raw) == {"itos": v.itos}
    back = Vocab.load(tmp_path / "v.json")
    assert back.itos == v.itos and back.stoi == v.stoi


@pytest.mark.parametrize(
    "itos",
    [["a", "b"], [PAD, UNK, BOS, EOS, "x"], list(SPECIALS) + ["x", "x"], []],
    ids=["no-specials", "wrong-order", "duplicate", "empty"],
)
def test_invalid_vocab_raises_value_error(itos):
    with pytest.raises(ValueError):
        Vocab(itos)


@pytest.mark.parametrize("text", ['["<unk>"]', '{"stoi": {}}', '{"itos": "abc"}', '{"itos": ["a"]}'])
def test_invalid_vocab_file_raises_value_error(tmp_path, text):
    (tmp_path / "v.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        Vocab.load(tmp_path / "v.json")


# --------------------------------------------------------------------------- Translator.prepare


def test_prepare_ids_and_unknown_words(translator):
    sv = translator.src_vocab
    src = translator.prepare("Ein Zebra fährt Fahrrad.")
    assert src.tokens == ["Ein", "Zebra", "fährt", "Fahrrad", "."]
    assert src.unknown == [False, True, False, False, False]
    assert src.ids == [sv.stoi["Ein"], sv.unk_idx, sv.stoi["fährt"], sv.stoi["Fahrrad"], sv.stoi["."], sv.eos_idx]
    assert src.axis_tokens == src.tokens + [EOS]
    assert not src.truncated and src.dropped == [] and src.chars_cut == 0


def test_prepare_truncates_to_max_src_tokens(translator):
    words = [f"w{i}" for i in range(MAX_SRC_TOKENS + 30)]
    src = translator.prepare(" ".join(words))
    assert src.tokens == words[:MAX_SRC_TOKENS]
    assert src.dropped == words[MAX_SRC_TOKENS:]
    assert len(src.ids) == MAX_SRC_TOKENS + 1 and src.ids[-1] == translator.src_vocab.eos_idx
    assert src.truncated and all(src.unknown)
    small = translator.prepare(" ".join(words), max_tokens=3)
    assert small.tokens == words[:3] and len(small.dropped) == len(words) - 3


def test_prepare_never_exceeds_the_models_max_len(make_model, vocabs):
    from model.inference.translator import Translator

    tr = Translator(make_model(max_len=10), *vocabs)
    src = tr.prepare("Ein Mann fährt Fahrrad . " * 5)
    assert len(src.ids) == 10 and len(src.dropped) == 25 - 9
    t = tr.translate("Ein Mann fährt Fahrrad . " * 5)  # decodes without running past the positional table
    assert len(t.raw_tokens) <= 9
    traced = tr.trace("Ein Mann fährt Fahrrad . " * 5)
    assert traced.trace.attn["dec_self"][0]["probs"].shape[1] <= 10  # (h, i, j)


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b\u202e"])
def test_empty_text_gives_an_empty_translation(translator, text):
    for result in (translator.translate(text), translator.translate(text, beam=3), translator.trace(text)):
        assert isinstance(result, Translation)
        assert result.text == "" and result.tokens == [] and result.raw_tokens == []
        assert result.source.tokens == [] and result.source.ids == [translator.src_vocab.eos_idx]
    assert translator.trace(text).steps == []
    assert translator.translate_batch([text, "Ein Mann fährt Fahrrad.", text]) == ["", "A man rides a bike.", ""]


def test_markup_is_just_tokens(translator):
    text = "<script>alert(1)</script>"
    src = translator.prepare(text)
    assert src.tokens == tokenize(text, "de") and "<" in src.tokens and len(src.tokens) >= 3
    assert all(src.unknown)
    result = translator.trace(text)
    assert isinstance(result.text, str) and result.steps
    assert result.source.axis_tokens[-1] == EOS


def test_five_thousand_characters(translator):
    text = "Ein Mann fährt Fahrrad. " * 209  # 5,016 characters
    assert len(text) > 5000
    src = translator.prepare(text)
    assert src.chars_cut == len(clean_text(text)) - MAX_CHARS > 0
    assert len(src.tokens) == MAX_SRC_TOKENS and src.dropped and src.truncated
    assert src.tokens[:5] == ["Ein", "Mann", "fährt", "Fahrrad", "."]
    result = translator.translate(text, max_len=8)
    assert result.source.truncated and len(result.raw_tokens) <= 8
    traced = translator.trace(text, max_len=4)
    assert len(traced.steps) <= 5


def test_translate_known_sentences(translator, pairs):
    for de, en in pairs:
        t = translator.translate(de)
        assert t.text == en and t.finished and t.seconds >= 0
        assert translator.translate(de, beam=3).text == en
    assert translator.translate_batch([de for de, _ in pairs]) == [en for _, en in pairs]
    assert translator.translate_batch([de for de, _ in pairs], beam=2) == [en for _, en in pairs]
