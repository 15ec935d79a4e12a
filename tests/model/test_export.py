"""`python -m model.export`: the traced translation as JSON in the README's schema."""
from __future__ import annotations

import json

import numpy as np
import pytest

from model.io import export
from tests.tiny_checkpoint import GERMAN, make_tiny_checkpoint


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("export") / "demo")


def test_cli_writes_the_schema(folder, tmp_path):
    out = tmp_path / "t.json"
    assert export.main([GERMAN[3], "--checkpoint", str(folder), "--out", str(out), "--top-k", "3"]) == 0
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["schema"] == export.SCHEMA and d["model"]["name"] == "demo" and d["decoding"] == "greedy"
    cfg = d["model"]
    s, t = len(d["src_tokens"]), len(d["tgt_tokens"])
    assert len(d["src_ids"]) == s and len(d["tgt_ids"]) == t and d["src_tokens"][-1] == "<eos>"
    assert d["tgt_tokens"][0] == "<bos>"
    for kind, (q, k), layers in (("enc_self", (s, s), cfg["n_encoder_layers"]),
                                 ("dec_self", (t, t), cfg["n_decoder_layers"]),
                                 ("cross", (t, s), cfg["n_decoder_layers"])):
        a = np.array(d[kind])
        assert a.shape == (layers, cfg["n_heads"], q, k), kind  # [layer][head][query][key]
        assert np.allclose(a.sum(-1), 1.0, atol=1e-4), kind
    assert np.triu(np.array(d["dec_self"]), 1).max() == 0.0  # the causal mask, as recorded
    chosen = [step["chosen"]["token"] for step in d["steps"]]
    assert chosen == d["tgt_tokens"][1:] + (["<eos>"] if d["finished"] else [])
    assert all(len(step["candidates"]) == 3 for step in d["steps"])
    assert all(step["prefix"] == d["tgt_tokens"][: i + 1] for i, step in enumerate(d["steps"]))


def test_cli_file_equals_the_translators_trace(folder, tmp_path):
    from model.inference.translator import Translator

    out = tmp_path / "t.json"
    export.main([GERMAN[0], "--checkpoint", str(folder), "--out", str(out)])
    tr = Translator.from_checkpoint(folder)
    direct = export.trace_dict(tr, tr.trace(GERMAN[0]), "demo")
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(export.to_json(direct))
    assert direct["translation"] == tr.translate(GERMAN[0]).text


def test_cli_reports_a_missing_checkpoint_and_an_empty_sentence(folder, tmp_path, capsys):
    assert export.main(["Ein Hund.", "--checkpoint", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert export.main(["   ", "--checkpoint", str(folder)]) == 2


def test_file_stem_says_what_the_file_holds():
    stem = export.file_stem("multi30k-de-en:untrained", "Ein Hund läuft im Schnee.", "beam search (beam 5)")
    assert stem == "atlas_multi30k-de-en-untrained_Ein-Hund-läuft-im-Schnee_beam-search-beam-5"
    assert "/" not in export.file_stem("x", "a/b\\c<d>", "greedy")


def test_cli_writes_the_activation_cache_by_hook_name(folder, tmp_path, capsys):
    from model.inference.translator import Translator
    from model.nn.transformer import hook_names

    out = tmp_path / "acts.npz"
    assert export.main([GERMAN[0], "--checkpoint", str(folder), "--cache", str(out)]) == 0
    tr = Translator.from_checkpoint(folder)
    saved = np.load(out)
    assert sorted(saved.files) == sorted(hook_names(tr.cfg) + ["src_tokens", "tgt_tokens", "log_probs"])
    log_probs, cache = tr.run_with_cache(GERMAN[0])
    for name, value in cache.items():
        np.testing.assert_allclose(saved[name], value[0].numpy(), atol=1e-6, err_msg=name)  # batch axis dropped
    np.testing.assert_allclose(saved["log_probs"], log_probs[0].numpy(), atol=1e-6)
    assert list(saved["src_tokens"]) == tr.prepare(GERMAN[0]).axis_tokens
    assert saved["tgt_tokens"][0] == tr.tgt_vocab.token("bos") and len(saved["tgt_tokens"]) == log_probs.shape[1]
    only = tmp_path / "cross.npz"
    args = [GERMAN[0], "--checkpoint", str(folder), "--cache", str(only)]
    assert export.main(args + ["--names", "cross_attn.hook_p"]) == 0
    assert {n for n in np.load(only).files if "hook" in n} == {n for n in cache if "cross_attn.hook_pattern" in n}
    assert export.main(args + ["--names", "nothing"]) == 2
    assert "keeps no hook point" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export.main([GERMAN[0], "--checkpoint", str(folder), "--names", "x"])  # --names without --cache
