"""model.analysis.attribution: the rules by hand, the gradient methods on tiny models, the faithfulness command line."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from model.analysis.attribution import DEFAULT_METHODS, METHODS, attribute, attribute_ids, graph_pass
from model.analysis.attribution_rules import causal_maps, explained_rows, normalise_residual, relevance_rules, rollout
from model.analysis.faithfulness import SCHEMA, main

SENTENCE = "Ein Mann fährt Fahrrad."

# Two layers of 3×3 head-averaged attention, rows summing to 1.
A1 = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
A2 = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


def test_rollout_by_hand():
    # Ā1 = (A1 + I)/2 = [[1, 0, 0], [.25, .75, 0], [0, .25, .75]]
    # Ā2 = (A2 + I)/2 = [[.5, .5, 0], [0, .5, .5], [.5, 0, .5]]
    # R = Ā2 · Ā1:  row 0 = .5·[1, 0, 0] + .5·[.25, .75, 0]      = [.625, .375, 0]
    #               row 1 = .5·[.25, .75, 0] + .5·[0, .25, .75]  = [.125, .5, .375]
    #               row 2 = .5·[1, 0, 0] + .5·[0, .25, .75]      = [.5, .125, .375]
    expected = np.array([[0.625, 0.375, 0.0], [0.125, 0.5, 0.375], [0.5, 0.125, 0.375]])
    np.testing.assert_allclose(rollout([A1, A2]), expected, atol=1e-12)
    np.testing.assert_allclose(rollout([A1, A2]).sum(-1), 1.0)
    np.testing.assert_allclose(rollout([A1]), (A1 + np.eye(3)) / 2)


def test_plain_attention_rules_reproduce_rollout_and_eq10_by_hand():
    # With plain (row-stochastic) attention, eq. 6 gives R_ss = Π (I + Ā) = 2^L · rollout.
    r_ss, _, _ = relevance_rules([A1, A2], [np.eye(2)], [np.full((2, 3), 1 / 3)])
    np.testing.assert_allclose(r_ss, 4 * rollout([A1, A2]), atol=1e-12)
    # One decoder layer by hand: eq. 6/7 then eq. 10 with the eqs. 8–9 normalisation.
    a_self = np.array([[1.0, 0.0], [0.5, 0.5]])
    a_cross = np.array([[0.2, 0.8, 0.0], [0.0, 0.0, 1.0]])
    r_ss, r_tt, r_ts = relevance_rules([A1], [a_self], [a_cross])
    r_tt_hand = np.eye(2) + a_self  # R_tt = I + Ā_self · I
    np.testing.assert_allclose(r_tt, r_tt_hand)
    r_tt_bar = np.array([[1.0, 0.0], [0.5, 0.5]]) + np.eye(2)  # (R_tt − I) rows normalised, + I
    r_ss_bar = A1 + np.eye(3)  # R_ss = I + A1, so R_ss − I = A1, whose rows already sum to 1
    np.testing.assert_allclose(normalise_residual(r_tt), r_tt_bar)
    np.testing.assert_allclose(r_ts, r_tt_bar.T @ a_cross @ r_ss_bar)  # R_ts starts at 0, so eq. 7 adds 0


def test_normalise_residual_rows_and_an_untouched_row():
    r = np.array([[1.0, 0.0], [3.0, 2.0]])  # row 0: nothing added to I
    bar = normalise_residual(r)
    np.testing.assert_allclose(bar, [[1.0, 0.0], [0.75, 1.25]])
    np.testing.assert_allclose((bar - np.eye(2))[1].sum(), 1.0)


def test_causal_maps_keep_rows_up_to_the_target():
    m = np.arange(9.0).reshape(3, 3) + 1
    c = causal_maps(m)  # (3 targets, 3, 3)
    assert c.shape == (3, 3, 3)
    assert (c[0, 1:] == 0).all() and (c[1, 2:] == 0).all() and (c[2] == m).all()
    np.testing.assert_array_equal(explained_rows(c), m)


def test_graph_pass_equals_forward_and_keeps_patterns_in_the_graph(make_model):
    import torch

    model = make_model()
    for p in model.parameters():
        p.requires_grad_(False)  # as the app's: gradients come through the embedding leaves alone
    src = torch.tensor([[5, 6, 7, 3]] * 2)
    tgt = torch.tensor([[2, 5, 6]] * 2)
    ref, cache = model.run_with_cache(src, tgt, lambda n: n.endswith("hook_pattern"))
    with torch.enable_grad():
        states, src_leaf, by_kind = graph_pass(model, src, tgt)
        torch.testing.assert_close(model.generator(states), ref, atol=1e-6, rtol=1e-6)
        maps = by_kind["enc_self"] + by_kind["dec_self"] + by_kind["cross"]
        assert all(m.requires_grad for m in maps) and src_leaf.is_leaf and src_leaf.requires_grad
        grads = torch.autograd.grad(states.sum(), maps + [src_leaf])
    assert all(g.abs().sum() > 0 for g in grads[len(model.encoder):])  # decoder-side maps reach the output
    for kind in ("enc_self", "dec_self", "cross"):
        for l, mine in enumerate(by_kind[kind]):
            name = {"enc_self": "encoder.{}.attn", "dec_self": "decoder.{}.attn", "cross": "decoder.{}.cross_attn"}
            torch.testing.assert_close(mine.detach(), cache[name[kind].format(l) + ".hook_pattern"], atol=1e-6,
                                       rtol=1e-6)


def test_attribute_shapes_rows_and_no_state_left(translator):
    """The trained tiny translator has frozen parameters (requires_grad False): gradients still work."""
    model = translator.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = [p.requires_grad for p in model.parameters()]
    tgt = translator.translate(SENTENCE).raw_tokens
    a = attribute(translator, SENTENCE, tgt, METHODS)
    s, t = len(translator.prepare(SENTENCE).ids), len(tgt)
    assert a.src_tokens == translator.prepare(SENTENCE).axis_tokens and a.src_tokens[-1] == "<eos>"
    assert a.tgt_tokens == tgt and set(a.matrices) == set(METHODS) == set(a.definitions)
    for m, mat in a.matrices.items():
        assert mat.shape == (t, s) and mat.dtype == np.float32 and np.isfinite(mat).all(), m
        assert (mat >= 0).all(), m
        np.testing.assert_allclose(mat.sum(1), 1.0, atol=1e-5, err_msg=m)
    assert a.signed["input_x_grad"].shape == (t, s) and a.chosen_probs.shape == (t,)
    assert (a.chosen_probs > 0.5).all()  # the trained model reproduces its sentences
    assert not model.training and [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch_equal(v, before[k]), k
    for mod in model.modules():
        assert not (mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks), mod
    assert attribute(translator, SENTENCE, []).matrices["rollout"].shape == (0, s)


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_parameters_that_require_grad_get_none(make_model, vocabs):
    from model.inference.translator import Translator

    sv, tv = vocabs
    translator = Translator(make_model(), sv, tv)
    assert all(p.requires_grad for p in translator.model.parameters())
    attribute(translator, SENTENCE, ["A", "man", "rides"], ("relevance", "input_x_grad"))
    assert all(p.grad is None for p in translator.model.parameters())


def test_attribution_rows_are_causal(translator):
    """Row i explains y_i from <bos> y_1..y_{i-1}: explaining a shorter prefix gives the same first rows."""
    tgt = translator.translate(SENTENCE).raw_tokens
    full = attribute(translator, SENTENCE, tgt, METHODS)
    part = attribute(translator, SENTENCE, tgt[:3], METHODS)
    for m in METHODS:
        np.testing.assert_allclose(part.matrices[m], full.matrices[m][:3], atol=1e-5, err_msg=m)


def test_explaining_some_rows_gives_those_rows_of_the_whole_matrix(translator):
    """The app explains the step on screen only (`rows`): a batch of one row, the same numbers as that row of the
    whole matrix, for every method, the signed values and the chosen probabilities."""
    tgt = translator.translate(SENTENCE).raw_tokens + ["<eos>"]
    full = attribute(translator, SENTENCE, tgt, METHODS)
    assert full.rows == list(range(len(tgt)))
    for rows in ([0], [len(tgt) - 1], [2, 0]):
        part = attribute(translator, SENTENCE, tgt, METHODS, rows=rows)
        assert part.rows == rows and part.tgt_tokens == tgt
        for m in METHODS:
            assert part.matrices[m].shape == (len(rows), len(full.src_tokens)), m
            np.testing.assert_allclose(part.matrices[m], full.matrices[m][rows], atol=1e-5, err_msg=m)
        np.testing.assert_allclose(part.signed["input_x_grad"], full.signed["input_x_grad"][rows], atol=1e-5)
        np.testing.assert_allclose(part.chosen_probs, full.chosen_probs[rows], atol=1e-5)
    assert (attribute(translator, SENTENCE, tgt, METHODS, rows=[]).matrices["relevance"].shape
            == (0, len(full.src_tokens)))
    with pytest.raises(ValueError, match="target positions"):
        attribute(translator, SENTENCE, tgt, METHODS, rows=[len(tgt)])


def test_a_source_position_hidden_as_padding_gets_zero(translator):
    sv, tv = translator.src_vocab, translator.tgt_vocab
    src = translator.prepare(SENTENCE).ids
    src = src[:1] + [sv.pad_idx] + src[1:]  # a position the source mask hides from every key
    tgt = tv.encode(translator.translate(SENTENCE).raw_tokens)
    res = attribute_ids(translator.model, src, tgt, tv.bos_idx, METHODS)
    for m, mat in res["matrices"].items():
        assert (mat[:, 1] == 0).all(), m
        assert mat[:, [0, 2, 3]].sum() > 0, m
    assert (res["signed"]["input_x_grad"][:, 1] == 0).all()


def test_input_x_gradient_is_the_first_order_change(make_model, vocabs):
    """Scaling source word j's embedding by (1 + ε) changes log p(y_i) by ε · attribution[i, j] to first order."""
    import torch

    sv, tv = vocabs
    model = make_model(seed=3).double()
    src = sv.encode(["Ein", "Mann", "fährt", "Fahrrad", "."]) + [sv.eos_idx]
    tgt = tv.encode(["A", "man", "rides", "a"])
    signed = attribute_ids(model, src, tgt, tv.bos_idx, ("input_x_grad",))["signed"]["input_x_grad"]
    tgt_in = torch.tensor([[tv.bos_idx] + tgt[:-1]])
    eps = 1e-5
    for j in (0, 2, 4):
        logp = []
        for sign in (1, -1):
            perturbed = copy.deepcopy(model)
            with torch.no_grad():
                perturbed.src_embed.lut.weight[src[j]] *= 1 + sign * eps  # the word occurs once in the sentence
                lp = perturbed(torch.tensor([src]), tgt_in)
            logp.append(lp[0, torch.arange(len(tgt)), torch.tensor(tgt)].numpy())
        np.testing.assert_allclose((logp[0] - logp[1]) / (2 * eps), signed[:, j], rtol=1e-6, atol=1e-9)
    assert np.abs(signed).max() > 1e-4  # not trivially zero


