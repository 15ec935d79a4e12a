"""AppTest tests of the lecture kit: presenter mode and side by side (the browser tests measure the pixels)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from model import records
from tests.app_support import array, font_sizes, run_app, spec, url
from tests.tiny_checkpoint import GERMAN

SENTENCE = GERMAN[3]
OTHER = GERMAN[0]
VIEWS = [v for v in records.VIEWS if v not in ("Heads", "Training")]


def sections_of(at) -> list[str]:
    return list(at.radio(key="focus").options)


@pytest.mark.parametrize("view", VIEWS)
def test_presenter_mode_sets_every_figure_text_to_20px_and_shows_one_part_at_a_time(checkpoints, view):
    at = run_app(view=view, text=SENTENCE, present=1)
    assert not at.exception, [e.value for e in at.exception]
    parts = sections_of(at)
    assert len(parts) >= 2
    seen = 0
    for part in parts:
        at = run_app(view=view, text=SENTENCE, present=1, focus=part)
        assert not at.exception
        assert at.radio(key="focus").value == part
        for chart in at.get("plotly_chart"):
            layout = spec(chart)["layout"]
            sizes = list(font_sizes(spec(chart)))
            assert layout["font"]["size"] >= 20 and sizes and min(sizes) >= 20, (part, min(sizes))
            seen += 1
        assert not [b for b in at.get("download_button") if "CSV" in str(b.proto.label)]  # no clutter
    assert seen >= 1


def test_presenter_mode_is_in_the_link_and_leaves_the_normal_page_as_it_was(checkpoints):
    at = run_app(view="Attention", text=SENTENCE, present=1, focus="all heads of the layer")
    assert at.query_params["present"] in ("1", ["1"])
    assert at.query_params["focus"] in ("all heads of the layer", ["all heads of the layer"])
    assert len(at.get("plotly_chart")) == 1  # one thing at a time: all heads of the layer
    normal = run_app(view="Attention", text=SENTENCE)
    assert "present" not in normal.query_params
    assert len(normal.get("plotly_chart")) == 3  # all heads, one head, every layer × head
    assert max(font_sizes(spec(normal.get("plotly_chart")[0]))) < 20


def test_high_contrast_switches_the_colour_scale_of_the_weights(checkpoints):
    plain = run_app(view="Attention", text=SENTENCE, focus="one head", present=1)
    contrast = run_app(view="Attention", text=SENTENCE, focus="one head", present=1, contrast=1)

    def scale(at):
        data = spec(at.get("plotly_chart")[0])["data"][0]
        return json.dumps(data.get("colorscale"))

    assert "Viridis" not in scale(plain) and scale(contrast) != scale(plain)
    assert '"#440154"' in scale(contrast).lower() or "viridis" in scale(contrast).lower()


def test_side_by_side_two_sentences_draws_each_with_its_own_axes(checkpoints, demo_translator):
    at = run_app(view="Attention", kind="cross", layer=2, text=SENTENCE, compare="sentence", text2=OTHER,
                 focus="all heads of the layer")
    assert not at.exception, [e.value for e in at.exception]
    fig = spec(at.get("plotly_chart")[0])
    a, b = demo_translator.trace(SENTENCE), demo_translator.trace(OTHER)
    heads = demo_translator.cfg.n_heads
    layout = fig["layout"]
    # Column 1 holds A's heads, column 2 B's: x axes alternate A, B, A, B ... with each side's source tokens.
    x_a = [t for t in layout["xaxis"]["ticktext"]]
    x_b = [t for t in layout["xaxis2"]["ticktext"]]
    step_a, step_b = layout["xaxis"]["tickvals"], layout["xaxis2"]["tickvals"]
    assert x_a == [a.trace.src_tokens[i].replace("<", "&lt;").replace(">", "&gt;") for i in step_a]
    assert x_b == [b.trace.src_tokens[i].replace("<", "&lt;").replace(">", "&gt;") for i in step_b]
    heatmaps = [d for d in fig["data"] if d["type"] == "heatmap" and d.get("name") != "masked"]
    assert len(heatmaps) == 2 * heads
    # Head by head: row h is head h of A beside head h of B, drawn from each trace's recorded weights.
    probs_a, probs_b = a.trace.probs("cross")[1], b.trace.probs("cross")[1]
    for h in range(heads):
        np.testing.assert_allclose(array(heatmaps[h]["z"]), probs_a[h], atol=1e-6)
        np.testing.assert_allclose(array(heatmaps[heads + h]["z"]), probs_b[h], atol=1e-6)
    text = "\n".join(m.value for m in at.markdown)
    assert "B · DE" in text and b.text.split()[0] in text


def test_side_by_side_two_models_on_decoding_shows_each_models_own_step(checkpoints, demo_translator):
    at = run_app(view="Decoding", text=SENTENCE, compare="model", ckpt2="demo:untrained", dec_step=1)
    assert not at.exception, [e.value for e in at.exception]
    twin = demo_translator.untrained_twin(seed=0)
    a, b = demo_translator.trace(SENTENCE), twin.trace(SENTENCE)
    charts = {c.proto.id: spec(c) for c in at.get("plotly_chart")}
    titles = [s["layout"]["title"]["text"] for s in charts.values()]
    assert any(t.startswith("A, step 1: candidates") for t in titles)
    assert any(t.startswith("B, step 1: candidates") for t in titles)
    bars = {s["layout"]["title"]["text"][0]: s for s in charts.values() if "candidates" in s["layout"]["title"]["text"]}
    for tag, res in (("A", a), ("B", b)):
        got = array(bars[tag]["data"][0]["x"])
        np.testing.assert_allclose(got[: len(res.steps[0].top_probs)],
                                   res.steps[0].top_probs, atol=1e-6)


def test_side_by_side_links_round_trip(checkpoints):
    for params in (dict(compare="sentence", text2=OTHER), dict(compare="model", ckpt2="demo:untrained")):
        at = run_app(view="Attention", text=SENTENCE, **params)
        got = url(at)
        for key, value in params.items():
            assert got.get(key) == value, (key, got)
        # only what this comparison needs is in the link
        assert (("ckpt2" in got) == (params["compare"] == "model")
                and ("text2" in got) == (params["compare"] == "sentence"))
    off = run_app(view="Attention", text=SENTENCE)
    assert "compare" not in off.query_params and "ckpt2" not in off.query_params


def test_side_by_side_says_where_it_is_drawn_and_what_is_missing(checkpoints):
    at = run_app(view="Masks", text=SENTENCE, compare="sentence", text2=OTHER)
    assert not at.exception
    assert any("Attention and Decoding" in c.value for c in at.caption)
    at = run_app(view="Attention", text=SENTENCE, compare="sentence", text2=" ")
    assert not at.exception and any("Type sentence B" in i.value for i in at.info)
    at = run_app(view="Attention", text=SENTENCE, compare="model", ckpt2="missing-model")
    assert not at.exception and any("Side B's model could not be loaded" in w.value for w in at.warning)


TWENTY = " ".join((" ".join(GERMAN).replace(".", "").split() * 2)[:18]) + "."  # 20 source tokens


def _heatmap_titles(at) -> list[str]:
    """The panel titles of the run's charts (a facet's "head 1", ...), in order."""
    return [a["text"] for chart in at.get("plotly_chart") for a in spec(chart)["layout"].get("annotations", [])
            if str(a.get("text", "")).startswith("head ")]


def test_presenter_mode_shows_as_many_heads_as_label_every_key_and_chooses_the_others(checkpoints):
    """A 20-token sentence's four heads do not all label their keys side by side on a projector: fewer at a time, and
    "Panels" (URL `panels`) chooses which; nine words fit all four, and no picker is drawn."""
    at = run_app(view="Attention", text=TWENTY, present=1, focus="all heads of the layer")
    assert not at.exception
    first = _heatmap_titles(at)
    per = len(first)
    assert 1 <= per < 4 and first == [f"head {h}" for h in range(1, per + 1)]
    picker = at.selectbox(key="panels")
    groups = [[f"head {h}" for h in range(g, min(g + per, 5))] for g in range(1, 5, per)]
    assert list(picker.options) == [" · ".join(g) for g in groups]  # every head in one group
    picker.set_value(2).run()
    assert _heatmap_titles(at) == groups[1] and url(at)["panels"] == "2"
    short = run_app(view="Attention", text=SENTENCE, present=1, focus="all heads of the layer")
    assert _heatmap_titles(short) == ["head 1", "head 2", "head 3", "head 4"]
    assert not [s for s in short.selectbox if s.key == "panels"]
