"""The heatmaps' margins are set beforehand to what their labels need, in the real browser.

viz.layout.label_margins estimates the room the tick labels and axis titles take, so that plotly draws a figure
once instead of drawing it, measuring the labels and drawing it again with wider margins. Here every heatmap of
the views that draw them is read back from Chromium: plotly's final margins (``_fullLayout._size``) must be the
ones the figure asked for (``layout.margin``), i.e. plotly had nothing left to push; the labels and the axis titles
(notes placed by viz/axis_notes.py) must reach no further than those margins, no title may cover a label, and the
margins may be no more than 40 px (or a quarter, for long labels) wider than the labels need, so the estimate does
not waste the room it saves.
"""
from __future__ import annotations

import pytest

from browser_support import choose_view, page_with_sentence, wait_charts

SENTENCE = "Ein Mann mit einem großen Hut sitzt auf einer Bank im Park."
VIEWS = ["Attention", "Embeddings", "Inside one head", "Masks", "Decoding", "Positional encoding"]

# Per chart with a heatmap: the margins asked for, the margins plotly used, and how far the labels and axis
# titles actually reach into the left and bottom margins (from their drawn boxes).
MARGINS_JS = r"""() => [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")]
  .filter(gd => gd._fullData && gd._fullData.some(t => t.type === 'heatmap') && !gd.closest("[data-stale='true']"))
  .map(gd => {
    const box = gd.getBoundingClientRect(), size = gd._fullLayout._size, asked = gd._fullLayout.margin;
    let reachLeft = 0, reachBottom = 0, overlaps = 0;
    // every tick label of every panel (a row of panels in one figure: x2tick, ...), and every axis title: the
    // notes named after their axes (viz/axis_notes.py; Plotly's own titles, g-xtitle, if a figure has any)
    const labels = [...gd.querySelectorAll(".xaxislayer-above text, .yaxislayer-above text")];
    const titles = [...gd.querySelectorAll("[class^='g-x'][class$='title'] text, [class^='g-y'][class$='title'] text")];
    (gd.layout.annotations || []).forEach((a, i) => {
      const el = /^[xy]axis\d* title$/.test(a.name || '') && gd.querySelector(`.annotation[data-index='${i}'] text`);
      if (el) titles.push(el);
    });
    const boxes = els => els.map(el => el.getBoundingClientRect()).filter(r => r.width > 0);
    const labelBoxes = boxes(labels), titleBoxes = boxes(titles);
    for (const r of labelBoxes.concat(titleBoxes)) {
      reachLeft = Math.max(reachLeft, size.l - (r.left - box.left));
      reachBottom = Math.max(reachBottom, (r.bottom - box.top) - (box.height - size.b));
    }
    for (const t of titleBoxes)  // a title never covers a tick label
      for (const r of labelBoxes)
        if (t.left < r.right - 1 && r.left < t.right - 1 && t.top < r.bottom - 1 && r.top < t.bottom - 1) overlaps++;
    return {title: ((gd.querySelector('.gtitle') || {}).textContent || '').slice(0, 50),
            askedL: asked.l, askedB: asked.b, usedL: Math.round(size.l), usedB: Math.round(size.b),
            reachLeft: Math.round(reachLeft), reachBottom: Math.round(reachBottom), titles: titleBoxes.length,
            overlaps};
  })"""


@pytest.fixture(scope="module")
def margins_page(chromium, app_server):
    pg = page_with_sentence(chromium, app_server.url, SENTENCE)
    yield pg
    pg.context.close()


@pytest.mark.browser
@pytest.mark.parametrize("view", VIEWS)
def test_heatmaps_are_drawn_with_the_margins_they_asked_for(margins_page, view):
    pg = margins_page
    choose_view(pg, view)
    wait_charts(pg)
    charts = pg.evaluate(MARGINS_JS)
    assert charts, f"{view} drew no heatmap"
    labelled = [c for c in charts if c["reachLeft"] or c["reachBottom"]]  # not the thumbnail grid (no axis text)
    assert labelled, f"{view} drew no heatmap with axis labels"
    for c in charts:
        # plotly pushed nothing: the labels fit in the margins the figure set
        assert (c["usedL"], c["usedB"]) == (c["askedL"], c["askedB"]), str(c)
    assert any(c["titles"] for c in labelled), f"{view}: no axis title found on its heatmaps"
    for c in charts:
        assert c["overlaps"] == 0, f"an axis title covers a tick label: {c}"
    for c in labelled:
        # the labels really reach into the margins, and the estimate is not much larger than what they take
        assert 0 < c["reachLeft"] <= c["usedL"] <= c["reachLeft"] + max(40, 0.25 * c["reachLeft"]), c
        assert 0 < c["reachBottom"] <= c["usedB"] <= c["reachBottom"] + max(40, 0.25 * c["reachBottom"]), c
