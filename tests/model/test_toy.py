"""model.toy: the digit tasks, the live callback, learning within the step budget, the existing Translator paths."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from model.training import toy

torch.set_num_threads(1)


@pytest.fixture(scope="module", params=toy.OFFERED)
def learned(request):
    """Each offered task trained with the live budget, stopping once held-out exact match is 100 %."""
    return toy.train_toy(request.param, steps=toy.DEFAULT_STEPS, seed=0, target=1.0)


def test_vocabulary_and_tokens():
    v = toy.toy_vocab()
    assert len(v) == 14 and v.itos[4:] == list("0123456789") and v.pad_idx == toy.toy_config().pad_idx
    t = toy.ToyTranslator(toy.EncoderDecoder(toy.toy_config()), "copy")
    spaced, packed = t.prepare("3 1 4"), t.prepare("314")
    assert spaced.tokens == packed.tokens == ["3", "1", "4"] and spaced.ids == packed.ids == [7, 5, 8, v.eos_idx]
    odd = t.prepare("3 x 4")
    assert odd.unknown == [False, True, False] and odd.ids[1] == v.unk_idx
    twin = t.untrained_twin()
    assert isinstance(twin, toy.ToyTranslator) and twin.prepare("314").ids == spaced.ids


def test_tasks_and_held_out_sequences():
    xs = list("3141")
    assert toy.TASKS["copy"](xs) == xs and toy.TASKS["reverse"](xs) == list("1413")
    assert toy.TASKS["sort"](xs) == list("1134")
    seen = {tuple("123"), tuple("4444")}
    test = toy.held_out("copy", n=300, exclude=seen)
    assert len(test) == 300 and not seen & set(map(tuple, test))
    assert all(toy.MIN_LEN <= len(s) <= toy.MAX_LEN for s in test)
    assert test == toy.held_out("copy", n=300, exclude=seen)  # the same sequences every time


def test_callback_reports_and_can_stop():
    calls = []

    def callback(step, loss, cross):
        calls.append((step, loss, cross))
        return len(calls) < 2  # stop at the second report

    run = toy.train_toy("reverse", steps=500, callback=callback, every=5)
    assert run.stopped and run.steps == 10 and [c[0] for c in calls] == [5, 10]
    step, loss, cross = calls[0]
    n = len(toy.EXAMPLE.split())
    assert cross.shape == (2, 4, n + 1, n + 1)  # (L, h, t: <bos> + answer, s: digits + <eos>)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    assert 0 < loss < 5 and run.losses[0] == (5, loss)
    assert 0.0 <= run.accuracy <= 1.0


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="copy, reverse, sort"):
        toy.train_toy("shuffle", steps=1)


@pytest.mark.slow
def test_offered_tasks_learn_within_the_budget(learned):
    """Exact outputs on held-out sequences (never seen in training) within DEFAULT_STEPS, judged by steps.

    The run stops at 100 % on its held-out draw; a second draw (excluding every sequence seen by then) is the
    generalisation check. There one sequence in 200 may still go wrong: the README's benchmark measured 99.5-100 %
    over seeds, and which sequence fails depends on the CPU's float rounding (seed 0 gave 100 % on one machine and
    99.5 % on an AMD EPYC), so that draw asks for 99 % (sort: 90 %, as offered)."""
    need = 0.9 if learned.task == "sort" else 0.99
    assert learned.reached_at is not None and learned.reached_at <= toy.DEFAULT_STEPS, learned.losses[-3:]
    assert learned.accuracy >= need  # on the second held-out draw
    assert learned.losses[-1][1] < learned.losses[0][1] / 5


def test_a_learned_model_works_in_the_translator_paths(learned):
    """What the views call: translate, trace (decoding step by step) and the teacher-forced trace."""
    t = learned.translator
    digits = "7 2 9 0 5 5 1"
    want = toy.TASKS[learned.task](digits.split())
    out = t.translate(digits)
    assert out.raw_tokens == want and out.finished
    traced = t.trace(digits)
    assert [s.chosen_token for s in traced.steps][: len(want)] == want
    st = traced.trace
    assert st.src_tokens == digits.split() + ["<eos>"] and st.probs("cross").shape[:2] == (2, 4)
    tf = t.teacher_forced(digits, want)
    assert tf.tgt_tokens == ["<bos>"] + want


@pytest.mark.parametrize("digits", ["3 1 4", "3 1 4 1 5 9 2 6 5"])
def test_the_padding_partner_is_a_longer_digit_sequence(digits):
    """The Masks page batches a toy's input with a longer sequence of its own vocabulary (a German sentence would
    be read character by character, every character unknown)."""
    t = toy.ToyTranslator(toy.EncoderDecoder(toy.toy_config()), "copy")
    n = len(digits.split())
    demo = t.padded_batch(digits)
    partner = demo["partner_tokens"]
    assert partner[-1] == "<eos>" and all(c in toy.SYMBOLS for c in partner[:-1])
    assert len(partner) - 1 > n and demo["n_pads"] == len(partner) - 1 - n
    assert demo["trace"].src_tokens == digits.split() + ["<eos>"] + ["<pad>"] * demo["n_pads"]
