"""model.analyze: the report the CLI writes on a tiny checkpoint (the measures themselves: test_analyze_measures.py)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from model.analysis import analyze, importance, measures, pruning, report, sentences
from model.records import KINDS
from tests.tiny_checkpoint import ENGLISH, GERMAN, make_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[2]
# The tiny model's sentences, plus two with words it has never seen (rare-word candidates) and one without a stop.
SRC = GERMAN + ["Ein Zebra rennt im Schnee!", "Zwei Männer spielen Fußball", "Ein Hund schläft."]
REF = ENGLISH + ["A zebra runs in the snow!", "Two men play soccer", "A dog sleeps."]


# ----------------------------------------------------------------------------- the report on a tiny checkpoint

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(checkpoint folder, src file (gz), ref file, report written by the CLI in a subprocess)."""
    base = tmp_path_factory.mktemp("analyze")
    folder = make_tiny_checkpoint(base / "demo")
    src = base / "val.de.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write("\n".join(SRC) + "\n")
    ref = base / "val.en"
    ref.write_text("\n".join(REF) + "\n", encoding="utf-8")
    out = base / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "model.analyze", "--checkpoint", str(folder), "--src", str(src),
                           "--ref", str(ref), "--out", str(out), "--batch-tokens", "40", "--pruning-limit", "0",
                           "--threads", "1"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    return folder, src, ref, report.load_report(out)


@pytest.mark.slow
def test_cli_report_has_the_schema(tiny):
    folder, src, ref, d = tiny
    assert d["schema"] == report.SCHEMA and d["checkpoint"] == "demo"
    assert d["corpus"]["sentences"] == len(SRC) and d["corpus"]["src"] == f"{src.parent.name}/val.de.gz"
    assert d["corpus"]["src_final_punct"] == len(SRC) - 1  # "Zwei Männer spielen Fußball" has no stop
    for kind, k in d["kinds"].items():
        assert (k["layers"], k["heads"]) == (2, 4)
        assert set(measures.HeadStats.measure_names(kind)) <= set(k["measures"])
        assert {"importance", "importance_raw", "ablation_loss_increase"} <= set(k["measures"])
        assert all(r and isinstance(r[0], str) for layer in k["roles"] for r in layer)
        assert np.array(k["offset_pattern"]["weights"]).shape == (2, 4, len(measures.PATTERN_OFFSETS))
        ids = k["top_sentences"]["ids"]
        assert all(len(h) == measures.TOP_SENTENCES and set(h) <= set(range(len(SRC))) for layer in ids for h in layer)
    assert d["kinds"]["cross"]["best_layer"] in (0, 1)
    assert set(d["definitions"]) >= {"confidence", "entropy_fraction", "rare_share", "importance", "roles"}
    norm = np.concatenate([np.ravel(v) for v in d["importance"]["normalised"].values()])
    assert norm.min() == 0.0 and norm.max() == 1.0
    curves = d["pruning"]["curves"]
    assert set(curves) == {"enc_self", "dec_self", "cross", "all"}
    assert [p["heads_off"] for p in curves["enc_self"]] == [0, 1, 2, 2, 3, 4, 5, 6, 6, 7, 8]
    assert curves["all"][-1]["heads_off"] == 24 and all(len(c) == 11 for c in curves.values())
    assert curves["all"][0]["bleu"] == d["pruning"]["baseline_bleu"] == curves["cross"][0]["bleu"]
    assert d["pruning"]["sentences"] == len(SRC)
    assert set(d["timings"]) >= {"measures_importance", "ablation", "pruning", "total"}


def test_report_agrees_with_the_translators_teacher_forced_traces(tiny):
    """Confidence and entropy per head, recomputed sentence by sentence from Translator.teacher_forced."""
    from model.inference.translator import Translator
    from model.text.tokenize import tokenize

    folder, _, _, d = tiny
    tr = Translator.from_checkpoint(folder)
    traces = [tr.teacher_forced(s, tokenize(r, "en")) for s, r in zip(SRC, REF)]
    assert_confidence_and_entropy(d, [{k: st.probs(k) for k in KINDS} for st in traces])


def assert_confidence_and_entropy(report: dict, maps: list[dict]) -> None:
    """The report's confidence and entropy per head equal the means over the rows of every sentence's
    {kind: (L, h, i, j)} attention maps (every row a real query)."""
    for kind in KINDS:
        p = [m[kind].astype(np.float64) for m in maps]
        rows = sum(x.shape[2] for x in p)
        confidence = sum(x.max(-1).sum(-1) for x in p) / rows
        entropy = sum(-(x * np.log(np.where(x > 0, x, 1))).sum(-1).sum(-1) for x in p) / rows
        assert report["kinds"][kind]["queries"] == rows
        np.testing.assert_allclose(report["kinds"][kind]["measures"]["confidence"], confidence, atol=1e-4)
        np.testing.assert_allclose(report["kinds"][kind]["measures"]["entropy"], entropy, atol=1e-4)


