"""Figures built without plotly's validation (viz.layout.figure) send the browser exactly what validated ones do.

Every builder that goes through viz.layout.figure is built twice, once inside viz.layout.validating() (plotly
checks every property name and coerces every value) and once as the app builds it, and the two figures' JSON
must be equal. A typo in a property name, a shorthand only validation expands (a colour scale's name, a string
title), or a value only validation coerces would make them differ, or make the validated build raise.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from viz.architecture import architecture_figure
from viz.attention import attention_figure, heads_figure, overview_figure
from viz.compare import Side, side_by_side_figure
from viz.decoding import attribution_figure, candidates_figure, step_cross_attention_figure
from viz.embeddings import embedding_heatmap, embedding_stages_figure, scaling_figure, vocab_map_figure
from viz.head import dropout_figure, head_pipeline_figures, head_pipeline_rows, matrix_figure, probs_figure
from viz.heads import head_grid_figure
from viz.heatmap import facet_heatmaps, heatmap
from viz.layout import validating
from viz.look import baked_look, under
from viz.masks import causal_figure, mask_figure, padding_figure
from viz.positional import position_similarity_figure, waves_figure
from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme
from viz.transport import browser_json, figure_json

RNG = np.random.default_rng(7)
Q = ["<bos>", "A", "dog", "runs", "A"]  # a repeated token stays two rows
K = ["Ein", "Hund", "läuft", "<b>", ".", "<eos>"]  # markup in a token is escaped, not drawn


def _probs(*shape):
    p = RNG.random(shape).astype(np.float32)
    return p / p.sum(-1, keepdims=True)


def _mask():
    m = np.ones((len(Q), len(K)), bool)
    m[:, -1] = False  # a padded key column
    return m


def _causal():
    return np.tril(np.ones((len(Q), len(Q)), bool))


def _builders():
    probs = _probs(3, 4, len(Q), len(K))
    emb = RNG.standard_normal((len(K), 32)).astype(np.float32)
    q, k, v = (RNG.standard_normal((len(Q), 8)).astype(np.float32) for _ in range(3))
    kk, vv = (RNG.standard_normal((len(K), 8)).astype(np.float32) for _ in range(2))
    scores = q @ kk.T / np.sqrt(8)
    roles = {kind: [[["aligner"] for _ in range(4)] for _ in range(3)] for kind in ("enc_self", "dec_self", "cross")}
    return {
        "one head, masked, rescaled": lambda: attention_figure(probs[0, 0], Q, K, "cross", mask=_mask(), zmax=0.4,
                                                               title="layer 1, head 1", width_px=900),
        "one head, causal": lambda: attention_figure(_probs(len(Q), len(Q)) * _causal(), Q, Q, "dec_self",
                                                     mask=_causal()),
        "all heads of a layer": lambda: heads_figure(probs[1], Q, K, "cross", 1, mask=_mask(), width_px=900),
        "every layer x head": lambda: overview_figure(probs, "cross", zmax=0.5),
        "side by side": lambda: side_by_side_figure(Side("A · Ein Hund.", probs[0], Q, K, _mask()),
                                                    Side("B · Der Hund.", probs[1], Q, K), "cross", 0, [1],
                                                    width_px=900),
        "side by side, all heads": lambda: side_by_side_figure(Side("A", probs[0], Q, K), Side("B", probs[2], Q, K),
                                                               "cross", 2),
        "attribution": lambda: attribution_figure(_probs(2, len(K)), ["attention", "gradient"], K, "dog ← ?",
                                                  hover_notes=[["x"] * len(K)] * 2, width_px=900),
        "candidates": lambda: candidates_figure(["dog", "<eos>", "cat"], [0.7, 0.2, 0.1], chosen_index=1),
        "where a step looked": lambda: step_cross_attention_figure(_probs(len(K)), K, src_lang="de", tgt_lang="en",
                                                                   width_px=900),
        "where a step looked, narrow": lambda: step_cross_attention_figure(_probs(len(K)), K, width_px=200),
        "embedding heatmap": lambda: embedding_heatmap(emb, K),
        "embedding stages": lambda: embedding_stages_figure(emb, emb * 5.7, emb / 3, emb * 6, K),
        "embedding stages, own scales": lambda: embedding_stages_figure(emb, emb * 5.7, emb / 3, emb * 6, K,
                                                                        shared_scale=False),
        "matrix": lambda: matrix_figure(scores, Q, K, "scores", "query", "key", mask=_mask(), width_px=700),
        "softmax with row sums": lambda: probs_figure(probs[0, 1], Q, K, "cross", mask=_mask(), title="softmax"),
        "dropout": lambda: dropout_figure(probs[0, 2] * 1.1, Q, K, "cross", p_drop=0.1),
        "one head, every step": lambda: head_pipeline_figures(q, kk, vv, scores, _mask(), probs[0, 0],
                                                              probs[0, 0] @ vv, Q, K, "cross",
                                                              scaled_scores=scores),
        "one head, a figure per row": lambda: head_pipeline_rows(q, kk, vv, None, _mask(), probs[0, 0],
                                                                 probs[0, 0] @ vv, Q, K, "cross",
                                                                 dropout_probs=probs[0, 0] * 1.1),
        "head report grid": lambda: head_grid_figure({kind: RNG.random((3, 4)) for kind in roles}, roles,
                                                     "entropy (nats)", chosen=("cross", 1, 2), title="heads"),
        "padding mask": lambda: mask_figure(_mask(), Q, K, "padding mask", kind="cross", width_px=500),
        "causal mask": lambda: mask_figure(_causal(), Q, Q, "causal mask", kind="dec_self"),
        "padding part": lambda: padding_figure(probs[0, 0][:, :5], _mask()[:, :5], Q, title="mask on",
                                               mask_title="mask"),
        "causal part": lambda: causal_figure(_causal(), probs[0, 1][:, :5], probs[0, 2][:, :5], np.ones((5, 5), bool),
                                             Q, mask_title="mask", on_title="with", off_title="without"),
        "scaling": lambda: scaling_figure(emb, emb * 5.7, 32, K, width_px=900),
        "vocabulary map": lambda: vocab_map_figure(RNG.standard_normal((300, 2)).astype(np.float32),
                                                   [f"w{i}" for i in range(300)], [3, 7], n_dots=50),
        "architecture": lambda: architecture_figure(3, 2, 256, 8, src_lang="French", tgt_lang="<i>Italian</i>"),
        "plain heatmap, numbered axes": lambda: heatmap(emb, None, None, row_title="r", col_title="c"),
        "facets without tokens": lambda: facet_heatmaps(np.stack([emb, -emb]), ["a", "b"], None, None,
                                                        row_title="r", col_title="c", shared_scale=False),
    }


def _sent(fig) -> list:
    """What the browser gets for a figure (or each of a dict of figures)."""
    figs = fig.values() if isinstance(fig, dict) else [fig]
    return [json.loads(f.to_json()) for f in figs]


@pytest.mark.parametrize("theme", [DEFAULT_THEME, PRESENTER_THEME], ids=["default", "presenter"])
@pytest.mark.parametrize("name", list(_builders()))
def test_unvalidated_build_sends_the_same_figure(name, theme):
    global RNG
    with using_theme(theme):
        RNG = np.random.default_rng(7)
        with validating():
            checked = _sent(_builders()[name]())
        RNG = np.random.default_rng(7)
        fast = _sent(_builders()[name]())
    assert fast == checked


@pytest.mark.parametrize("name", list(_builders()))
def test_figure_json_is_what_plotly_writes(name):
    """viz.transport.figure_json (what the app sends for a kept figure) parses to what fig.to_json() writes."""
    fig = _builders()[name]()
    for f in (fig.values() if isinstance(fig, dict) else [fig]):
        text = figure_json(f)
        assert json.loads(text) == json.loads(f.to_json())
        assert "<" not in text and ">" not in text  # escaped for HTML, as plotly writes it


@pytest.mark.parametrize("name", list(_builders()))
def test_every_figure_has_its_own_copy_of_plotly_white(name):
    """viz.layout.figure sets the template as plain JSON (not plotly's deep copy of the object): the same template
    plotly would set, and one figure's template is not another's."""
    import plotly.io as pio

    white = pio.templates["plotly_white"].to_plotly_json()
    figs = [f for _ in range(2) for f in ((lambda b: b.values() if isinstance(b, dict) else [b])(_builders()[name]()))]
    for f in figs:
        assert f.to_dict()["layout"]["template"] == white
    figs[0].layout.template.layout.font.size = 99  # written into the first figure's template only
    assert figs[-1].layout.template.layout.font.size is None and white["layout"]["font"].get("size") is None
    assert pio.templates["plotly_white"].layout.font.size is None


def test_figure_json_of_other_figures():
    """Figures made without the fast builders (bars, scatters, subplots, NaN, int64 axes) come out right too."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Bar(x=np.arange(5, dtype=np.int64), y=np.array([1.0, np.nan, 3.0, 4.0, 5.0])), row=1, col=1)
    fig.add_trace(go.Scatter(x=["a", "b"], y=np.array([True, False]), text=np.array(["<b>x</b>", "y"])), row=1, col=2)
    fig.update_layout(title="<i>t</i>", xaxis=dict(range=np.array([0.0, 4.0])))
    emb = RNG.standard_normal((len(K), 32)).astype(np.float32)
    pe = RNG.standard_normal((20, 32)).astype(np.float32)
    coords = RNG.standard_normal((300, 2)).astype(np.float32)
    others = [fig, scaling_figure(emb, emb * 5.7, 32, K),
              vocab_map_figure(coords, [f"w{i}" for i in range(300)], [3, 7], n_dots=50),
              waves_figure(pe, dims=(0, 1, 4)), position_similarity_figure(pe, 3),
              candidates_figure(["dog", "cat", "<eos>"], [0.7, 0.2, 0.1]),
              mask_figure(_causal(), Q, Q, "causal mask")]
    for f in others:
        assert json.loads(figure_json(f)) == json.loads(f.to_json())


def _decoded(value):
    """A figure dict from plotly's JSON with typed arrays as lists, NaN as None (as JSON holds them)."""
    import base64

    if isinstance(value, dict):
        if "bdata" in value:
            data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).astype(float)
            if value.get("shape"):
                data = data.reshape([int(n) for n in str(value["shape"]).split(",")])
            return json.loads(json.dumps(np.where(np.isfinite(data), data, None).tolist()))
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return None if isinstance(value, float) and not np.isfinite(value) else value


