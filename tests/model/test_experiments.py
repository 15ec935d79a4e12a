"""The numbers pages state (model/analysis/experiments.py), on hand-made arrays with known answers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from model.analysis import experiments as ex
from model.text import language


def test_entropy_of_uniform_and_one_hot_rows():
    uniform = np.full((1, 1, 3, 4), 0.25)
    one_hot = np.zeros((1, 1, 3, 4))
    one_hot[..., 0] = 1.0
    assert ex.entropy(uniform)[0, 0] == pytest.approx(math.log(4))
    assert ex.entropy(one_hot)[0, 0] == pytest.approx(0.0)


def test_entropy_leaves_out_rows_with_no_allowed_key():
    probs = np.array([[0.5, 0.5], [1.0, 0.0]])
    mask = np.array([[True, True], [False, False]])
    assert ex.entropy(probs, mask) == pytest.approx(math.log(2))


def test_weight_on_keys_and_future_weight():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    assert ex.weight_on_keys(p, np.array([True, True, False]), np.array([False, False, True])) == pytest.approx(0.2)
    assert ex.weight_on_keys(p, np.array([0]), np.array([], dtype=int)) == 0.0
    fut = ex.future_weight(p[None, None])
    assert fut.tolist() == pytest.approx([0.3, 0.3, 0.0])
    assert ex.future_weight(np.tril(p)[None, None]).tolist() == pytest.approx([0.0, 0.0, 0.0])


def test_dropout_sample_breaks_row_sums_and_keeps_the_expectation():
    p = np.full((200, 50), 1 / 50)
    dropped, sums = ex.dropout_sample(p, 0.1, seed=0)
    assert not np.allclose(sums, 1.0)
    assert sums.mean() == pytest.approx(1.0, abs=0.02)
    assert np.allclose(np.unique(dropped), [0.0, 1 / 50 / 0.9])
    assert ex.dropout_sample(p, 0.0) == (None, None)


def test_next_token_entropy():
    v = 8
    uniform = np.log(np.full((2, v), 1 / v))
    sure = np.array([[0.0] + [-np.inf] * (v - 1)])
    assert ex.next_token_entropy(uniform) == pytest.approx([math.log(v)] * 2)
    assert ex.next_token_entropy(sure) == pytest.approx([0.0])


def _lp(rows):
    return np.log(np.clip(np.array(rows, dtype=np.float64), 1e-12, 1))


def test_causal_experiment_counts_and_summary_follow_the_numbers():
    itos = ["<unk>", "<pad>", "<bos>", "<eos>", "a", "dog"]
    inputs, targets, ids = ["<bos>", "a", "dog"], ["a", "dog", "<eos>"], [4, 5, 3]
    on = _lp([[0, 0, 0, 0.1, 0.8, 0.1], [0, 0, 0, 0.1, 0.1, 0.8], [0, 0, 0, 0.9, 0.05, 0.05]])
    off = _lp([[0, 0, 0, 0.5, 0.4, 0.1], [0, 0, 0, 0.1, 0.1, 0.8], [0, 0, 0, 0.95, 0.05, 0.0]])
    att = np.zeros((1, 1, 3, 3))
    att[0, 0] = [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    exp = ex.causal_experiment(on, off, att, inputs, targets, ids, itos, "the reference")
    assert exp.right_on == 3 and exp.right_off == 2
    assert exp.worse == 1 and exp.better == 1
    assert exp.rows[0]["top, mask off"] == "<eos>" and exp.rows[0]["weight on later"] == pytest.approx(0.5)
    text = exp.summary()
    assert "the reference" in text and "fell at 1 of 3" in text and "rose at 1" in text
    assert "2 of 3 without" in text and "3 of 3 positions with the mask" in text


def test_causal_summary_of_a_model_that_gains_without_the_mask_says_so():
    itos = ["<unk>", "<pad>", "<bos>", "<eos>", "x"]
    on = _lp([[0.2, 0.2, 0.2, 0.2, 0.2]])
    off = _lp([[0.0, 0.0, 0.0, 0.1, 0.9]])
    exp = ex.causal_experiment(on, off, np.zeros((1, 1, 1, 1)), ["<bos>"], ["x"], [4], itos, "its own output")
    assert "higher" in exp.summary() and "mostly get worse" not in exp.summary()


def test_looks_like_target_language():
    tgt = {"a", "dog", "runs", "in", "the", "snow", "."}
    assert language.looks_like_target_language(["A", "dog", "runs", "in", "the", "snow", "."],
                                         [False, False, False, True, False, False, True], tgt)
    assert not language.looks_like_target_language(["Ein", "Hund", "läuft", "."], [True, True, True, True], tgt)
    assert not language.looks_like_target_language(["dog"], [False], tgt)


def test_pieces_look_like_target_language():
    # (pieces, summed log-probabilities) as the shipped piece models read these texts
    assert language.pieces_look_like_target_language(6, (14, -100.7), (7, -32.6))  # "A dog runs in the snow."
    assert not language.pieces_look_like_target_language(5, (6, -30.2), (14, -117.7))  # "Ein Hund läuft im Schnee."
    assert not language.pieces_look_like_target_language(2, (2, -15.7), (2, -10.3))  # "man hat": as short in both
    assert not language.pieces_look_like_target_language(1, (5, -50.0), (1, -5.0))  # one word is no evidence


def test_paired_bootstrap_identical_systems_and_a_clear_difference():
    refs = [f"a dog number {i} runs in the snow" for i in range(40)]
    same = ex.paired_bootstrap(refs, refs, refs, n_samples=200)
    assert same.delta == pytest.approx(0.0) and same.within_noise
    worse = [r.replace("dog", "cat").replace("snow", "rain") for r in refs]
    cmp = ex.paired_bootstrap(refs, worse, refs, n_samples=200)
    assert cmp.delta < -10 and not cmp.within_noise and cmp.high < 0
    assert "outside noise" in cmp.sentence()


def test_paired_bootstrap_agrees_with_sacrebleu():
    import sacrebleu

    hyps = ["a dog runs in snow", "the man sits on a bench", "two kids play"]
    refs = ["a dog runs in the snow", "a man sits on a bench", "two children play"]
    cmp = ex.paired_bootstrap(hyps, hyps, refs, n_samples=10)
    assert cmp.base == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)


def test_data_dir_lookup_names_every_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(ex.DATA_ENV, str(tmp_path / "nowhere"))
    folder, looked = ex.find_data_dir("nosuchsplit")
    assert folder is None and looked[0] == tmp_path / "nowhere" and len(looked) >= 2
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "val.de").write_text("Ein Hund.\n", encoding="utf-8")
    (tmp_path / "d" / "val.en").write_text("A dog.\n", encoding="utf-8")
    monkeypatch.setenv(ex.DATA_ENV, str(tmp_path / "d"))
    assert ex.find_data_dir("val")[0] == tmp_path / "d"
    assert ex.reference_for("Ein  Hund.") == "A dog."
    assert ex.reference_for("Eine Katze.") is None


def test_run_causal_experiment_on_a_model(translator):
    """On the tiny trained model: the mask-on pass never looks ahead, the mask-off pass does, and the rows
    line up with <bos> + reference."""
    on, off, exp = ex.run_causal_experiment(translator, "Ein Mann fährt Fahrrad.", ["A", "man", "rides"], "a test")
    assert [r["input"] for r in exp.rows] == ["<bos>", "A", "man", "rides"]
    assert [r["reference next"] for r in exp.rows] == ["A", "man", "rides", "<eos>"]
    assert ex.future_weight(on.probs("dec_self")).max() == 0.0
    assert exp.future > 0.0
    # p(ref) is taken from the distribution greedy decoding chooses from: <bos> and <pad> removed, renormalised
    lp = on.log_probs[0].astype(np.float64)
    allowed = np.exp(lp)
    allowed[ex.never_generated(translator)] = 0.0
    p_on = allowed[translator.tgt_vocab.stoi["A"]] / allowed.sum()
    assert exp.rows[0]["p(ref), on"] == pytest.approx(float(p_on), rel=1e-5)


def test_causal_table_shows_only_tokens_decoding_can_write():
    """<bos> and <pad> are never generated (model/inference/decode.py): a raw argmax on them is not the top shown."""
    itos = ["<unk>", "<pad>", "<bos>", "<eos>", "a"]
    on = _lp([[0.1, 0.1, 0.5, 0.1, 0.2]])  # the raw argmax is <bos>
    off = _lp([[0.05, 0.6, 0.0, 0.05, 0.3]])  # and here <pad>
    exp = ex.causal_experiment(on, off, np.zeros((1, 1, 1, 1)), ["<bos>"], ["a"], [4], itos, "r", banned=[1, 2])
    assert exp.rows[0]["top, mask on"] == "a" and exp.rows[0]["top, mask off"] == "a"
    assert exp.rows[0]["p(ref), on"] == pytest.approx(0.2 / 0.4) and exp.rows[0]["p(ref), off"] == pytest.approx(0.75)
    assert exp.right_on == exp.right_off == 1


@pytest.mark.parametrize("max_len", [None, 4])
@pytest.mark.parametrize("prefers_banned", [False, True])
def test_the_model_own_greedy_output_is_its_top_prediction_everywhere(translator, monkeypatch, tmp_path, max_len,
                                                                      prefers_banned):
    """The untrained twin, teacher-forced with the mask along its own greedy output (no Multi30k reference here):
    its top token is that output at every position, also when the output stopped at the length limit (no <eos>
    is then appended) and when its generator prefers <bos> and <pad>, which decoding never writes."""
    import torch

    monkeypatch.setattr(ex, "data_dir_candidates", lambda: [tmp_path / "none"])
    twin = translator.untrained_twin(seed=0)
    banned = ex.never_generated(twin)
    assert banned == sorted({twin.tgt_vocab.bos_idx, twin.cfg.pad_idx})
    if prefers_banned:
        with torch.no_grad():
            twin.model.generator.proj.bias[banned] += 50.0
    text = "Ein Mann fährt Fahrrad."
    out = twin.trace(text, max_len=max_len)
    if max_len is not None:
        assert not out.finished and len(out.raw_tokens) == max_len
    tokens, ended, what = ex.causal_reference(twin, text, out.raw_tokens, out.finished)
    assert tokens == out.raw_tokens and ended == out.finished and "own output" in what
    on, _, exp = ex.run_causal_experiment(twin, text, tokens, what, ended)
    eos = twin.tgt_vocab.token("eos")
    assert [r["reference next"] for r in exp.rows] == out.raw_tokens + ([eos] if out.finished else [])
    assert on.tgt_tokens == ["<bos>"] + (out.raw_tokens if out.finished else out.raw_tokens[:-1])
    n = len(exp.rows)
    assert exp.right_on == n and f"at {n} of {n} positions with the mask" in exp.summary()
    shown = {r["top, mask on"] for r in exp.rows} | {r["top, mask off"] for r in exp.rows}
    assert not shown & {twin.tgt_vocab.itos[i] for i in banned}
    assert [r["p(ref), on"] for r in exp.rows[: len(out.raw_tokens)]] == pytest.approx(
        [s.chosen_prob for s in out.steps[: len(out.raw_tokens)]], rel=1e-4)  # the Decoding page's probabilities


def test_causal_reference_names_what_it_teacher_forces(translator, make_model, vocabs, monkeypatch):
    from model.inference.translator import Translator
    from model.training import toy

    monkeypatch.setattr(ex, "reference_for", lambda text: "A man rides a bike in the snow .")
    assert ex.causal_reference(translator, "Ein Mann.", ["x"], True) == (
        ["A", "man", "rides", "a", "bike", "in", "the", "snow", "."], True, "the Multi30k reference translation")
    short = Translator(make_model(max_len=8), *vocabs)  # room for <bos> and 6 tokens, then <eos> to predict
    tokens, ended, _ = ex.causal_reference(short, "Ein Mann.", ["x"], True)
    assert tokens == ["A", "man", "rides", "a", "bike", "in"] and not ended  # cut: no <eos> follows it
    reverse = toy.ToyTranslator(toy.EncoderDecoder(toy.toy_config()), "reverse")
    assert ex.causal_reference(reverse, "3 1 4", ["9"], False) == (["4", "1", "3"], True,
                                                                   "the right answer of the reverse task")
    tokens, ended, what = ex.causal_reference(reverse, "3 x 4", ["9"], False)  # not a digit sequence: no answer
    assert (tokens, ended) == (["9"], False) and "own output" in what and "length limit" in what


def test_position_similarity_peaks_at_the_reference():
    from viz.positional import sinusoidal_encoding

    pe = sinusoidal_encoding(60, 32)
    sim, far = ex.position_similarity(pe, 10)
    assert int(np.argmax(sim)) == 10 and sim[10] == pytest.approx(16.0)  # d/2 pairs of sin² + cos²
    assert far != 10 and sim[far] == sim.min()


def test_untrained_summary_states_this_sentences_numbers():
    v = 8
    uniform = np.log(np.full((3, v), 1 / v))
    text = ex.untrained_summary(uniform, [0.125, 0.125, 0.125], finished=False)
    assert f"{math.log(v):.2f}" in text and "0.1250" in text and "length limit" in text
    assert "ended with <eos>" in ex.untrained_summary(uniform, [0.2], finished=True)
