"""The model that ships in checkpoints/multi30k-de-en: loads, translates sensibly, metrics agree."""
from __future__ import annotations

import json

import pytest

from model.inference.translator import Translator
from model.io.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from model.nn.config import ModelConfig

pytestmark = pytest.mark.checkpoint


@pytest.fixture(scope="module")
def translator():
    return Translator.from_checkpoint(DEFAULT_CHECKPOINT)


@pytest.mark.parametrize("german, words", [
    ("Ein Hund läuft im Schnee.", ["dog", "snow"]),
    ("Ein Mann fährt Fahrrad.", ["man", ("bike", "bicycle")]),
    ("Zwei Kinder spielen im Wasser.", ["children", "water"]),
    ("Eine Frau mit einem roten Hut sitzt auf einer Bank.", ["woman", "red", "hat", "bench"]),
    ("Ein brauner Hund rennt dem schwarzen Hund hinterher.", ["brown", "dog", "black"]),
])
def test_translates_sensibly(translator, german, words):
    for beam in (1, 5):
        text = translator.translate(german, beam=beam).text.lower()
        for w in words:  # a tuple lists acceptable alternatives
            assert any(a in text for a in (w if isinstance(w, tuple) else (w,))), \
                f"{w!r} missing from {text!r} (beam {beam})"


def test_metrics_agree_with_config():
    folder = DEFAULT_CHECKPOINT
    cfg = ModelConfig.load(folder / "config.json")
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    assert ModelConfig.from_dict(metrics["model"]["config"]) == cfg
    model, sv, tv, _ = load_checkpoint(folder)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once
    assert metrics["model"]["parameters"] == n_params
    assert (len(sv), len(tv)) == (cfg.src_vocab_size, cfg.tgt_vocab_size)
    for split in ("val", "test"):
        for decoding in ("greedy", "beam5"):
            m = metrics[split][decoding]
            assert m["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
            assert 0 < m["sacrebleu"] < 100 and 0 < m["bleu_lower_spacy_tokens"] < 100


def test_small_enough_to_commit():
    size = (DEFAULT_CHECKPOINT / "model.safetensors").stat().st_size
    assert size <= 25 * 1024 * 1024, f"model.safetensors is {size / 2**20:.1f} MB"


def test_untrained_twin_has_same_shapes_and_other_weights(translator):
    twin = translator.untrained_twin(seed=0)
    a, b = translator.model.state_dict(), twin.model.state_dict()
    assert a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)
    assert any(not (a[k] == b[k]).all() for k in a if a[k].is_floating_point())
    again = translator.untrained_twin(seed=0).model.state_dict()
    assert all((b[k] == again[k]).all() for k in b), "the twin's weights must be reproducible"


TWIN_SENTENCES = ["Ein Hund läuft im Schnee.", "Zwei Kinder spielen im Wasser.", "Angela Merkel besucht Wolfsburg.",
                  "Eine Frau mit einem roten Hut sitzt auf einer Bank."]


def test_untrained_twin_never_generates_bos_or_pad(translator):
    twin = translator.untrained_twin(seed=0)
    for text in TWIN_SENTENCES:
        for result in (twin.translate(text), twin.translate(text, beam=3), twin.trace(text)):
            assert result.raw_tokens and not {"<bos>", "<pad>"} & set(result.raw_tokens), result.raw_tokens
        for step in twin.trace(text, max_len=5).steps:
            assert not {"<bos>", "<pad>"} & set(step.top_tokens)
            assert sum(step.top_probs) <= 1 + 1e-6 and step.chosen_prob == pytest.approx(step.top_probs[0])
    for line in twin.translate_batch(TWIN_SENTENCES):
        assert "<bos>" not in line and "<pad>" not in line


def test_untrained_twin_beam_search_says_it_did_not_finish(translator):
    cut = translator.untrained_twin(seed=0).translate(TWIN_SENTENCES[0], beam=3, max_len=4)
    assert len(cut.raw_tokens) == 4 and cut.finished is False and cut.decoding == "beam 3"
    assert translator.translate(TWIN_SENTENCES[0], beam=3).finished is True


def test_names_and_unknown_words(translator):
    """A word model copies only the words it could not read; a piece model reads every name (no <unk>)."""
    text = "Angela Merkel besucht Wolfsburg."
    res = translator.translate(text)
    if translator.pieces is None:
        assert "besucht" not in res.tokens
        for word in ("Angela", "Merkel", "Wolfsburg"):
            assert res.tokens.count(word) <= 1
        return
    pieces = translator.prepare(text).tokens
    assert "<unk>" not in pieces and "".join(pieces).replace("\u2581", " ").strip() == text  # spelt, nothing lost
    assert "<unk>" not in res.raw_tokens and "<unk>" not in res.text


def test_english_typed_into_the_model_gets_the_hint(translator):
    """Words (unknown German, known English) or pieces (how the two piece models read it): either way."""
    for english in ("A dog runs in the snow.", "Two children are playing in the water."):
        assert translator.looks_like_target_language(english), english
    for german in TWIN_SENTENCES + ["Der Mann trägt einen Hut.", "Computer und Internet."]:
        assert not translator.looks_like_target_language(german), german