def _template_applied(sent: dict) -> dict:
    """What plotly.js resolves from plotly's JSON of a figure for the parts the look writes into the figure: the
    template's layout under the layout (axes under each axis), its trace entries under the traces."""
    tl, layout = baked_look()["layout"], dict(sent["layout"])
    layout.pop("template")
    for key, value in tl.items():
        if key.endswith("defaults") or key in ("xaxis", "yaxis"):
            continue
        layout[key] = under(value, layout.get(key, {})) if isinstance(value, dict) else layout.get(key, value)
    for name in [k for k in layout if k[:5] in ("xaxis", "yaxis")] or ["xaxis", "yaxis"]:
        layout[name] = under(tl[name[:5]], layout.get(name, {}))
    for key in ("annotations", "shapes"):
        if key in layout:
            layout[key] = [under(tl[key[:-1] + "defaults"], a) for a in layout[key]]
    data = [under(baked_look()["data"].get(t.get("type", "scatter"), [{}])[0], t) for t in sent["data"]]
    return {"data": data, "layout": layout}


def _other_figures():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Bar(x=np.arange(5, dtype=np.int64), y=np.array([1.0, np.nan, 3.0, 4.0, 5.0])), row=1, col=1)
    fig.add_trace(go.Scatter(x=["a", "b"], y=np.array([True, False]), text=np.array(["<b>x</b>", "y"])), row=1, col=2)
    fig.update_layout(title="<i>t</i>", xaxis=dict(range=np.array([0.0, 4.0])))
    dates = go.Figure(go.Scatter(x=np.array(["2026-11-22", "2026-11-23"], dtype="datetime64[D]"),
                                 y=np.array([1.0, np.inf])))
    return {"subplots with NaN": lambda: fig, "datetime axis (plotly's own encoding)": lambda: dates}


