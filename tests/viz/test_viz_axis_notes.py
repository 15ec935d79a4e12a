"""The axis titles the browser gets as notes beside the tick labels (viz/axis_notes.py), with nothing left for Plotly
to measure; where they land in Chromium is checked by tests/browser/test_browser_tour.py (C4)."""
from __future__ import annotations

import json

import numpy as np

from viz.axis_notes import LABEL_PAD_PX, TITLE_GAP_PX, place_titles
from viz.head import matrix_figure
from viz.transport import browser_json


def _sent(fig) -> dict:
    return json.loads(browser_json(fig, "test"))


def _notes(layout: dict) -> dict:
    return {a["name"]: a for a in layout.get("annotations", []) if a.get("name", "").endswith(" title")}


def _heatmap(rows: list[str], cols: list[str]):
    z = np.arange(len(rows) * len(cols), dtype=np.float32).reshape(len(rows), len(cols))
    return matrix_figure(z, rows, cols, "a heatmap", "query ↓", "key →")


def test_each_axis_title_becomes_one_note_past_its_labels():
    fig = _heatmap(["a", "b", "c"], ["x", "y", "z", "w"])
    layout = _sent(fig)["layout"]
    notes = _notes(layout)
    assert set(notes) == {"xaxis title", "yaxis title"}
    x, y = notes["xaxis title"], notes["yaxis title"]
    assert x["text"] == fig.layout.xaxis.title.text and y["text"] == fig.layout.yaxis.title.text
    assert (x["xanchor"], x["yanchor"]) == ("center", "top") and x["yshift"] < -(LABEL_PAD_PX + TITLE_GAP_PX)
    assert (y["xanchor"], y["textangle"]) == ("right", -90) and y["xshift"] < -(LABEL_PAD_PX + TITLE_GAP_PX)
    for name in ("xaxis", "yaxis"):
        assert "title" not in layout[name] and layout[name]["automargin"] is False
        assert layout[name]["ticklabeloverflow"] == "allow"
    assert all(t["colorbar"]["ticklabeloverflow"] == "allow" for t in _sent(fig)["data"]
               if t.get("showscale") is not False and t["type"] == "heatmap")


def test_longer_labels_push_the_title_further_out():
    short = _notes(_sent(_heatmap(["a", "b"], ["x", "y"]))["layout"])
    long = _notes(_sent(_heatmap(["Fahrradfahrerinnen", "b"], ["Sonnenuntergang", "y"]))["layout"])
    assert long["yaxis title"]["xshift"] < short["yaxis title"]["xshift"] - 50
    assert long["xaxis title"]["yshift"] < short["xaxis title"]["yshift"] - 30


def test_axes_on_the_far_sides_and_axes_without_labels():
    fig = {"data": [{"type": "heatmap", "z": [[1]], "showscale": False}],
           "layout": {"font": {"size": 12},
                      "xaxis": {"side": "top", "title": {"text": "top"}, "domain": [0.2, 0.6]},
                      "yaxis": {"side": "right", "title": {"text": "right", "font": {"size": 20}},
                                "showticklabels": False, "domain": [0.0, 0.5]},
                      "xaxis2": {"title": {"text": ""}, "anchor": "y"}}}
    notes = _notes(place_titles(fig)["layout"])
    top, right = notes["xaxis title"], notes["yaxis title"]
    assert (top["yanchor"], top["x"], top["y"]) == ("bottom", 0.4, 0.5)  # the top of its y axis and top["yshift"] > 0
    assert (right["xanchor"], right["y"], right["font"]) == ("left", 0.25, {"size": 20})
    assert right["xshift"] == LABEL_PAD_PX + TITLE_GAP_PX  # no labels to step over
    assert "xaxis2 title" not in notes and fig["layout"]["xaxis2"]["automargin"] is False
    assert "colorbar" not in fig["data"][0]  # a trace without a colour bar gets none


def test_notes_already_there_stay_first():
    fig = {"data": [], "layout": {"annotations": [{"text": "mine"}], "xaxis": {"title": {"text": "x"}},
                                  "yaxis": {"title": "y, as plotly's shorthand"}}}
    notes = place_titles(fig)["layout"]["annotations"]
    assert [n["text"] for n in notes] == ["mine", "x", "y, as plotly's shorthand"]