def strings(x) -> list[str]:
    """Every string value in a JSON tree."""
    x = list(x.values()) if isinstance(x, dict) else x
    return [s for v in x for s in strings(v)] if isinstance(x, list) else [x] if isinstance(x, str) else []


def test_no_report_holds_a_machine_path(tiny):
    """The CLI was given absolute paths in a tmp folder: the report names each file by its folder and its name."""
    folder, _, ref, d = tiny
    assert d["corpus"]["ref"] == f"{ref.parent.name}/val.en" and len(strings(d)) > 100
    assert not [t for t in strings(d) if os.path.isabs(t) or str(folder.parent) in t or str(Path.home()) in t]


def test_importance_is_per_sentence_and_the_same_for_any_batching(tiny):
    """I_h = sum over sentences of |dL(x)/dxi_h| / target tokens: the CLI's batches of 40 padded tokens, one batch
    of all sentences, and one backward pass per sentence (gates shared by a batch of one) agree."""
    from model.inference.translator import Translator

    folder, _, _, d = tiny
    tr = Translator.from_checkpoint(folder)
    examples, _ = sentences.prepare(tr, SRC, REF)
    grads = [importance.head_mask_gradient(tr.model, *importance.example_tensors(examples, [n], tr))[1]
             for n in range(len(SRC))]
    one_batch = analyze.analyze(tr, SRC, REF, ablation=False, pruning=False, batch_tokens=10**6)
    for k in KINDS:
        expected = sum(g[k].double().abs().numpy() for g in grads) / d["importance"]["tokens"]
        assert expected.min() > 1e-4  # real gradients
        for r in (d, one_batch):
            np.testing.assert_allclose(r["kinds"][k]["measures"]["importance_raw"], expected, rtol=2e-5)
        np.testing.assert_allclose(d["importance"]["normalised"][k], one_batch["importance"]["normalised"][k],
                                   atol=1e-5)


def test_report_floats_keep_six_significant_figures():
    assert report.rounded({"a": [1.23456789e-7, np.float32(0.5)], "b": np.array([123456.789, -2.0e-9])}) == {
        "a": [1.23457e-7, 0.5], "b": [123457.0, -2.0e-9]}


def test_a_marian_models_start_query_counts_in_the_head_measures(tmp_path):
    """Marian starts decoding from <pad>, a real query. Every kind's confidence and entropy equal those of Hugging
    Face's own attentions for the same sentences and references."""
    from transformers import MarianMTModel, MarianTokenizer

    from model.inference.translator import Translator
    from model.io.import_marian import import_marian
    from tests.model.test_marian import DE, EN, build_marian, sentences

    import_marian(str(build_marian(tmp_path / "hf")), tmp_path / "ours")
    tr = Translator.from_checkpoint(tmp_path / "ours")
    hf = MarianMTModel.from_pretrained(str(tmp_path / "hf"), attn_implementation="eager").eval()
    tok = MarianTokenizer.from_pretrained(str(tmp_path / "hf"))
    src, ref = sentences(DE, 4, 11), sentences(EN, 4, 12)
    d = analyze.analyze(tr, src, ref, ablation=False, pruning=False)
    maps = []
    for s, r in zip(src, ref):
        tgt = [tr.cfg.decoder_start_idx] + tok(text_target=r)["input_ids"][:-1]  # <pad> y1 .. yn
        with torch.inference_mode():
            out = hf(input_ids=torch.tensor([tok(s)["input_ids"]]), decoder_input_ids=torch.tensor([tgt]),
                     output_attentions=True)
        maps.append({kind: torch.cat(m).numpy() for kind, m in zip(
            KINDS, (out.encoder_attentions, out.decoder_attentions, out.cross_attentions))})
    assert d["kinds"]["dec_self"]["queries"] == d["corpus"]["tokens"]["tgt"]  # <pad> y1 .. yn: n + 1 each
    assert_confidence_and_entropy(d, maps)