@pytest.mark.parametrize("name", list(_builders()) + list(_other_figures()))
def test_browser_json_is_the_figure_with_its_look_written_in(name):
    """The JSON a chart gets (views/plumbing/figcache.py) holds what plotly's JSON does, with the template's look
    written
    into the figure (the figure's own settings win), plain lists instead of typed arrays, null for NaN, the title
    in bold and a name for the content; nothing a figure shows changes."""
    built = (_builders() | _other_figures())[name]()
    for f in (built.values() if isinstance(built, dict) else [built]):
        text = browser_json(f, "rev-1")
        sent = json.loads(text)
        assert "<" not in text and ">" not in text  # escaped for HTML, as plotly writes it
        assert '"bdata"' not in text and "template" not in sent["layout"]
        assert sent["layout"].pop("datarevision") == "rev-1"
        expected = _template_applied(_decoded(json.loads(f.to_json())))
        for name_ in [k for k in sent["layout"] if k[:5] in ("xaxis", "yaxis")]:
            axis, plotly_axis = sent["layout"][name_], expected["layout"][name_]
            for flag in ("showline", "showgrid", "zeroline"):  # stated where the figure leaves them to plotly
                if flag in axis and flag not in plotly_axis:
                    assert isinstance(axis.pop(flag), bool)
            assert axis["minor"].pop("showgrid") is False
        if sent["layout"].get("title", {}).get("text"):
            assert sent["layout"]["title"]["font"].pop("weight") == "bold"
        _titles_as_notes_undone(sent, expected)
        # float32 data is written with nine digits, which read back as the same float32 (test_float32_arrays_...)
        assert _single(sent) == _single(expected)


