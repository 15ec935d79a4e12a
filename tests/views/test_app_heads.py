"""AppTest of the head analysis pages: the Heads report card (computed from the page, read, broken, busy) and the
Decoding view's attribution of the chosen step."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.app_support import array, chart, run_app, serving, spec, visible_text
from tests.tiny_checkpoint import GERMAN
from tests.views.test_app_heads_effect import assert_agreement_line

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "multi30k-de-en"


def wait_for_job(name: str, timeout: float = 90.0):
    from views.plumbing import jobs

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = jobs.job(name)
        if job is not None and job.done:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {name} did not finish in {timeout:.0f} s")


def test_without_a_report_the_page_says_where_it_looked_and_computes_one(heads_env):
    from model.analysis import analyze
    from model.analysis.report import load_report
    from model.inference.translator import Translator
    from model.records import KINDS

    report_file = heads_env["root"] / "demo" / "head_report.json"
    assert not report_file.exists()
    at = run_app(view="Heads")
    assert not at.exception
    text = visible_text(at)
    # where it looked, named relative to the checkpoint folder and by the cache folder's setting, never the server's
    assert "no head report" in text and "`checkpoints/demo/head_report.json`" in text
    assert "`$XDG_CACHE_HOME/attention-atlas/demo/head_report.json`" in text
    assert str(heads_env["root"]) not in text and str(heads_env["cache"]) not in text
    at.button(key="heads_compute_0").click().run()
    assert not at.exception
    job = wait_for_job("head-report:demo")
    assert job.error is None and job.result == str(report_file)
    at.run()
    assert not at.exception
    assert "no head report" not in visible_text(at)
    # The page shows the file's numbers, and the file holds what analyze() computes on that split.
    shown = load_report(report_file)
    assert (shown["corpus"]["src"], shown["corpus"]["ref"]) == ("data/val.de.gz", "data/val.en.gz")  # no server path
    assert "from `data/val.de.gz`" in visible_text(at) and str(heads_env["data"]) not in visible_text(at)
    direct = analyze.analyze(Translator.from_checkpoint(heads_env["root"] / "demo"), heads_env["src"],
                             heads_env["ref"], ablation=False, pruning=False)
    for kind in KINDS:
        for m in ("confidence", "entropy", "importance"):
            np.testing.assert_allclose(np.array(shown["kinds"][kind]["measures"][m]),
                                       np.array(direct["kinds"][kind]["measures"][m]), atol=2e-5)
    grid = chart(at, "heads_grid")
    heat = [t for t in grid["data"] if t["type"] == "heatmap"]
    # no ablation in this report: the grid falls back to importance, as measured (the raw gradient)
    np.testing.assert_allclose(array(heat[2]["z"]),
                               np.array(shown["kinds"]["cross"]["measures"]["importance_raw"], dtype=float))
    assert "Report: `checkpoints/demo/head_report.json`" in visible_text(at)
    assert str(heads_env["root"]) not in visible_text(at)
    # a German-English model's report: each cross head's AER in the grid, each layer's (heads together) beside it
    at = run_app(view="Heads", heads_measure="aer")
    heat = [t for t in chart(at, "heads_grid")["data"] if t["type"] == "heatmap"]
    np.testing.assert_allclose(array(heat[-1]["z"]), np.array(shown["kinds"]["cross"]["measures"]["aer"], dtype=float))
    table = next(t for t in at.markdown if "| ALTI\\+ |" in t.value).value
    alti = shown["alignment"]["layers"]["alti"]
    assert "| ALTI\\+ | " + " | ".join(f"{v:.1f}".replace(".", "\\.") for v in alti) + " |" in table


def test_the_untrained_twin_gets_its_own_report_in_the_cache(heads_env):
    at = run_app(view="Heads", ckpt="demo:untrained")
    assert not at.exception
    (info,) = [i.value for i in at.info if "no head report" in i.value]
    # What holds for random weights: the trained model's report is not theirs, and this page computes theirs.
    assert "for the untrained twin" in info and "not these random ones" in info and "computed here" in info
    assert str(heads_env["root"] / "demo") not in info  # no command that would analyse the trained model instead
    at.button(key="heads_compute_0").click().run()
    job = wait_for_job("head-report:demo:untrained")
    assert job.error is None
    cached_file = heads_env["cache"] / "attention-atlas" / "demo-untrained" / "head_report.json"
    assert job.result == str(cached_file) and cached_file.is_file()
    at.run()
    assert not at.exception and "Report: `$XDG_CACHE_HOME/attention-atlas/demo-untrained/head_report.json`" in \
        visible_text(at)
    assert str(heads_env["cache"]) not in visible_text(at)


def test_a_broken_report_gets_a_message_and_no_trace(heads_env):
    broken = heads_env["root"] / "broken"
    shutil.copytree(heads_env["root"] / "demo", broken, dirs_exist_ok=True)
    (broken / "head_report.json").write_text("{not json", encoding="utf-8")
    at = run_app(view="Heads", ckpt="broken")
    assert not at.exception
    assert any("could not be read" in e.value and "not a readable JSON" in e.value for e in at.error)
    assert at.button(key="heads_compute_0") is not None  # and it offers to compute it again


def test_an_older_report_naming_a_server_path_shows_only_the_folder_and_file(heads_env):
    from model.analysis import analyze
    from model.inference.translator import Translator

    older = heads_env["root"] / "older"
    shutil.copytree(heads_env["root"] / "demo", older, dirs_exist_ok=True)
    report = analyze.analyze(Translator.from_checkpoint(older), heads_env["src"], heads_env["ref"], ablation=False,
                             pruning=False)
    report["corpus"]["src"] = str(heads_env["data"] / "val.de.gz")  # as reports written before the fix hold it
    (older / "head_report.json").write_text(json.dumps(report), encoding="utf-8")
    at = run_app(view="Heads", ckpt="older")
    assert not at.exception
    assert "from `data/val.de.gz`" in visible_text(at) and str(heads_env["data"]) not in visible_text(at)


def test_only_one_heavy_job_at_a_time(heads_env):
    from views.plumbing import jobs

    other = heads_env["root"] / "other"
    shutil.copytree(heads_env["root"] / "demo", other, dirs_exist_ok=True)
    (other / "head_report.json").unlink(missing_ok=True)
    at = run_app(view="Heads", ckpt="other")
    with jobs.heavy_job_slot() as got:
        assert got
        at.button(key="heads_compute_0").click().run()
    assert not at.exception
    assert any("already running" in w.value for w in at.warning)
    assert jobs.job("head-report:other") is None and not (other / "head_report.json").exists()


def test_decoding_attribution_is_the_models_for_the_chosen_step(heads_env):
    from model.analysis.attribution import attribute
    from model.inference.translator import Translator

    at = run_app(view="Decoding", text=GERMAN[0], dec_step=2)
    assert not at.exception
    fig = chart(at, "attribution")
    heat = fig["data"][0]
    z = array(heat["z"])
    np.testing.assert_allclose(z.sum(1), 1.0, atol=1e-4)  # every method's row is a distribution
    tr = Translator.from_checkpoint(heads_env["root"] / "demo")
    res = tr.trace(GERMAN[0])
    a = attribute(tr, GERMAN[0], [s.chosen_token for s in res.steps])
    methods = ["cross_attention", "rollout", "relevance", "input_x_grad"]
    np.testing.assert_allclose(z[:4], np.stack([a.matrices[m][1] for m in methods]), atol=1e-5)
    # the last row: ALTI+'s rollout after the last decoder layer, its source columns scaled to sum to 1
    c = tr.contributions(GERMAN[0], res.raw_tokens + (["<eos>"] if res.finished else []))
    source = c.alti["total"][-1][1, : len(c.source_tokens)]
    np.testing.assert_allclose(z[4], source / source.sum(), atol=1e-5)
    assert f"attribution of “{res.steps[1].chosen_token}”" in fig["layout"]["title"]["text"]


@pytest.mark.skipif(not (SHIPPED / "head_report.json").is_file(), reason="no shipped report")  # it ships
def test_shipped_report_card_shows_the_reports_numbers():
    from model.analysis.report import load_report
    from model.records import KINDS

    report = load_report(SHIPPED / "head_report.json")
    with serving(ROOT / "checkpoints", "multi30k-de-en"):
        at = run_app(view="Heads", heads_measure="confidence", kind="cross", layer=2, head=3, heads_sent=2)
        assert not at.exception
        assert at.session_state["focus"] == "the grid"  # one part at a time, the grid first
        assert not [c for c in at.get("plotly_chart") if "heads_offsets" in c.proto.id]
        grid = chart(at, "heads_grid")
        heat = [t for t in grid["data"] if t["type"] == "heatmap"]
        assert "· = mixed: no role applies" in visible_text(at)
        for t, kind in zip(heat, KINDS):
            np.testing.assert_allclose(array(t["z"]),
                                       np.array(report["kinds"][kind]["measures"]["confidence"], dtype=float))
            assert [[c for c in row] for row in t["text"]][0][0]  # a role in every cell
        for rect in grid["layout"]["shapes"]:  # the outline and the white line inside it
            assert rect["xref"] == "x3" and (rect["x0"], rect["y0"]) == (2.5, 1.5)  # cross L2 H3 outlined
        assert len(grid["layout"]["shapes"]) == 2
        text = visible_text(at)
        before = report["pruning"]["heads_off_before_bleu_drop"]
        assert f"{before['all']} of 36 heads can be switched off" in text
        assert_one_vocabulary(text, report)
        assert "from `multi30k/val.de.gz`" in text and report["corpus"]["src"] == "multi30k/val.de.gz"
        assert f"(encoder self-attention {before['enc_self']} of 12, decoder self-attention {before['dec_self']} " \
               f"of 12, cross-attention {before['cross']} of 12, each group alone)" in text
        assert "Report: `checkpoints/multi30k-de-en/head_report.json`" in text and str(ROOT) not in text
        # the agreement line: confidence (the grid's measure) and importance against the measured loss increase
        assert_agreement_line(text, "Confidence", {k: report["kinds"][k]["measures"]["confidence"] for k in KINDS},
                              report)
        assert_agreement_line(text, "Importance (normalised per layer)",
                              {k: report["kinds"][k]["measures"]["importance"] for k in KINDS}, report)
        at = run_app(view="Heads", heads_measure="confidence", kind="cross", layer=2, head=3, heads_sent=2,
                     focus="one head")
        assert not at.exception
        text = visible_text(at)
        # The heatmap of the second most confident sentence gives the report's confidence for that sentence.
        conf = report["kinds"]["cross"]["top_sentences"]["confidence"][1][2][1]
        assert f"Confidence of this head on the heatmap: {conf:.3f} (the report: {conf:.3f})" in text
        assert "**cross-attention layer 2, head 3** · role:" in text
        assert "Where cross-attention layer 2, head 3 is most confident" in text
        titles = [spec(c)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
        assert titles[0].startswith("cross L2 H3: mean weight") and titles[1].startswith("cross L2 H3 on corpus")
        assert_one_vocabulary(text, report)
        pattern = chart(at, "heads_offsets")["data"][0]
        np.testing.assert_allclose(array(pattern["y"]), report["kinds"]["cross"]["offset_pattern"]["weights"][1][2])
        at.button(key="heads_to_attention").click().run()
        assert not at.exception
        assert at.session_state["view"] == "Attention"
        assert (at.session_state["kind"], at.session_state["layer"], at.session_state["head"]) == ("cross", 2, 3)
        assert any(s.key == "head" and s.value == 3 for s in at.selectbox)


def assert_one_vocabulary(text: str, report: dict) -> None:
    """Heads named in words or short ('cross L2 H3'), never 'cross 2.3' or the URL's 'cross-2-3'; the summary's
    'mixed' is the grid's '·'."""
    import re

    from views.parts.ablation import head_name as ablation_name
    from viz.heads import head_short

    assert not re.search(r"\b(enc|dec|cross) \d+\.\d+|\b(enc_self|dec_self|cross)-\d+-\d+", text), text
    kinds = report["kinds"]
    heads = [(k, l, h) for k in kinds for l in range(kinds[k]["layers"]) for h in range(kinds[k]["heads"])]
    assert all(ablation_name(x) == head_short(*x) for x in heads)  # the ablation chooser writes heads the same way
    aligners = [head_short(*x) for x in heads if kinds[x[0]]["roles"][x[1]][x[2]][0] == "aligner"]
    if aligners and "**Aligners:**" in text:
        assert f"**Aligners:** {', '.join(aligners)}" in text
    if "heads have a role" in text:
        mixed = sum(kinds[k]["roles"][l][h][0] == "mixed" for k, l, h in heads)
        assert f"the other {mixed} are mixed: no role applies (· in the grid)" in text


