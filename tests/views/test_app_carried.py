"""The Attention page draws what attention carries: value norms per head and ALTI+ per layer, from the numbers of
model/analysis/contributions.py along the decoding's own tokens (AppTest; the formulas: tests/model/
test_contributions.py)."""
from __future__ import annotations

import numpy as np

from tests.app_support import array, chart, run_app, url
from tests.tiny_checkpoint import GERMAN


def _z(fig: dict) -> np.ndarray:
    """The first heatmap's values (NaN where masked)."""
    trace = next(t for t in fig["data"] if t["type"] == "heatmap")
    return np.asarray(array(trace["z"]), dtype=np.float64)


def test_value_norms_are_drawn_per_head_and_fade_where_the_weights_do_not(checkpoints):
    weights = run_app(view="Attention", text=GERMAN[2], kind="cross", layer=1, head=1, focus="one head", present=1)
    norms = run_app(view="Attention", text=GERMAN[2], kind="cross", layer=1, head=1, focus="one head", present=1,
                    carry="norms")
    assert not norms.exception and url(norms)["carry"] == "norms"
    w, n = _z(chart(weights, "head_fig")), _z(chart(norms, "head_fig"))
    assert w.shape == n.shape
    # ‖α f‖ = α ‖f‖: per key column, the ratio to the weight is that key's ‖f‖, the same in every row
    ratio = np.where(w > 1e-6, n / np.where(w > 1e-6, w, 1), np.nan)
    spread = np.nanmax(ratio, axis=0) - np.nanmin(ratio, axis=0)
    assert np.nanmax(spread / np.nanmax(ratio, axis=0)) < 1e-3
    trace = next(t for t in chart(norms, "head_fig")["data"] if t["type"] == "heatmap")
    assert "value norm" in trace["colorbar"]["title"]["text"] and "value norm" in trace["hovertemplate"]


def test_alti_is_a_layers_with_the_own_stream_column_and_rows_that_sum_to_one(checkpoints):
    at = run_app(view="Attention", text=GERMAN[2], kind="cross", layer=2, focus="all heads of the layer", present=1,
                 carry="alti")
    assert not at.exception
    fig = chart(at, "heads_fig")
    z = _z(fig)
    assert np.allclose(np.nansum(z, axis=1), 1.0, atol=1e-3)  # every query's shares, its own stream included
    trace = next(t for t in fig["data"] if t["type"] == "heatmap")
    assert str(trace["x"][-1]).startswith("(own stream)")
    assert "ALTI+" in fig["layout"]["title"]["text"] and "together" in fig["layout"]["title"]["text"]


def test_decoding_states_each_tokens_source_share_and_flags_one_low_for_the_model(tmp_path_factory):
    """The strip's bars are the rollout's source shares; the step's sentence flags a share below the 5th percentile
    the model's calibration file gives (none without one)."""
    import json

    from model.inference.translator import Translator
    from tests.app_support import demo_checkpoints, visible_text

    with demo_checkpoints(tmp_path_factory, "ckpts_share") as root:
        plain = run_app(view="Decoding", text=GERMAN[2], dec_step=2)
        assert not plain.exception
        text = visible_text(plain)
        assert "Step 2: " in text and "from the translation so far" in text and "for this model" not in text
        bars = next(t for t in chart(plain, "source_share")["data"] if t["type"] == "bar")
        tr = Translator.from_checkpoint(root / "demo")
        res = tr.translate(GERMAN[2])
        c = tr.contributions(GERMAN[2], res.raw_tokens + (["<eos>"] if res.finished else []))
        np.testing.assert_allclose(np.asarray(array(bars["y"]), dtype=float), c.alti["source_share"], atol=1e-5)
        (root / "demo" / "source_share.json").write_text(json.dumps({"tokens": 10, "percentiles": {"5": 1.01}}))
        flagged = visible_text(run_app(view="Decoding", text=GERMAN[2], dec_step=2))
        assert "Low for this model" in flagged and "5th percentile (101%)" in flagged


def test_the_alignment_page_scores_the_annotated_pairs_and_aligns_the_sidebars_sentence(checkpoints):
    import re

    from tests.app_support import visible_text

    at = run_app(view="Alignment", text=GERMAN[2], align_method="attention", align_layer="1", align_pair=3)
    assert not at.exception
    text = visible_text(at)
    pair, whole = map(float, re.search(r"AER of this pair: ([\d.]+) %; of the 100 pairs with these choices: ([\d.]+)",
                                       text).groups())
    assert 0 <= pair <= 100 and 0 <= whole <= 100
    fig = chart(at, "align_fig")
    assert [t["name"] for t in fig["data"][1:]] == ["gold: sure", "gold: possible", "predicted"]
    own = run_app(view="Alignment", text=GERMAN[2], focus="your sentence", present=1)
    assert not own.exception
    fig = chart(own, "align_own")
    heat = next(t for t in fig["data"] if t["type"] == "heatmap")
    assert [str(x).rsplit(" (", 1)[0] for x in heat["x"]] == GERMAN[2].replace(".", " .").split()
    assert [t["name"] for t in fig["data"][1:]] == ["predicted"]  # no gold links for the user's own sentence


def test_your_sentence_aligns_to_a_typed_reference_and_scores_typed_gold_links(checkpoints):
    from tests.app_support import visible_text

    ref = "A dog runs ."
    at = run_app(view="Alignment", text=GERMAN[2], focus="your sentence", align_ref=ref, align_gold="1-1 2p2 9-9")
    assert not at.exception
    assert "outside the pair" in visible_text(at)  # 9-9 named, the figure still drawn with the predicted links
    heat = next(t for t in chart(at, "align_own")["data"] if t["type"] == "heatmap")
    assert [str(y).rsplit(" (", 1)[0] for y in heat["y"]] == ref.split()
    at = run_app(view="Alignment", text=GERMAN[2], focus="your sentence", align_ref=ref, align_gold="1-1 2p2")
    fig = chart(at, "align_own")
    assert [t["name"] for t in fig["data"][1:]] == ["gold: sure", "gold: possible", "predicted"]
    predicted = {(x, y) for x, y in zip(fig["data"][3]["x"], fig["data"][3]["y"])}
    xs, ys = fig["data"][0]["x"], fig["data"][0]["y"]
    a, sure, possible = len(predicted), {(xs[0], ys[0])}, {(xs[0], ys[0]), (xs[1], ys[1])}
    expected = 100 * (1 - (len(predicted & sure) + len(predicted & possible)) / (a + len(sure)))
    assert f"AER against the links typed: {expected:.1f} %" in visible_text(at)