def _titles_as_notes_undone(sent: dict, expected: dict) -> None:
    """Check what viz.axis_notes changed in ``sent`` and take it out of both: each axis title of ``expected`` is a
    note named after its axis with the title's text and font, no axis measures its labels (no automargin, labels
    never hidden), nor does a colour bar."""
    notes = sent["layout"].pop("annotations", [])
    kept = [n for n in notes if not re.fullmatch(r"[xy]axis\d* title", str(n.get("name", "")))]
    for name, axis in expected["layout"].items():
        if name[:5] not in ("xaxis", "yaxis") or not isinstance(axis, dict):
            continue
        title = axis.pop("title", {})
        note = [n for n in notes if n.get("name") == f"{name} title"]
        if title.get("text"):
            assert len(note) == 1 and note[0]["text"] == title["text"] and note[0]["font"] == title.get("font")
        else:
            assert not note
        assert sent["layout"][name].pop("automargin") is False and axis.pop("automargin", False) is True
        assert sent["layout"][name].pop("ticklabeloverflow") == axis.pop("ticklabeloverflow", "allow")
    if kept or "annotations" in expected["layout"]:
        sent["layout"]["annotations"] = kept
    for trace, plotly_trace in zip(sent["data"], expected["data"]):
        if "colorbar" in trace and trace.get("showscale") is not False:
            assert trace["colorbar"].pop("ticklabeloverflow") == "allow"
            if not trace["colorbar"] and "colorbar" not in plotly_trace:
                del trace["colorbar"]


def _single(value):
    """Every float of a figure dict as the float32 it stands for."""
    if isinstance(value, dict):
        return {k: _single(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_single(v) for v in value]
    return float(np.float32(value)) if isinstance(value, float) else value


def test_float32_arrays_are_written_short_and_read_back_exactly():
    """browser_json writes a float32 array with nine significant digits: each number reads back as exactly the
    float32 the figure holds (NaN as null), in far fewer characters than float64's digits; float64 arrays and short
    arrays are written as before."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(12, 40)).astype(np.float32)
    z[0, 0], z[1, 1] = np.nan, np.inf
    wide = rng.normal(size=40)  # float64: every digit kept
    fig = heatmap(z, None, None, row_title="r", col_title="c", zmin=None, zmax=None)
    fig.add_scatter(x=wide, y=np.arange(40, dtype=np.float32) * np.float32(0.1), name="line")
    fig.add_scatter(x=np.array([0.1, 0.2], np.float32), y=[1, 2], name="short")
    text = browser_json(fig, "r")
    sent = json.loads(text)["data"]
    back = np.array([[np.nan if v is None else v for v in row] for row in sent[0]["z"]], dtype=np.float32)
    finite = np.isfinite(z)
    assert np.array_equal(back[finite], z[finite]) and sent[0]["z"][0][0] is None and sent[0]["z"][1][1] is None
    assert sent[1]["x"] == wide.tolist()  # float64: exactly as before
    assert np.array_equal(np.array(sent[1]["y"], np.float32), np.arange(40, dtype=np.float32) * np.float32(0.1))
    assert sent[2]["x"] == np.array([0.1, 0.2], np.float32).tolist()  # a short array as before
    long = json.dumps(z.astype(np.float64).tolist())
    assert len(json.dumps(sent[0]["z"])) < 0.7 * len(long)


def test_named_colour_scales_are_spelled_out():
    """plotly.js has its own "Blues" (dark blue to grey): an unvalidated figure must carry plotly.py's colours."""
    fig = attention_figure(_probs(len(Q), len(K)), Q, K, "cross")
    scale = fig.to_plotly_json()["data"][0]["colorscale"]
    assert not isinstance(scale, str)
    assert scale[0][1] == "rgb(247,251,255)"  # plotly.py's Blues starts white
