"""AppTest of the Heads page's measured effect: the grid coloured by the loss increase when a head is switched off
(importance where a report has none), the agreement line (Spearman rho of the grid's measure and of importance with
that loss increase, overall and per kind, checked against pandas), values as measured or normalised per layer, and
the pruning curve in either order; every choice in the link."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from tests.app_support import array, chart, run_app, url, visible_text

GROUP = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention", "cross": "cross-attention"}


@pytest.fixture(scope="module")
def env(heads_env):
    """heads_env (the tiny `demo` model served from this module's own root, a 6-pair validation split in
    ATLAS_DATA_DIR), with `full` beside `demo`: a report computed with the ablation losses and the pruning curve."""
    from model.analysis import analyze
    from model.analysis.report import load_report, write_report
    from model.inference.translator import Translator

    folder = heads_env["root"] / "full"
    shutil.copytree(heads_env["root"] / "demo", folder)
    report = analyze.analyze(Translator.from_checkpoint(folder), heads_env["src"], heads_env["ref"], name="full")
    write_report(report, None, folder)
    return {**heads_env, "full": load_report(folder / "head_report.json")}


@pytest.fixture(scope="module")
def full(env) -> dict:
    return env["full"]


def pandas_rho(a, b) -> float:
    """Spearman's rho computed independently of the app: pandas' average ranks, then Pearson."""
    import pandas as pd

    return float(pd.Series(np.ravel(a)).rank().corr(pd.Series(np.ravel(b)).rank()))


def assert_agreement_line(text: str, name: str, values: dict, report: dict) -> None:
    """The page states rho between `values` and the loss increase, overall and per kind, as pandas computes it,
    with words that follow the sign."""
    text = re.sub(r"\\(.)", r"\1", text)  # Markdown's escapes
    effect = {k: np.array(report["kinds"][k]["measures"]["ablation_loss_increase"], dtype=float) for k in GROUP}
    shown = lambda r: f"ρ = {round(r, 2) or 0.0:.2f}".replace("-", "−")  # noqa: E731
    overall = pandas_rho(np.concatenate([np.ravel(values[k]) for k in GROUP]),
                         np.concatenate([effect[k].ravel() for k in GROUP]))
    n = sum(effect[k].size for k in GROUP)
    m = re.search(rf"{re.escape(name)} and the measured loss increase when a head is switched off ([a-z ]+) across "
                  rf"{n} heads \({shown(overall)}\)", text)
    assert m, (name, shown(overall), text)
    for k, group in GROUP.items():
        rho = pandas_rho(values[k], effect[k])
        if np.isnan(rho):  # a constant measure within the kind
            assert f"within {group} ρ is undefined" in text
            continue
        m2 = re.search(rf"within {group} they ([a-z ]+) \({shown(rho)}, {effect[k].size} heads\)", text[m.start():])
        assert m2, (group, shown(rho), text)
        words, r = m2.group(1), round(rho, 2)  # the words follow the number shown: |ρ| < 0.1 is no relation
        assert words.startswith("agree" if r >= 0.1 else "disagree" if r < -0.1 else "are unrelated"), (words, r)


def title(at, key: str) -> str:
    """A figure's title as one line (long titles are wrapped with <br>)."""
    return chart(at, key)["layout"]["title"]["text"].replace("<br>", " ")


def heatmaps(at) -> list[np.ndarray]:
    return [array(t["z"]) for t in chart(at, "heads_grid")["data"] if t["type"] == "heatmap"]


def test_the_grid_defaults_to_the_measured_effect_and_states_how_the_measures_agree(env, full):
    from model.records import KINDS

    at = run_app(view="Heads", ckpt="full")
    assert not at.exception
    assert at.session_state["heads_measure"] == "ablation_loss_increase" and "heads_measure" not in url(at)
    for z, kind in zip(heatmaps(at), KINDS):
        np.testing.assert_allclose(z, np.array(full["kinds"][kind]["measures"]["ablation_loss_increase"], dtype=float))
    assert "coloured by loss increase when switched off" in title(at, "heads_grid")
    bar = chart(at, "heads_grid")["layout"]["coloraxis"]  # red, as on What if: switching it off made things worse
    assert bar["colorscale"][-1][1] == "rgb(103,0,31)"  # the highest loss increase
    assert "red: worse for the translation" in bar["colorbar"]["title"]["text"]
    text = visible_text(at)
    assert "Red: switching the head off raised the loss (worse for the translation)" in text
    assert_agreement_line(text, "Importance (normalised per layer)",
                          {k: full["kinds"][k]["measures"]["importance"] for k in KINDS}, full)
    assert "Report: `checkpoints/full/head_report.json`" in text and str(env["root"]) not in text
    # another measure on the grid: its own agreement with the loss increase is stated too
    at = run_app(view="Heads", ckpt="full", heads_measure="entropy")
    assert not at.exception
    assert_agreement_line(visible_text(at), "Entropy (nats)",
                          {k: full["kinds"][k]["measures"]["entropy"] for k in KINDS}, full)


