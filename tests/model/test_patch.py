"""model.analysis.patch and lens: head knockout, activation patching, logit lens, contrastive attribution."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from model.analysis.attribution import attribute
from model.analysis.lens import contrast, contrast_ids, logit_lens, logit_lens_ids
from model.analysis.patch import (
    KINDS,
    forced_tensors,
    knockout,
    knockout_ids,
    patching,
    patching_ids,
    point,
    record_run,
)
from model.inference.translator import Translator
from model.nn.hooks import attn_name
from model.patch import SCHEMA, main
from model.records import MIN_GAP

ROOT = Path(__file__).resolve().parents[2]
CLEAN, CORRUPT = "Ein Mann fährt Fahrrad.", "Ein Kind liest Fahrrad."  # five tokens each


def forced(tr: Translator, text: str = CLEAN):
    """(source ids, target ids: greedy output + end token, start id, target tokens) of one sentence."""
    tgt = tr.translate(text).raw_tokens + [tr.tgt_vocab.token("eos")]
    return tr.prepare(text).ids, tr.tgt_vocab.encode(tgt), tr.tgt_vocab.bos_idx, tgt


def gold_log_probs(model, src_ids, tgt_ids, bos, hooks=()) -> np.ndarray:
    """(T,) log p(y_i) of one plain forward pass (batch 1)."""
    src, tgt_in, gold = forced_tensors(model, src_ids, tgt_ids, bos)
    with torch.inference_mode():
        lp = model.run_with_hooks(src, tgt_in, hooks)
    return lp[0].gather(-1, gold[:, None])[:, 0].double().numpy()


STREAM = {"enc_resid": "encoder.{}.hook_resid_post", "dec_resid": "decoder.{}.hook_resid_post"}


def patch_hooks(patch: dict) -> list:
    """{(component, 0-based layer): (where, value)} -> hooks that put `value` in exactly where `where` is True:
    heads' hook_z (where (1, h), value (1, i, h, d_k)) or a layer's hook_resid_post (where (1, n), value (1, n, d))."""
    hooks = []
    for (comp, l), (where, value) in patch.items():
        if comp in KINDS:
            hooks.append((attn_name(comp, l, "hook_z"),
                          lambda z, name, w=where, v=value: torch.where(w.view(1, 1, -1, 1), v, z)))
        else:
            hooks.append((STREAM[comp].format(l),
                          lambda x, name, w=where, v=value: torch.where(w.unsqueeze(-1), v, x)))
    return hooks


def test_record_run_is_the_forward_pass(translator):
    src_ids, tgt_ids, bos, _ = forced(translator)
    src, tgt_in, gold = forced_tensors(translator.model, src_ids, tgt_ids, bos)
    run = record_run(translator.model, src, tgt_in)
    with torch.inference_mode():
        lp, cache = translator.model.run_with_cache(src, tgt_in)
        ours = translator.model.generator(run.states)
    assert (ours - lp).abs().max() < 1e-5
    names = [attn_name(kind, l, "hook_z") for kind in KINDS for l in range(translator.cfg.kind_layers[kind])]
    names += [name.format(l) for name in STREAM.values() for l in range(translator.cfg.n_decoder_layers)]
    for name in names:
        assert (run.cache[name] - cache[name]).abs().max() < 1e-5, name


def test_patching_a_run_into_itself_changes_nothing_and_leaves_the_effect_undefined(translator):
    src_ids, tgt_ids, bos, _ = forced(translator)
    res = patching_ids(translator.model, src_ids, src_ids, tgt_ids, bos)
    base = gold_log_probs(translator.model, src_ids, tgt_ids, bos)
    np.testing.assert_allclose(res["corrupt_log_probs"], base, atol=1e-5)
    np.testing.assert_allclose(res["clean_log_probs"], base, atol=1e-5)
    for comp, lp in res["log_probs"].items():
        np.testing.assert_allclose(lp, np.broadcast_to(base, lp.shape), atol=1e-5, err_msg=comp)
        assert np.isnan(res["effect"][comp]).all(), comp  # clean == corrupt: 0 / 0


def test_patching_every_cross_head_or_a_final_residual_restores_the_clean_output(translator):
    model, cfg = translator.model, translator.cfg
    src_ids, tgt_ids, bos, _ = forced(translator)
    bad_ids = translator.prepare(CORRUPT).ids
    clean_src, tgt_in, _ = forced_tensors(model, src_ids, tgt_ids, bos)
    bad_src, _, _ = forced_tensors(model, bad_ids, tgt_ids, bos)
    clean = record_run(model, clean_src, tgt_in)
    want = gold_log_probs(model, src_ids, tgt_ids, bos)
    corrupt = gold_log_probs(model, bad_ids, tgt_ids, bos)
    assert np.abs(want - corrupt).max() > 1e-2  # the corruption matters, so restoring it means something
    heads = torch.ones(1, cfg.n_heads, dtype=torch.bool)
    every_cross = {("cross", l): (heads, clean.cache[point("cross", l)]) for l in range(cfg.n_decoder_layers)}
    s, t = clean_src.shape[1], tgt_in.shape[1]
    enc, dec = cfg.n_encoder_layers - 1, cfg.n_decoder_layers - 1
    last_enc = {("enc_resid", enc): (torch.ones(1, s, dtype=torch.bool), clean.cache[point("enc_resid", enc)])}
    last_dec = {("dec_resid", dec): (torch.ones(1, t, dtype=torch.bool), clean.cache[point("dec_resid", dec)])}
    for patch in (every_cross, last_enc, last_dec):
        got = gold_log_probs(model, bad_ids, tgt_ids, bos, patch_hooks(patch))
        np.testing.assert_allclose(got, want, atol=1e-5)
    # In the grid, the last decoder layer's stream at position i restores token i exactly; later positions
    # cannot reach it (causal mask).
    res = patching_ids(model, src_ids, bad_ids, tgt_ids, bos)
    last = res["effect"]["dec_resid"][-1]  # (t, T)
    defined = ~np.isnan(np.diagonal(last))
    assert defined.any()
    np.testing.assert_allclose(np.diagonal(last)[defined], 1.0, atol=1e-3)
    assert np.all(np.abs(np.triu(np.nan_to_num(last.T), 1)) < 1e-4)  # row i (token), column q > i (position)


def test_knockout_of_a_head_whose_output_is_already_zero_changes_nothing(translator):
    src_ids, tgt_ids, bos, _ = forced(translator)
    model = copy.deepcopy(translator.model)
    d_k = model.cfg.d_k
    silent = {"enc_self": (1, 2), "dec_self": (0, 1), "cross": (1, 3)}
    with torch.no_grad():
        for kind, (l, hh) in silent.items():
            layer = (model.encoder if kind == "enc_self" else model.decoder)[l]
            attn = layer.cross_attn if kind == "cross" else layer.attn
            attn.w_o.weight[:, hh * d_k : (hh + 1) * d_k] = 0.0  # W_O never reads this head
    res = knockout_ids(model, src_ids, tgt_ids, bos)
    for kind, (l, hh) in silent.items():
        np.testing.assert_allclose(res["delta"][kind][l, hh], 0.0, atol=1e-6)
        assert np.abs(res["delta"][kind]).max() > 1e-4  # the other heads of that kind do matter


def test_batched_knockout_equals_one_head_at_a_time(translator):
    model = translator.model
    src_ids, tgt_ids, bos, tgt = forced(translator)
    res = knockout_ids(model, src_ids, tgt_ids, bos)
    one_row = knockout_ids(model, src_ids, tgt_ids, bos, batch_tokens=1)  # a pass per row
    base = gold_log_probs(model, src_ids, tgt_ids, bos)
    np.testing.assert_allclose(res["log_probs"], base, atol=1e-5)
    for kind in KINDS:
        np.testing.assert_allclose(one_row["delta"][kind], res["delta"][kind], atol=1e-5)
        for l in range(res["delta"][kind].shape[0]):
            for hh in range(model.cfg.n_heads):
                off = gold_log_probs(model, src_ids, tgt_ids, bos, translator.hooks([(kind, l, hh)]))
                np.testing.assert_allclose(res["delta"][kind][l, hh], off - base, atol=1e-5)
    some = knockout(translator, CLEAN, tgt, positions=[1, 2])
    assert some.positions == [1, 2] and some.delta["cross"].shape == (model.cfg.n_decoder_layers, 4, 2)
    np.testing.assert_allclose(some.delta["cross"], res["delta"]["cross"][..., 1:3], atol=1e-5)


def test_batched_patching_equals_one_component_at_a_time(translator):
    model = translator.model
    src_ids, tgt_ids, bos, tgt = forced(translator)
    bad_ids = translator.prepare(CORRUPT).ids
    res = patching_ids(model, src_ids, bad_ids, tgt_ids, bos)
    clean = record_run(model, *forced_tensors(model, src_ids, tgt_ids, bos)[:2])
    for comp, grid in res["log_probs"].items():
        donor = [clean.cache[point(comp, l)] for l in range(grid.shape[0])]
        for l in range(grid.shape[0]):
            for k in range(grid.shape[1]):
                where = torch.zeros(1, grid.shape[1], dtype=torch.bool)
                where[0, k] = True
                one = gold_log_probs(model, bad_ids, tgt_ids, bos, patch_hooks({(comp, l): (where, donor[l])}))
                np.testing.assert_allclose(grid[l, k], one, atol=1e-5, err_msg=f"{comp} {l} {k}")
    gap = res["clean_log_probs"] - res["corrupt_log_probs"]
    expect = (res["log_probs"]["cross"] - res["corrupt_log_probs"]) / gap
    np.testing.assert_allclose(res["effect"]["cross"], np.where(np.abs(gap) >= MIN_GAP, expect, np.nan), atol=1e-9)
    at_step = patching(translator, CLEAN, CORRUPT, tgt, positions=[2])
    np.testing.assert_allclose(at_step.log_probs["enc_resid"], res["log_probs"]["enc_resid"][..., 2:3], atol=1e-5)
    assert at_step.src_tokens[1] == "Mann" and at_step.corrupt_tokens[1] == "Kind"


def test_sources_of_different_lengths_are_refused(translator):
    _, tgt_ids, bos, tgt = forced(translator)
    with pytest.raises(ValueError, match="same number of tokens"):
        patching(translator, CLEAN, "Ein kleines Kind liest Fahrrad.", tgt)
    with pytest.raises(ValueError, match="same number of tokens"):
        patching_ids(translator.model, [4, 5, 3], [4, 3], tgt_ids, bos)
    with pytest.raises(ValueError, match="not a hook point.*decoder.0.hook_mlp_out"):  # a typo names the point
        translator.model.run_with_hooks(torch.tensor([[4, 3]]), torch.tensor([[bos]]),
                                        [("decoder.0.hook_mlp_ot", lambda x, name: x)])


def test_logit_lens_last_layer_is_the_models_distribution(translator):
    src_ids, tgt_ids, bos, tgt = forced(translator)
    src, tgt_in, gold = forced_tensors(translator.model, src_ids, tgt_ids, bos)
    with torch.inference_mode():
        probs = translator.model(src, tgt_in)[0].exp().double().numpy()  # (T, V)
    steps = list(range(len(tgt_ids)))
    res = logit_lens_ids(translator.model, src_ids, tgt_ids, bos, steps, k=3)
    assert res["top_probs"].shape == (len(steps), translator.cfg.n_decoder_layers, 3)
    for i in steps:
        np.testing.assert_allclose(res["top_probs"][i, -1], np.sort(probs[i])[::-1][:3], atol=1e-5)
        np.testing.assert_allclose(res["chosen_probs"][i, -1], probs[i, tgt_ids[i]], atol=1e-5)
        assert res["chosen_ranks"][i, -1] == 1 + (probs[i] > probs[i, tgt_ids[i]]).sum()
    lens = logit_lens(translator, CLEAN, tgt, 1, k=3)
    assert lens.chosen_token == tgt[1] and lens.top_tokens[-1][0] == translator.tgt_vocab.itos[probs[1].argmax()]
    assert np.all(np.diff(lens.top_probs, axis=1) <= 0)


def test_contrast_of_a_token_with_itself_is_zero_and_otherwise_the_difference(translator):
    src_ids, tgt_ids, bos, tgt = forced(translator)
    step, foil = 1, "woman"
    same = contrast(translator, CLEAN, tgt, step, tgt[step])
    assert same.log_prob_diff == 0.0
    assert not same.input_x_grad.any() and not same.relevance.any()
    assert all(not v.any() for v in same.heads.values())
    c = contrast(translator, CLEAN, tgt, step, foil)
    assert c.target == tgt[step] and abs(c.log_prob_diff) > 1e-3
    # Linear in the objective: input × gradient of log p(A) − log p(B) = that of log p(A) minus that of log p(B).
    other = tgt[:step] + [foil] + tgt[step + 1 :]
    ixg_a = attribute(translator, CLEAN, tgt, ("input_x_grad",), rows=[step]).signed["input_x_grad"][0]
    ixg_b = attribute(translator, CLEAN, other, ("input_x_grad",), rows=[step]).signed["input_x_grad"][0]
    np.testing.assert_allclose(c.input_x_grad, ixg_a - ixg_b, atol=1e-4)
    assert c.relevance.min() >= 0 and abs(c.relevance.sum() - 1) < 1e-6
    # The head ranking is the knockout of the difference, one head at a time.
    kind, l, hh, change = c.top_heads[0]
    assert abs(change) == max(abs(v).max() for v in c.heads.values())
    a_id, b_id = tgt_ids[step], translator.tgt_vocab.stoi[foil]
    src, tgt_in, _ = forced_tensors(translator.model, src_ids, tgt_ids, bos)
    with torch.inference_mode():
        on = translator.model(src, tgt_in)[0, step]
        off = translator.model.run_with_hooks(src, tgt_in, translator.hooks([(kind, l, hh)]))[0, step]
    assert abs(float((off[a_id] - off[b_id]) - (on[a_id] - on[b_id])) - change) < 1e-4
    with pytest.raises(ValueError, match="not a token"):
        contrast(translator, CLEAN, tgt, step, "zebra-unknown")


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """The tiny Marian model of test_marian.py, imported into a checkpoint (built here, nothing downloaded)."""
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from test_marian import build_marian

    from model.io.import_marian import import_marian

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("marian-patch")
    import_marian(str(build_marian(root / "hf")), root / "ours")
    return Translator.from_checkpoint(root / "ours")


def _runs_everywhere(tr: Translator, clean: str, corrupt: str) -> None:
    """Every computation on one translator: shapes, the lens's last layer, and a final residual restoring."""
    src_ids, tgt_ids, bos, tgt = forced(tr, clean)
    cfg = tr.cfg
    ko = knockout(tr, clean, tgt)
    assert ko.delta["enc_self"].shape == (cfg.n_encoder_layers, cfg.n_heads, len(tgt))
    pa = patching(tr, clean, corrupt, tgt)
    assert pa.effect["dec_resid"].shape == (cfg.n_decoder_layers, len(tgt), len(tgt))
    last = np.diagonal(pa.log_probs["dec_resid"][-1])
    np.testing.assert_allclose(last, pa.clean_log_probs, atol=1e-4)
    lens = logit_lens_ids(tr.model, src_ids, tgt_ids, bos, [len(tgt) - 1])
    np.testing.assert_allclose(lens["chosen_probs"][0, -1], np.exp(gold_log_probs(tr.model, src_ids, tgt_ids, bos)[-1]),
                               atol=1e-5)
    same = contrast_ids(tr.model, src_ids, tgt_ids, bos, 0, tgt_ids[0], tgt_ids[0])
    assert not same["input_x_grad"].any()