def test_shipped_pruning_part_draws_the_reports_curves_in_either_order():
    from model.analysis.report import load_report

    report = load_report(SHIPPED / "head_report.json")
    assert "by_loss_increase" in report["pruning"]  # the shipped report records both orders
    with serving(ROOT / "checkpoints", "multi30k-de-en"):
        for order, section in (("importance", report["pruning"]),
                                ("loss_increase", report["pruning"]["by_loss_increase"])):
            at = run_app(view="Heads", focus="pruning", heads_prune_order=order)
            assert not at.exception
            fig = chart(at, "heads_pruning")
            every = next(t for t in fig["data"] if t["name"] == "all heads together")
            bleu = dict((p["heads_off"], p["bleu"]) for p in section["curves"]["all"])
            for x, y in zip(array(every["x"]), array(every["y"])):
                k = round(x * 36 / 100)
                if k in bleu:
                    assert y == pytest.approx(bleu[k])


def test_measure_labels_name_the_models_own_start_and_end_tokens():
    from views.pages.heads import measure_label

    marian = {"end_token": "</s>", "start_token": "<pad>"}
    assert (measure_label("eos_share", marian) == "weight on </s>"
            and measure_label("bos_share", marian) == "weight on <pad>")
    assert measure_label("eos_share", {"end_token": "<eos>", "start_token": "<bos>"}) == "weight on <eos>"