def test_without_the_ablation_the_grid_shows_importance_and_says_why(env):
    from model.analysis import analyze
    from model.inference.translator import Translator

    folder = env["root"] / "noablation"
    shutil.copytree(env["root"] / "demo", folder, dirs_exist_ok=True)
    report = analyze.analyze(Translator.from_checkpoint(folder), env["src"], env["ref"], ablation=False, pruning=False)
    (folder / "head_report.json").write_text(json.dumps(report), encoding="utf-8")
    at = run_app(view="Heads", ckpt="noablation")
    assert not at.exception
    assert at.session_state["heads_measure"] == "importance"
    np.testing.assert_allclose(heatmaps(at)[2], np.array(report["kinds"]["cross"]["measures"]["importance_raw"]))
    assert any("this report has no ablation losses" in i.value and "coloured by importance" in i.value
               for i in at.info)
    assert "ρ =" not in visible_text(at)


def test_values_as_measured_or_normalised_per_layer_are_in_the_link(env, full):
    at = run_app(view="Heads", ckpt="full", heads_measure="importance")
    assert not at.exception
    cross = full["kinds"]["cross"]["measures"]
    np.testing.assert_allclose(heatmaps(at)[2], np.array(cross["importance_raw"]))  # as measured: comparable layers
    assert "heads_scale" not in url(at)
    at.radio(key="heads_scale").set_value("layer").run()
    assert not at.exception and url(at)["heads_scale"] == "layer"
    np.testing.assert_allclose(heatmaps(at)[2], np.array(cross["importance"]))  # the report's normalised importance
    assert "importance (normalised per layer)" in title(at, "heads_grid")
    at = run_app(view="Heads", ckpt="full", heads_measure="confidence", heads_scale="layer")
    assert not at.exception
    conf = np.array(cross["confidence"])
    np.testing.assert_allclose(heatmaps(at)[2], conf / np.sqrt((conf ** 2).sum(1, keepdims=True)), rtol=1e-6)
    assert "confidence, normalised per layer" in title(at, "heads_grid")


def pruning_points(at) -> tuple[str, dict[str, list]]:
    fig = chart(at, "heads_pruning")
    return title(at, "heads_pruning"), {t["name"]: list(zip(array(t["x"]), array(t["y"]))) for t in fig["data"]}


def expected_points(section: dict, group: str, total: int) -> list:
    pts = {p["heads_off"]: p["bleu"] for p in [*section["curves"][group], *section["refined"][group]]}
    return [(100.0 * k / total, b) for k, b in sorted(pts.items())]


def test_the_pruning_curve_in_either_order_chosen_in_the_link(env, full):
    from model.analysis.importance import importance_order

    loss = {k: np.array(full["kinds"][k]["measures"]["ablation_loss_increase"]) for k in GROUP}
    by_loss = full["pruning"]["by_loss_increase"]
    # the report's second order: ascending measured loss increase
    assert [tuple(h) for h in by_loss["curves"]["all"][-1]["off"]] == importance_order(loss)
    at = run_app(view="Heads", ckpt="full", focus="pruning")
    assert not at.exception
    title, lines = pruning_points(at)
    assert "by measured loss increase" in title
    assert chart(at, "heads_pruning")["layout"]["legend"]["title"]["text"].startswith("by measured loss increase")
    np.testing.assert_allclose(lines["all heads together"], expected_points(by_loss, "all", 24))
    assert "**Pruning by measured loss increase:** " in visible_text(at)
    at.radio(key="heads_prune_order").set_value("importance").run()
    assert not at.exception and url(at)["heads_prune_order"] == "importance"
    title, lines = pruning_points(at)
    assert "by importance" in title and "loss" not in title
    np.testing.assert_allclose(lines["cross-attention"], expected_points(full["pruning"], "cross", 8))


def test_a_report_with_the_importance_order_only_draws_it_and_says_so(env, full):
    folder = env["root"] / "oneorder"
    shutil.copytree(env["root"] / "full", folder, dirs_exist_ok=True)
    older = json.loads(json.dumps(full))
    del older["pruning"]["by_loss_increase"]  # as reports written before the second order was recorded
    (folder / "head_report.json").write_text(json.dumps(older), encoding="utf-8")
    at = run_app(view="Heads", ckpt="oneorder", focus="pruning")
    assert not at.exception
    assert any("pruning curve by importance only" in i.value for i in at.info)
    title, lines = pruning_points(at)
    assert "by importance" in title
    np.testing.assert_allclose(lines["all heads together"], expected_points(full["pruning"], "all", 24))
