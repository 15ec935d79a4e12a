"""model.decode's beam search: beam 1 is greedy, beam 4 scores at least as well, the length penalty, batches of
sentences with their own limits, whether a search finished, a forced prefix."""
from __future__ import annotations

import pytest
import torch
from test_model_decode import BOS, EOS, PAD, src_tensor, teacher_forced

from model.inference.decode import beam_search, greedy_decode, length_penalty, search
from model.text.tokenize import tokenize

torch.set_num_threads(1)


def test_beam_one_without_length_penalty_equals_greedy(trained_model, tiny_model, vocabs, pairs):
    sv, _ = vocabs
    for model in (trained_model, tiny_model):
        for de in [de for de, _ in pairs] + ["Ein Hund liest."]:
            src = src_tensor(sv, de)
            greedy = greedy_decode(model, src, BOS, EOS, max_len=12).ids
            assert beam_search(model, src, BOS, EOS, max_len=12, beam_size=1, alpha=0.0).ids == greedy


def normalised_score(model, src, ids, alpha):
    lp, _ = teacher_forced(model, src, ids)
    targets = ids + [EOS]
    total = float(sum(lp[k, tok] for k, tok in enumerate(targets)))
    return total / length_penalty(len(targets), alpha)


@pytest.fixture
def half_trained(make_model, vocabs, encoded_pairs):
    """A weakly trained model (uncertain, so beam search has something to find)."""
    from tests.conftest import train_on_pairs

    return train_on_pairs(make_model(seed=4), vocabs, encoded_pairs, steps=25, lr=5e-3)


def test_beam_four_scores_at_least_as_well_as_greedy(half_trained, trained_model, vocabs, pairs):
    sv, _ = vocabs
    alpha = 0.6
    compared = 0
    for model in (half_trained, trained_model):
        for de in [de for de, _ in pairs] + ["Ein Hund liest ein Buch.", "Zwei Frauen essen."]:
            src = src_tensor(sv, de)
            greedy = greedy_decode(model, src, BOS, EOS, max_len=20)
            beam = beam_search(model, src, BOS, EOS, max_len=20, beam_size=4, alpha=alpha).ids
            if not greedy.finished:
                continue
            compared += 1
            assert normalised_score(model, src, beam, alpha) >= normalised_score(model, src, greedy.ids, alpha) - 1e-5
    assert compared >= 6


def test_length_penalty():
    assert length_penalty(7, 0.0) == 1.0
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(10, 1.0) == pytest.approx(2.5)


def test_beam_search_reports_whether_it_finished(tiny_model, trained_model, vocabs, pairs):
    sv, tv = vocabs
    src = src_tensor(sv, pairs[1][0])
    cut = beam_search(tiny_model, src, BOS, EOS, max_len=4, beam_size=3)
    assert len(cut.ids) == 4 and cut.finished is False
    done = beam_search(trained_model, src, BOS, EOS, max_len=20, beam_size=3)
    assert done.finished is True and tv.decode(done.ids) == tokenize(pairs[1][1], "en")


def test_batched_beam_search_equals_one_sentence_at_a_time(half_trained, vocabs, pairs):
    sv, _ = vocabs
    texts = [de for de, _ in pairs] + ["Ein Hund liest ein Buch.", "Zwei Frauen essen."]
    srcs = [src_tensor(sv, t)[0] for t in texts]
    batch = torch.full((len(srcs), max(map(len, srcs))), PAD, dtype=torch.long)
    for r, s in enumerate(srcs):
        batch[r, : len(s)] = s
    limits = [3, 20, 7, 12, 1, 15]  # each sentence its own step limit
    got = search(half_trained, batch, BOS, EOS, limits, beam_size=3, alpha=0.6)
    want = [beam_search(half_trained, s[None], BOS, EOS, max_len=m, beam_size=3) for s, m in zip(srcs, limits)]
    assert [(d.ids, d.finished) for d in got] == [(d.ids, d.finished) for d in want]
    assert all(len(d.ids) <= m for d, m in zip(got, limits)) and len(got[4].ids) <= 1


def test_beam_search_continues_a_forced_prefix(trained_model, vocabs, pairs):
    sv, tv = vocabs
    src = src_tensor(sv, pairs[0][0])
    prefix = tv.encode(["A", "woman"])
    res = search(trained_model, src, BOS, EOS, 12, beam_size=3, alpha=0.6, prefix=prefix)[0]
    assert res.ids[:2] == prefix and len(res.ids) > 2
    greedy = greedy_decode(trained_model, src, BOS, EOS, max_len=12, prefix=prefix)
    assert search(trained_model, src, BOS, EOS, 12, beam_size=1, alpha=0.0, prefix=prefix)[0].ids == greedy.ids
