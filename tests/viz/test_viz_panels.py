"""Tests for viz.panels: built figures side by side as one figure, each panel drawn as its own figure drew it."""
import json

import numpy as np
import pytest

from viz.head import PIPELINE_ROWS, SCALE_GROUPS, head_pipeline_figures, head_pipeline_rows, matrix_figure
from viz.heatmap import MASK_TRACE_NAME
from viz.layout import PAGE_WIDTH_PX, text_px
from viz.masks import causal_figure, mask_figure
from viz.panels import panel_row
from viz.theme import PRESENTER_THEME, using_theme
from viz.transport import browser_json

EN = ["<s>", "the", "dog", "the", "."]
DE = ["der", "Hund", "<b>", ".", "</s>"]


def _head(kind="cross"):
    rng = np.random.default_rng(0)
    q_tokens, k_tokens = (EN, DE) if kind == "cross" else (EN, EN)
    q = rng.normal(size=(len(q_tokens), 8)).astype(np.float32)
    k, v = (rng.normal(size=(len(k_tokens), 8)).astype(np.float32) for _ in range(2))
    mask = np.tril(np.ones((len(q_tokens), len(k_tokens)), bool)) if kind == "dec_self" else None
    scores = np.where(mask if mask is not None else True, q @ k.T / np.sqrt(8), -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (q, k, v, None, mask, probs, probs @ v, q_tokens, k_tokens, kind), dict(dropout_probs=probs * 1.1)


def _sent(fig) -> dict:
    return json.loads(browser_json(fig, "test"))


def _coloured(trace: dict) -> bool:
    """A panel's value trace (not the grey cover of masked cells)."""
    return trace["type"] == "heatmap" and trace.get("name") != MASK_TRACE_NAME


@pytest.mark.parametrize("kind", ["cross", "dec_self"])
def test_each_row_holds_its_steps_traces_unchanged(kind):
    args, kwargs = _head(kind)
    figs, rows = head_pipeline_figures(*args, **kwargs), head_pipeline_rows(*args, **kwargs)
    assert [steps for steps in rows] == [tuple(n for n in row if n in figs) for row in PIPELINE_ROWS]
    for steps, fig in rows.items():
        merged = _sent(fig)["data"]
        alone = [t for name in steps for t in _sent(figs[name])["data"]]
        assert len(merged) == len(alone)
        for a, b in zip(merged, alone):  # the same values and hover: only axes, colour bar and colour range change
            drop = {"xaxis", "yaxis", "colorbar", "zmin", "zmax", "showscale"}
            assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


@pytest.mark.parametrize("kind", ["cross", "dec_self"])
def test_comparable_steps_of_a_row_share_one_colour_scale_with_one_colour_bar(kind):
    """Q, K and V; the scaled, the soft-capped (T5Gemma) and the masked scores; the weights before and after
    dropout: one range and one bar each. The raw scores keep their own (√d_k times the scaled ones: on one scale the
    scaled would be pale)."""
    args, kwargs = _head(kind)
    figs, rows = head_pipeline_figures(*args, **kwargs), head_pipeline_rows(*args, **kwargs)
    for steps, fig in rows.items():
        merged = dict(zip(steps, [t for t in _sent(fig)["data"] if _coloured(t)]))
        assert len(merged) == len(steps)
        for group in SCALE_GROUPS:
            names = [name for name in steps if name in group]
            if not names:
                continue
            alone = [next(t for t in _sent(figs[name])["data"] if _coloured(t)) for name in names]
            lo, hi = min(t["zmin"] for t in alone), max(t["zmax"] for t in alone)
            # one range (each panel's range inside it) and one colour bar, the group's last panel's
            assert all((merged[n]["zmin"], merged[n]["zmax"]) == (lo, hi) for n in names), (steps, group)
            assert [n for n in names if merged[n].get("showscale") is not False] == names[-1:], (steps, group)
    assert [set(g) for g in SCALE_GROUPS if len(g) > 1] == [{"Q", "K", "V"}, {"scaled", "capped", "masked"},
                                                            {"softmax", "dropout"}]
    qkv = [t for t in _sent(rows[("Q", "K", "V")])["data"] if _coloured(t)]
    lim = max(float(np.abs(a).max()) for a in args[:3])
    assert qkv[0]["zmin"] == pytest.approx(-lim) and qkv[0]["zmax"] == pytest.approx(lim)  # Q, K and V's largest


def test_panels_sit_left_to_right_without_overlapping_and_every_reference_exists():
    args, kwargs = _head("dec_self")
    for steps, fig in head_pipeline_rows(*args, **kwargs).items():
        if len(steps) == 1:
            continue  # a row of one step is that step's own figure
        sent = _sent(fig)
        layout = sent["layout"]
        for t in sent["data"]:
            assert "xaxis" + t["xaxis"][1:] in layout and "yaxis" + t["yaxis"][1:] in layout, t["xaxis"]
        heat = [t for t in sent["data"] if t["type"] == "heatmap" and _coloured(t)]
        domains = [layout["xaxis" + t["xaxis"][1:]]["domain"] for t in heat]
        assert len(domains) == len(steps)
        for (a0, a1), (b0, b1) in zip(domains, domains[1:]):
            assert 0 <= a0 < a1 < b0 < b1 <= 1
        assert heat[-1].get("showscale") is not False and domains[-1][1] < heat[-1]["colorbar"]["x"]  # right of it
        for shape in layout.get("shapes", []):
            assert shape["xref"].split()[0].replace("x", "xaxis", 1) in layout


def test_titles_go_above_their_panels_and_shared_rows_are_named_once():
    args, kwargs = _head("cross")
    figs, rows = head_pipeline_figures(*args, **kwargs), head_pipeline_rows(*args, **kwargs)
    qkv = _sent(rows[("Q", "K", "V")])["layout"]
    notes = [a["text"].replace("<br>", " ") for a in qkv["annotations"]]
    for name in ("Q", "K", "V"):  # each panel's own title, its lines broken for the panel's room in the row
        assert figs[name].layout.title.text.replace("<br>", " ") in notes
    # Q's rows are the queries (EN), K's the keys (DE): both named; V shares K's rows and names none.
    # (the browser gets the axis titles as notes named after their axes: viz/axis_notes.py)
    titles = {a["name"][:-len(" title")]: a["text"] for a in qkv["annotations"] if a.get("name", "").endswith(" title")}
    assert qkv["yaxis"].get("showticklabels") is not False and "EN" in titles["yaxis"]
    assert "DE" in titles["yaxis2"]
    assert qkv["yaxis3"]["showticklabels"] is False and "yaxis3" not in titles


# the chart's width in a 1440 px window, and in a 1280 px one (measured in Chromium: 740 px)
@pytest.mark.parametrize("page_px", [PAGE_WIDTH_PX, 740])
def test_neighbouring_titles_do_not_run_into_each_other(page_px):
    """Q's, K's and V's titles, wrapped for their own figures, ran into each other in the row at 1280 px."""
    rng = np.random.default_rng(1)
    en = ["<bos>", "▁A", "▁brown", "▁dog", "▁is", "▁running", "▁after", "▁the", "▁black", "▁dog", "."]
    de = ["▁Ein", "▁brauner", "▁Hund", "▁rennt", "▁dem", "▁schwarzen", "▁Hund", "▁hinterher", ".", "<eos>"]
    q = rng.normal(size=(len(en), 64)).astype(np.float32)  # d_k of the shipped model
    k, v = (rng.normal(size=(len(de), 64)).astype(np.float32) for _ in range(2))
    scores = q @ k.T / 8
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    rows = head_pipeline_rows(q, k, v, None, None, probs, probs @ v, en, de, "cross", dropout_probs=probs)
    lay = _sent(rows[("Q", "K", "V")])["layout"]
    plot_px = page_px - lay["margin"]["l"] - lay["margin"]["r"]  # the chart stretches to the page
    spans = []
    for a in lay["annotations"]:
        if a.get("yanchor") == "bottom" and a["xanchor"] == "center" and a["yref"] == "paper" and a["y"] == 1:
            half = max(text_px(line, a["font"]["size"]) for line in a["text"].split("<br>")) / 2
            spans.append((a["x"] * plot_px - half, a["x"] * plot_px + half))
    assert len(spans) == 3
    spans.sort()
    assert all(left[1] < right[0] for left, right in zip(spans, spans[1:])), spans


def test_a_mask_note_moves_with_its_panel():
    m = np.tril(np.ones((5, 5), bool))
    one = mask_figure(m, EN, EN, "mask", kind="dec_self")
    row = _sent(panel_row([one, one]))["layout"]
    notes = [a for a in row["annotations"] if "= masked:" in a["text"]]
    assert len(notes) == 2 and notes[0]["x"] < row["xaxis2"]["domain"][0] < notes[1]["x"] <= 1.0


def test_presenter_mode_keeps_its_fonts_in_a_row():
    args, kwargs = _head("cross")
    with using_theme(PRESENTER_THEME):
        rows = head_pipeline_rows(*args, **kwargs)
        sizes = [a["font"]["size"] for fig in rows.values() for a in _sent(fig)["layout"].get("annotations", [])
                 if "font" in a]
    assert sizes and min(sizes) >= PRESENTER_THEME.min_font


def test_panels_keep_their_own_colour_bars_unless_asked():
    one = matrix_figure(np.eye(5, dtype=np.float32), EN, EN, "one", "row", "column")
    two = matrix_figure(-3 * np.eye(5, dtype=np.float32), EN, EN, "two", "row", "column")
    own = [t for t in _sent(panel_row([one, two]))["data"] if t.get("showscale") is not False]
    shared = [t for t in _sent(panel_row([one, two], one_scale=True))["data"] if t.get("showscale") is not False]
    assert [(t["zmin"], t["zmax"]) for t in own] == [(-1, 1), (-3, 3)]
    assert [(t["zmin"], t["zmax"]) for t in shared] == [(-3, 3)]


def test_shares_must_match_the_figures():
    one = mask_figure(np.ones((2, 2), bool), EN[:2], EN[:2])
    with pytest.raises(ValueError, match="2 shares for 3 figures"):
        panel_row([one, one, one], [1, 2])
    with pytest.raises(ValueError, match="at least one"):
        panel_row([])


def test_the_causal_part_is_one_figure_of_the_mask_and_both_passes():
    m = np.tril(np.ones((5, 5), bool))
    on, off = np.tril(np.full((5, 5), 0.2, np.float32)), np.full((5, 5), 0.2, np.float32)
    sent = _sent(causal_figure(m, on, off, np.ones((5, 5), bool), EN, mask_title="the mask", on_title="with",
                               off_title="without"))
    titles = [a["text"] for a in sent["layout"]["annotations"]]
    assert {"the mask", "with", "without"} <= set(titles)
    values = [t for t in sent["data"] if t["type"] == "heatmap" and t.get("name") not in ("masked",)]
    assert [t["xaxis"] for t in values] == ["x", "x2", "x3"]
    assert np.array_equal(np.array(values[2]["z"], np.float32), off)  # the pass without the mask: every cell


def test_presenter_panels_keep_readable_rows_when_the_row_is_shorter_than_a_panel():
    """A panel whose own figure was taller than the row leaves it (a neighbour's title takes more lines) keeps rows
    of at least MIN_ROW_PX, as a window said in its title, with labels a label's height apart."""
    from viz.rows import MIN_ROW_PX
    from viz.theme import theme

    rng = np.random.default_rng(0)
    rows = [f"r{i}" for i in range(40)]
    with using_theme(PRESENTER_THEME):
        short = matrix_figure(rng.normal(size=(8, 8)).astype(np.float32), rows[:8], None, "Q", "token", "dim",
                              width_px=300)
        tall = matrix_figure(rng.normal(size=(40, 8)).astype(np.float32), rows, None,
                             "a title long enough to take three lines in a panel a third of the page wide", "token",
                             "dim", width_px=300)
        row = panel_row([short, tall])
        gap = theme().min_tick_px
    lay = row.to_plotly_json()["layout"]
    plot_px = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    for name in ("yaxis", "yaxis2"):
        axis = lay[name]
        shown = axis["range"][0] + 0.5 if axis.get("autorange") is False else (8 if name == "yaxis" else 40)
        row_px = plot_px * (axis["domain"][1] - axis["domain"][0]) / shown
        assert row_px >= MIN_ROW_PX - 0.5, (name, row_px)
        vals = axis["tickvals"]
        assert all((b - a) * row_px >= gap - 0.5 for a, b in zip(vals, vals[1:])), (name, vals, row_px)
    assert lay["dragmode"] == "pan"
