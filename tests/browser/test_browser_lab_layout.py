""""Why A and not B" in presenter mode, drawn by Chromium at the width its column gets on a 1280×720 projector: no
text of the figure is drawn over another (titles, panel titles, y tick labels), and its rotated token labels stand
at least the theme's spacing apart. The figure is drawn as the app hands it to the browser (viz.transport), on a
bare page with plotly.js, so no server is needed."""
from __future__ import annotations

import json

import numpy as np
import pytest

from viz.lab import contrast_figure
from viz.layout import PAGE_WIDTH_PX
from viz.theme import PRESENTER_THEME, using_theme
from viz.transport import browser_json

COLUMN_PX = 590  # half of presenter mode's page at 1280 px (the sidebar folded), less the gap between the columns
SENTENCES = {
    "short": ["▁Ein", "▁braun", "er", "▁Hund", "▁rennt", "▁im", "▁Schnee", ".", "</s>"],
    "long": "▁Eine ▁Gruppe ▁von ▁Männern ▁lädt ▁Baum woll e ▁auf ▁einen ▁Last wagen ▁während ▁ein ▁Hund "
            "▁zuschaut ▁und ▁bellt . </s>".split(),
}

# Every drawn text of the figure as [left, top, right, bottom] with its text and its group's class; and the pixel
# positions of the token axis's ticks with the labels' angle.
TEXTS_JS = r"""() => {
  const gd = document.getElementById('gd');
  const texts = [...gd.querySelectorAll('text')].filter(e => e.textContent.trim()).map(e => {
    const r = e.getBoundingClientRect(), g = e.closest('g[class]');
    return {text: e.textContent, cls: g ? g.getAttribute('class') : '', box: [r.left, r.top, r.right, r.bottom]};
  }).filter(t => t.box[2] > t.box[0]);
  const ax = gd._fullLayout.xaxis2;
  return {texts, ticks: (ax.tickvals || []).map(v => ax.l2p(v)), angle: ax.tickangle};
}"""


def meet(a, b) -> bool:
    """Boxes a and b overlap by more than a pixel."""
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


@pytest.mark.browser
@pytest.mark.parametrize("sentence", list(SENTENCES))
def test_presenter_why_a_not_b_draws_no_text_over_another(chromium, sentence):
    from plotly.offline import get_plotlyjs

    src = SENTENCES[sentence]
    rng = np.random.default_rng(0)
    ixg = rng.normal(scale=0.3, size=len(src))
    rel = np.abs(rng.normal(size=len(src)))
    rel /= rel.sum()
    with using_theme(PRESENTER_THEME):  # as views/parts/lens.py builds it in presenter mode
        fig = contrast_figure(ixg, rel, src, "▁brown", "▁black", title="step 2: source words for A, not B",
                              width_px=PAGE_WIDTH_PX // 2)
        spec = json.loads(browser_json(fig, "why"))
    pg = chromium.new_page(viewport={"width": 1280, "height": 720})
    try:
        pg.set_content(f"<html><body style='margin:0'><div id='gd' style='width:{COLUMN_PX}px'></div>"
                       f"<script>{get_plotlyjs()}</script></body></html>")
        pg.evaluate("spec => Plotly.newPlot('gd', spec.data, spec.layout, {staticPlot: true})", spec)
        drawn = pg.evaluate(TEXTS_JS)
    finally:
        pg.close()
    rotated = [t for t in drawn["texts"] if t["cls"].startswith("x2tick")]
    upright = [t for t in drawn["texts"] if not t["cls"].startswith("x2tick")]
    assert len(upright) >= 5 and rotated, drawn  # the title, two panel titles and the y tick labels at least
    hits = [(a["text"], b["text"]) for i, a in enumerate(upright) for b in upright[i + 1:] if meet(a["box"], b["box"])]
    assert hits == [], f"texts drawn over each other: {hits}"
    # Rotated labels: their bounding boxes overlap by nature; the distance across the text is what counts.
    across = np.diff(drawn["ticks"]) * abs(np.sin(np.radians(drawn["angle"])))
    assert len(across) and across.min() >= PRESENTER_THEME.min_tick_px - 1, (drawn["ticks"], drawn["angle"])
    assert max(t["box"][3] for t in drawn["texts"]) <= PRESENTER_THEME.height_px  # nothing below the figure