def test_every_bleu_on_the_shipped_pages_names_its_set_and_size():
    """The Overview's BLEU (metrics.json) and the Heads page's pruning baseline (the head report) are measured on
    different sentences: each says which, and how many, from what was recorded."""
    from model.analysis.report import load_report
    from tests.app_support import md_tables

    metrics = json.loads((SHIPPED / "metrics.json").read_text(encoding="utf-8"))
    report = load_report(SHIPPED / "head_report.json")
    pruning = report["pruning"]
    with serving(ROOT / "checkpoints", "multi30k-de-en"):
        at = run_app(view="Overview")
        assert not at.exception
        rows = next(t for t in md_tables(at) if t and "sacreBLEU" in t[0])
        test = metrics["test"]
        assert {r["set"]: r["sacreBLEU"] for r in rows if r["decoding"] == "greedy"} == {
            f"{test['split']}, {test['sentences']:,} sentences": f"{test['greedy']['sacrebleu']:.2f}",
            f"val, {metrics['val']['sentences']:,} sentences": f"{metrics['val']['greedy']['sacrebleu']:.2f}"}
        at = run_app(view="Heads", focus="pruning", heads_prune_order="importance")
        assert not at.exception
        text = visible_text(at).replace("\\", "")
        sample = f"the first {pruning['sentences']} sentences of {report['corpus']['src']}"
        assert f"before greedy BLEU on {sample} falls" in text
        assert f"below {pruning['baseline_bleu']:.2f}, its value with every head on" in text
        assert f"Greedy decoding of {sample} (every head on: BLEU {pruning['baseline_bleu']:.2f})" in text
        notes = [a.get("text") for a in chart(at, "heads_pruning")["layout"].get("annotations", [])]  # axis titles
        assert f"greedy BLEU (first {pruning['sentences']} val sentences)" in notes
