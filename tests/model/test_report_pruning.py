"""The report's pruning curve in both orders: by importance (Michel et al. 2019) and by the measured loss increase
when each head alone is switched off (pruning.by_loss_increase), from the same decodes."""
from __future__ import annotations

import numpy as np

from model.analysis import pruning
from model.analysis.importance import importance_order
from model.records import KINDS


class Fake:
    """'Translates' into the heads that are off; the BLEU below falls 0.6 per head, and 5 more per cross head."""

    tgt_lang = "en"

    def __init__(self):
        self.decodes = []

    def translate_batch(self, src, off_heads=None, progress=None):
        off = sorted(off_heads or ())
        self.decodes.append(tuple(off))
        if progress:
            progress(len(src))
        return [repr(off)] * len(src)


def fake_bleu(hyps, refs, lang="en"):
    off = eval(hyps[0])  # noqa: S307  (the Fake's own repr of a list of tuples)
    return {"sacrebleu": 40 - 0.6 * len(off) - 5 * sum(k == "cross" for k, _, _ in off), "signature": "fake",
            "bleu_lower_spacy_tokens": 0.0}


def test_the_curve_is_recorded_in_both_orders_and_each_set_is_decoded_once(monkeypatch):
    from model.training import evaluate

    monkeypatch.setattr(evaluate, "bleu_scores", fake_bleu)
    rng = np.random.default_rng(3)
    importance = {k: rng.random((2, 3)) for k in KINDS}
    loss = {k: rng.random((2, 3)) for k in KINDS}
    fake = Fake()
    d = pruning.pruning_curve(fake, ["a", "b"], ["a", "b"], importance, None, (0, 0.5, 1), loss_increase=loss)
    by_loss = d["by_loss_increase"]
    assert "loss increase" in by_loss["order"] and "importance" in d["order"]
    for section, scores in ((d, importance), (by_loss, loss)):
        for group, kinds in [(k, (k,)) for k in KINDS] + [("all", KINDS)]:
            order = importance_order(scores, kinds)  # ascending: the least (important / costly) first
            for point in section["curves"][group]:
                assert [tuple(h) for h in point["off"]] == order[: point["heads_off"]]
                assert point["bleu"] == fake_bleu([repr(sorted(order[: point["heads_off"]]))], [])["sacrebleu"]
        assert set(section["heads_off_before_bleu_drop"]) == {*KINDS, "all"}
    # the two orders differ, and a set of heads off that both share (none, every head) is decoded once
    assert [p["off"] for p in by_loss["curves"]["all"]] != [p["off"] for p in d["curves"]["all"]]
    assert len(fake.decodes) == len(set(fake.decodes))
    assert d["baseline_bleu"] == 40


def test_without_the_ablation_only_the_importance_order_is_recorded(monkeypatch):
    from model.training import evaluate

    monkeypatch.setattr(evaluate, "bleu_scores", fake_bleu)
    importance = {k: np.arange(6, dtype=float).reshape(2, 3) + i for i, k in enumerate(KINDS)}
    d = pruning.pruning_curve(Fake(), ["a"], ["a"], importance, None, (0, 1))
    assert "by_loss_increase" not in d and d["curves"]["all"][-1]["heads_off"] == 18