def test_heads_switched_off_leave_the_averages(translator):
    """Averages over heads use the heads that are on; an off head passes no gradient either."""
    tgt = translator.translate(SENTENCE).raw_tokens
    st = translator.teacher_forced(SENTENCE, tgt)
    last = st.probs("cross")[-1][:, :-1]  # (h, t, s): teacher_forced also runs the position after y_t
    a = attribute(translator, SENTENCE, tgt, ("cross_attention", "relevance"), off_heads=[("cross", 1, 0)])
    np.testing.assert_allclose(a.matrices["cross_attention"], last[1:].mean(0), atol=1e-6)
    np.testing.assert_allclose(a.matrices["relevance"].sum(1), 1.0, atol=1e-5)


def test_unknown_method_and_train_mode_refused(translator):
    with pytest.raises(ValueError, match="unknown attribution method"):
        attribute(translator, SENTENCE, ["A"], ("saliency",))
    translator.model.train()
    try:
        with pytest.raises(ValueError, match="eval mode"):
            attribute(translator, SENTENCE, ["A"], DEFAULT_METHODS)
    finally:
        translator.model.eval()


def test_attribute_inside_inference_mode(translator):
    import torch

    with torch.inference_mode():
        a = attribute(translator, SENTENCE, ["A", "man"], DEFAULT_METHODS)
    assert a.matrices["relevance"].shape == (2, len(a.src_tokens))