def test_ablation_matches_forward_with_a_head_mask_and_changes_the_loss(tiny):
    from model.inference.translator import Translator

    folder, _, _, d = tiny
    tr = Translator.from_checkpoint(folder)
    examples, _ = sentences.prepare(tr, SRC, REF)
    heads = [("enc_self", 1, 2), ("dec_self", 0, 1), ("cross", 1, 3)]
    base, off = pruning.ablation_losses(tr, examples, heads, batch_tokens=40)
    for head in [None] + heads:
        total = 0.0
        for batch in importance.example_batches(examples, 1000):
            src, tgt_in, tgt_out = importance.example_tensors(examples, batch, tr)
            with torch.no_grad():
                lp = tr.model.run_with_hooks(src, tgt_in, tr.hooks([head] if head else None))
            total += float(importance.token_nll(lp, tgt_out, tr.cfg.pad_idx))
        assert total == pytest.approx(base if head is None else off[head], rel=1e-5)
    assert all(abs(off[h] - base) > 1e-4 for h in heads)
    tokens = d["ablation"]["tokens"]
    for kind, layer, head in heads:
        assert d["kinds"][kind]["measures"]["ablation_loss_increase"][layer][head] == pytest.approx(
            (off[(kind, layer, head)] - base) / tokens, abs=2e-5)
    assert d["corpus"]["mean_token_nll"] == pytest.approx(base / tokens, abs=1e-4)


def test_analyze_reports_progress_and_skips_empty_pairs(tiny):
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(tiny[0])
    seen = []
    d = analyze.analyze(tr, SRC[:3] + ["   "], REF[:3] + ["x"], ablation=False, pruning=False,
                        progress=lambda f, msg: seen.append((f, msg)))
    assert d["corpus"]["sentences"] == 3 and d["corpus"]["skipped"] == [3]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and all(isinstance(m, str) for _, m in seen)
    assert d["ablation"] is None and d["pruning"] is None
    assert "ablation_loss_increase" not in d["kinds"]["cross"]["measures"]


# ----------------------------------------------------------------------------- where the report goes, and errors

def test_a_read_only_checkpoint_falls_back_to_the_cache_folder(tiny, tmp_path, monkeypatch, capsys):
    import shutil

    folder = Path(shutil.copytree(tiny[0], tmp_path / "readonly-demo"))
    monkeypatch.setenv(report.CACHE_ENV, str(tmp_path / "cache"))
    os.chmod(folder, 0o555)
    try:
        if not os.access(folder, os.W_OK) or os.geteuid() == 0:  # root may write anyway: make the probe say no
            monkeypatch.setattr(report, "folder_writable", lambda f: Path(f).resolve() != folder.resolve())
        code = analyze.main(["--checkpoint", str(folder), "--src", str(tiny[1]), "--ref", str(tiny[2]),
                             "--no-ablation", "--no-pruning", "--threads", "1"])
    finally:
        os.chmod(folder, 0o755)
    assert code == 0
    expected = tmp_path / "cache" / "attention-atlas" / "readonly-demo" / report.REPORT_NAME
    assert f"wrote {expected}" in capsys.readouterr().out
    assert not (folder / report.REPORT_NAME).exists()
    assert report.load_report(expected)["checkpoint"] == "readonly-demo"
    # writable: next to the checkpoint
    monkeypatch.undo()
    monkeypatch.setenv(report.CACHE_ENV, str(tmp_path / "cache"))
    assert analyze.main(["--checkpoint", str(folder), "--src", str(tiny[1]), "--ref", str(tiny[2]), "--limit", "2",
                         "--no-ablation", "--no-pruning", "--threads", "1"]) == 0
    assert report.load_report(folder / report.REPORT_NAME)["corpus"]["sentences"] == 2


def test_missing_validation_data_names_every_folder_looked_in(tiny, tmp_path, monkeypatch, capsys):
    from model.analysis import experiments

    looked = [tmp_path / "a", tmp_path / "b"]
    monkeypatch.setattr(experiments, "data_dir_candidates", lambda: looked)
    assert analyze.main(["--checkpoint", str(tiny[0]), "--no-ablation", "--no-pruning"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and all(str(p) in err for p in looked) and "val.de" in err
    assert analyze.main(["--checkpoint", str(tiny[0]), "--src", str(tiny[1])]) == 2  # --src without --ref
    assert analyze.main(["--checkpoint", str(tmp_path / "nope"), "--src", str(tiny[1]), "--ref", str(tiny[2])]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_load_report_rejects_what_is_not_a_report(tiny, tmp_path):
    d = tiny[3]
    with pytest.raises(report.ReportError, match="no head report"):
        report.load_report(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(report.ReportError, match="not a readable JSON"):
        report.load_report(bad)
    for change, match in ((lambda r: r.update(schema="attention-atlas-trace/1"), "schema is"),
                          (lambda r: r.pop("kinds"), "'kinds' is missing"),
                          (lambda r: r["kinds"]["cross"]["measures"]["confidence"].pop(), "not a 2 x 4 grid"),
                          (lambda r: r["kinds"]["enc_self"]["measures"].pop("rare_share"), "rare_share is missing")):
        r = json.loads(json.dumps(d))
        change(r)
        bad.write_text(json.dumps(r), encoding="utf-8")
        with pytest.raises(report.ReportError, match=match):
            report.load_report(bad)
    gz = tmp_path / "r.json.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        json.dump(d, f)
    assert report.load_report(gz)["schema"] == report.SCHEMA