def test_tiny_marian_model(marian):
    assert not marian.cfg.norm_first  # post-norm: no final decoder norm, the lens reads layer outputs as they are
    words = marian.prepare("Der Hund läuft im Park.").tokens
    swapped = marian.prepare("Der Mann läuft im Park.").tokens
    assert len(words) == len(swapped)
    _runs_everywhere(marian, "Der Hund läuft im Park.", "Der Mann läuft im Park.")


def test_untrained_twin(translator):
    _runs_everywhere(translator.untrained_twin(), CLEAN, CORRUPT)


def _parse(text: str) -> dict:
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)  # NaN / Infinity are no JSON


def test_command_line_on_the_tiny_checkpoint(tmp_path, capsys):
    from tiny_checkpoint import make_tiny_checkpoint

    folder = make_tiny_checkpoint(tmp_path / "tiny")
    clean, corrupt = "Ein Hund läuft im Schnee.", "Ein Mann läuft im Schnee."
    out = tmp_path / "patch.json"
    assert main(["--checkpoint", str(folder), "--clean", clean, "--corrupt", corrupt, "--out", str(out)]) == 0
    d = _parse(out.read_text(encoding="utf-8"))
    assert d["schema"] == SCHEMA
    T, s, L = len(d["tgt_tokens"]), len(d["clean"]["src_tokens"]), d["model"]["n_decoder_layers"]
    assert d["steps"] == list(range(1, T + 1)) and d["tgt_tokens"][-1] == "<eos>"
    assert np.asarray(d["knockout"]["delta"]["cross"]).shape == (L, d["model"]["n_heads"], T)
    assert np.asarray(d["patching"]["log_probs"]["enc_resid"]).shape == (d["model"]["n_encoder_layers"], s, T)
    assert [x["layer"] for x in d["logit_lens"][0]["layers"]] == list(range(1, L + 1))
    # --step N: one step, 1-based
    assert main(["--checkpoint", str(folder), "--clean", clean, "--corrupt", corrupt, "--out", str(out),
                 "--step", "2"]) == 0
    d2 = _parse(out.read_text(encoding="utf-8"))
    assert d2["steps"] == [2] and [x["step"] for x in d2["logit_lens"]] == [2]
    assert np.allclose(np.asarray(d2["knockout"]["delta"]["enc_self"])[..., 0],
                       np.asarray(d["knockout"]["delta"]["enc_self"])[..., 1], atol=1e-5)
    capsys.readouterr()
    assert main(["--checkpoint", str(folder), "--clean", clean, "--corrupt", "Ein großer Hund läuft im Schnee."]) == 2
    assert "same number of tokens" in capsys.readouterr().err
    # As a process: exits 0 after its job, JSON on standard output.
    done = subprocess.run([sys.executable, "-m", "model.patch", "--checkpoint", str(folder), "--clean", clean,
                           "--corrupt", corrupt, "--step", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert _parse(done.stdout)["steps"] == [1]
