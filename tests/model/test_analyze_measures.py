"""model.analysis's measures: one head's on hand-made matrices, the gate gradient against finite differences,
normalised importance and the pruning curve (the report the CLI writes: test_analyze.py)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from model.analysis import importance, measures, pruning
from model.analysis.measures import head_roles, measure_head
from model.analysis.sentences import rarest_positions, rarity_rank
from model.nn.hooks import gate_hooks
from model.records import KINDS
from model.text.vocab import Vocab

# ----------------------------------------------------------------------------- one head's measures

def previous_token_head(n: int = 6) -> np.ndarray:
    """Every query on the key before it; query 0, which has none, on key 1 (distance 1 as well)."""
    p = np.zeros((n, n))
    p[0, 1] = 1.0
    p[np.arange(1, n), np.arange(n - 1)] = 1.0
    return p


def test_a_previous_token_head_is_positional_minus_one():
    m = measure_head(previous_token_head(), "enc_self")
    assert m["prev_share"] == 1.0 and m["same_share"] == 0.0
    assert m["best_offset"] == -1 and m["best_offset_share"] == 1.0
    assert m["mean_distance"] == pytest.approx(1.0)
    assert m["confidence"] == 1.0 and m["entropy"] == 0.0 and m["entropy_fraction"] == 0.0
    roles = head_roles(m, "enc_self")
    assert roles[0] == "positional -1" and "previous-token" in roles
    nxt = measure_head(previous_token_head()[::-1, ::-1], "enc_self")  # mirrored: every query on the next key
    assert nxt["next_share"] == 1.0 and head_roles(nxt, "enc_self")[0] == "positional +1"


def test_a_decoder_head_on_itself_is_positional_zero():
    m = measure_head(np.eye(5), "dec_self")
    assert m["same_share"] == 1.0 and m["best_offset"] == 0 and head_roles(m, "dec_self") == ["positional 0"]


def test_a_uniform_head_is_diffuse():
    n = 7
    m = measure_head(np.full((n, n), 1 / n), "enc_self")
    assert m["entropy"] == pytest.approx(math.log(n)) and m["entropy_fraction"] == pytest.approx(1.0)
    assert m["confidence"] == pytest.approx(1 / n)
    assert head_roles(m, "enc_self") == ["diffuse"]
    # causal: row i is uniform over i + 1 keys; the <bos> query (one key) counts as fraction 0
    causal = np.tril(np.ones((n, n)))
    causal /= causal.sum(1, keepdims=True)
    d = measure_head(causal, "dec_self")
    assert d["entropy_fraction"] == pytest.approx((n - 1) / n)
    assert d["entropy"] == pytest.approx(np.mean([math.log(i + 1) for i in range(n)]))


def test_a_head_on_eos_is_a_sink():
    p = np.zeros((5, 5))
    p[:, -1] = 1.0  # the source <eos> is the last key
    m = measure_head(p, "enc_self", punct=3)
    assert m["eos_share"] == 1.0 and m["punct_share"] == 0.0 and m["sink_share"] == 1.0
    assert head_roles(m, "enc_self") == ["sink"]
    half = np.zeros((4, 5))
    half[:, 3] = half[:, 4] = 0.5  # cross: half on the final "." and half on <eos>
    c = measure_head(half, "cross", punct=3)
    assert c["eos_share"] == 0.5 and c["punct_share"] == 0.5 and c["sink_share"] == 1.0
    assert measure_head(half, "cross")["punct_share"] == 0.0  # no final punctuation given: nothing counted
    bos = np.zeros((4, 4))
    bos[:, 0] = 1.0
    d = measure_head(bos, "dec_self")
    assert d["bos_share"] == 1.0 and d["sink_share"] == 1.0 and head_roles(d, "dec_self")[-1] == "sink"


def test_rarest_word_by_vocabulary_rank():
    itos = ["<unk>", "<pad>", "<bos>", "<eos>", ".", "Ein", "Hund", "x", "y", "läuft"]
    rank = rarity_rank(SimpleNamespace(src_vocab=Vocab(itos), pieces=None))
    rare, ok = rarest_positions(["Ein", "Hund", "läuft", "."], rank)
    assert ok and rare == [False, False, True, False]  # the highest id is the least frequent word
    rare, ok = rarest_positions(["Ein", "Zebra", "läuft", "Gnu", "."], rank)
    assert rare == [False, True, False, True, False]  # unknown words are rarer than any vocabulary word
    assert rarest_positions(["Hund", "."], rank) == ([False, False], False)  # one candidate: skipped
    assert rarest_positions(["Ein", "<unk>", ",", "Hund"], rank)[0] == [False, False, False, True]


def test_a_rare_word_head():
    rare = [False, False, True, False, False]  # "Ein Hund Zebra ." + <eos>
    p = np.full((4, 5), 0.05)
    p[:, 2] = 0.8
    m = measure_head(p, "cross", rare=rare)
    assert m["rare_share"] == 1.0 and m["rare_chance"] == pytest.approx(1 / 5)
    assert head_roles(m, "cross")[0] == "rare-word"
    assert head_roles({**m, "rare_share": 0.3}, "cross") == ["mixed"]  # below the share threshold
    assert "rare-word" not in head_roles({**m, "rare_chance": 0.6}, "cross")  # under 2x chance


def test_cross_monotonicity_of_the_argmax_path():
    diag = np.zeros((4, 6))
    diag[[0, 1, 2, 3], [0, 2, 3, 5]] = 1.0
    m = measure_head(diag, "cross")
    assert m["monotonicity"] == pytest.approx(1.0) and m["forward_share"] == 1.0
    back = measure_head(diag[::-1], "cross")
    assert back["monotonicity"] == pytest.approx(-1.0) and back["forward_share"] == 0.0
    flat = np.zeros((4, 6))
    flat[:, 5] = 1.0  # resting on <eos>: never moves backwards, but is no alignment
    f = measure_head(flat, "cross")
    assert f["forward_share"] == 1.0 and f["monotonicity"] == 0.0
    ties = np.array([[0, 1, 1, 2]])  # average ranks 1, 2.5, 2.5, 4
    assert measures.spearman_with_position(ties, np.ones((1, 4), bool))[0] == pytest.approx(
        np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1])


def test_offset_pattern_of_a_cross_head_is_relative_to_the_diagonal():
    s, t = 8, 4
    p = np.zeros((t, s))
    for i in range(t):
        p[i, int(np.floor(i * s / t + 0.5)) + 1] = 1.0  # one key after the proportional diagonal
    stats = measures.HeadStats("cross", 1, 1)
    stats.add(p[None, None, None], np.ones((1, t, s), bool), np.ones((1, t), bool), np.array([s]), np.array([t]))
    pattern = stats.result()["offset_pattern"]
    w = np.array(pattern["weights"])[0, 0]
    assert w[pattern["offsets"].index(1)] == 1.0 and w.sum() == 1.0


# ----------------------------------------------------------------------------- the gate gradient

def test_head_mask_gradient_equals_finite_differences(make_model, encoded_pairs, vocabs):
    from model.training.batch import collate

    sv, tv = vocabs
    model = make_model(seed=3).double()
    src, tgt_in, tgt_out = collate(encoded_pairs, list(range(len(encoded_pairs))), sv.pad_idx, tv.bos_idx, tv.eos_idx)
    xi = {k: 1.0 + 0.1 * torch.rand(v.shape, dtype=torch.float64)
          for k, v in importance.ones_head_mask(model.cfg).items()}
    _, grads, _ = importance.head_mask_gradient(model, src, tgt_in, tgt_out, xi)

    def loss(mask):
        with torch.no_grad():
            return float(importance.token_nll(model.run_with_hooks(src, tgt_in, gate_hooks(mask)), tgt_out, sv.pad_idx))

    eps = 1e-6
    for kind in KINDS:
        fd = torch.zeros_like(xi[kind])
        for idx in np.ndindex(*xi[kind].shape):
            up = {k: v.clone() for k, v in xi.items()}
            down = {k: v.clone() for k, v in xi.items()}
            up[kind][idx] += eps
            down[kind][idx] -= eps
            fd[idx] = (loss(up) - loss(down)) / (2 * eps)
        assert torch.allclose(grads[kind], fd, rtol=1e-5, atol=1e-7), kind
        assert grads[kind].abs().max() > 1e-3  # a real gradient, not zeros on both sides


def test_normalised_importance_follows_bertology():
    raw = {"enc_self": np.array([[3.0, 4.0]]), "dec_self": np.array([[1.0, 0.0]]), "cross": np.array([[0.0, 2.0]])}
    norm = importance.normalise_importance(raw)
    assert np.allclose(norm["enc_self"], [[0.6, 0.8]]) and np.allclose(norm["dec_self"], [[1.0, 0.0]])
    assert np.allclose(norm["cross"], [[0.0, 1.0]])
    order = importance.importance_order(norm)
    assert order[0] == ("dec_self", 0, 1) and order[-1] == ("cross", 0, 1)


def test_pruning_curve_refines_the_count_where_bleu_drops_by_one_point(monkeypatch):
    from model.training import evaluate

    class Fake:  # "translates" into the number of heads off; BLEU falls 0.6 per head
        tgt_lang = "en"

        def translate_batch(self, src, off_heads=None, progress=None):
            if progress:
                progress(len(src))
            return [str(len(list(off_heads or ())))] * len(src)

    monkeypatch.setattr(evaluate, "bleu_scores", lambda hyps, refs, lang="en": {
        "sacrebleu": 40 - 0.6 * int(hyps[0]), "signature": "fake", "bleu_lower_spacy_tokens": 0.0})
    scores = {k: np.array([[0.1 * i, 0.1 * i + 0.05]]) for i, k in enumerate(KINDS)}
    seen = []
    d = pruning.pruning_curve(Fake(), ["a", "b"], ["a", "b"], scores, lambda f, m: seen.append(f), (0, 0.5, 1))
    assert [p["heads_off"] for p in d["curves"]["all"]] == [0, 3, 6]
    assert [p["heads_off"] for p in d["refined"]["all"]] == [1, 2]  # 1 is within a point, 2 is not: stop
    assert d["heads_off_before_bleu_drop"] == {"enc_self": 1, "dec_self": 1, "cross": 1, "all": 1}
    assert d["curves"]["enc_self"][1]["off"] == [["enc_self", 0, 0]]  # the least important first
    assert seen == sorted(seen) and max(seen) <= 1.0
    assert pruning._count(0.5, 5) == 3 and pruning._count(0.3, 12) == 4 and pruning._count(0.1, 12) == 1


def test_a_sliding_window_layer_measures_against_its_own_keys():
    """T5Gemma: a local layer's queries see only the keys in its window; a head spread evenly over them has the
    whole entropy it could have (entropy_fraction 1), as a global head spread over every key has."""
    from model.analysis.measures import HeadStats

    n, window = 6, 1
    i, j = np.indices((n, n))
    local = np.abs(i - j) <= window  # (i, j)
    allowed = np.stack([local, np.ones((n, n), dtype=bool)])[None]  # (b, L, i, j)
    p = allowed / allowed.sum(-1, keepdims=True)  # (b, L, i, j): even over each layer's keys
    stats = HeadStats("enc_self", 2, 1, src_eos=False)
    stats.add(p[:, :, None], allowed, np.ones((1, n), dtype=bool), np.array([n]), np.array([n]))
    m = stats.result()
    np.testing.assert_allclose(m["measures"]["entropy_fraction"][:, 0], [1.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(m["measures"]["eos_share"], 0.0)  # no end token: no weight on one