def test_faithfulness_command_line(tmp_path, capsys):
    from tiny_checkpoint import ENGLISH, GERMAN, make_tiny_checkpoint

    folder = make_tiny_checkpoint(tmp_path / "ck")
    src, ref = tmp_path / "s.de", tmp_path / "s.en"
    src.write_text("\n".join(GERMAN) + "\n", encoding="utf-8")
    ref.write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    out = tmp_path / "f.json"
    rc = main(["--checkpoint", str(folder), "--src", str(src), "--ref", str(ref), "--limit", "3", "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA and data["n_sentences"] == 3 and data["n_tokens"] > 0
    assert set(data["methods"]) == set(METHODS) | {"random"}
    for m, r in data["methods"].items():
        for k in ("1", "2", "3"):
            e = r["k"][k]
            assert e["n_tokens"] == data["n_tokens"] and np.isfinite(e["mean_drop"]), (m, k)
            if m != "random":
                assert 0.0 <= e["share_beats_random"] <= 1.0
    sr = data["single_removal"]
    assert sr["oracle_mean_drop"] >= sr["expected_random_mean_drop"]
    assert "relevance" in capsys.readouterr().out
    rc = main(["--checkpoint", str(folder), "--src", str(src), "--ref", str(ref), "--limit", "2", "--out", str(out),
               "--target", "reference"])
    assert rc == 0 and json.loads(out.read_text())["settings"]["target"] == "reference"


def test_faithfulness_command_line_errors(tmp_path, capsys, monkeypatch):
    assert main(["--src", str(tmp_path / "missing.de"), "--out", str(tmp_path / "x.json")]) == 2
    assert "missing.de" in capsys.readouterr().err
    import model.analysis.experiments

    monkeypatch.setattr(model.analysis.experiments, "find_data_dir", lambda split="val": (None, [tmp_path / "nowhere"]))
    assert main(["--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no Multi30k validation split") and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_faithfulness_writes_into_the_current_folder_and_names_files_relative_to_the_repository(tmp_path, monkeypatch):
    """Without --out the result goes to ./faithfulness.json (library code writes nothing into benchmarks/results),
    and the checkpoint and data it names are relative to the repository, not one machine's absolute paths."""
    import os
    from pathlib import Path

    from tiny_checkpoint import GERMAN, make_tiny_checkpoint

    root = Path(__file__).resolve().parents[2]
    folder = make_tiny_checkpoint(tmp_path / "ck")
    src = tmp_path / "s.de"
    src.write_text("\n".join(GERMAN) + "\n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    assert main(["--checkpoint", str(folder), "--src", str(src), "--limit", "1", "--ks", "1"]) == 0
    data = json.loads((tmp_path / "run" / "faithfulness.json").read_text(encoding="utf-8"))
    assert not os.path.isabs(data["checkpoint"]) and not os.path.isabs(data["data"]["src"])
    assert (root / data["checkpoint"]).resolve() == folder.resolve()
    assert (root / data["data"]["src"]).resolve() == src.resolve()
