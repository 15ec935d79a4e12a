"""Real-browser test: presenter mode fits a projector for any sentence up to the reading limit.

At 1280×720 and 1920×1080, for a 6-word, a 48-word and a 100-token sentence, on every page: the header is one line,
every chart ends on the screen, no text of a figure runs into another or past the figure's edge, and a heatmap's
rows are at least viz.rows.MIN_ROW_PX tall (a long sentence's rows are a window the reader drags, never squeezed).
"""
from __future__ import annotations

import pytest
from test_browser_presenter import MAIN_CHART, SETTLED_JS, model_for

from browser_js import LAID_OUT_JS
from browser_support import new_page, open_app
from tiny_checkpoint import GERMAN

SIZES = [(1280, 720), (1920, 1080)]
WORDS = " ".join(GERMAN).replace(".", "").split()  # the tiny model's vocabulary, read word by word
SENTENCES = {"6 words": " ".join(WORDS[:6]) + ".",
             "48 words": " ".join((WORDS * 3)[:48]) + ".",
             "100 tokens": " ".join((WORDS * 5)[:99]) + "."}  # 99 words and the full stop

# The header's line, every chart's box, rows shorter than the least a row may be, and overlapping texts in a chart
# (two rotated labels are compared by where they end, as test_browser_truth.OVERLAPS_JS does).
FIT_JS = r"""
([height, minRow]) => {
  const main = document.querySelector("[data-testid='stMain']");
  const line = document.querySelector('.st-key-atlas_header_line h4');
  // the header's lines: its text's boxes, grouped by their tops (a grey tag and the text beside it share a line)
  const range = document.createRange();
  if (line) range.selectNodeContents(line);
  const size = line ? parseFloat(getComputedStyle(line).fontSize) : 0;
  const tops = [...range.getClientRects()].filter(r => r.width > 0).map(r => r.top).sort((a, b) => a - b);
  const lines = tops.filter((t, k) => k === 0 || t - tops[k - 1] > 0.8 * size).length;
  const out = {lines, over: [], rows: [], overlaps: [], cut: [], charts: 0};
  main.querySelectorAll("[data-testid='stPlotlyChart']").forEach((c, i) => {
    const b = c.getBoundingClientRect();
    if (b.width === 0) return;
    out.charts += 1;
    if (b.top < 0 || b.bottom > height + 1) out.over.push(`chart ${i}: ${b.top.toFixed(0)}–${b.bottom.toFixed(0)}`);
    const gd = c.querySelector('.js-plotly-plot');
    for (const tr of gd._fullData) {
      if (tr.type !== 'heatmap' || !tr.visible) continue;
      const ax = gd._fullLayout[tr.yaxis.replace('y', 'yaxis')];
      if (!ax || !ax.showticklabels || ax.type !== 'category' || ax.tickvals === undefined) continue;
      const px = ax._length / Math.abs(ax.range[1] - ax.range[0]);
      if (px < minRow) out.rows.push(`chart ${i} ${tr.yaxis}: ${px.toFixed(1)} px a row`);
    }
    const rotated = e => /rotate\((?!0[,)])/.test((e.getAttribute('transform') || '') +
                                                 (e.parentNode.getAttribute('transform') || ''));
    const texts = [...gd.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => [t, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0 && r.height > 0);
    const svg = gd.querySelector('.main-svg').getBoundingClientRect();
    // drawn outside the figure: cut off (a margin too small for its labels). A title's text box reaches a few
    // pixels above its letters (the line's ascent): the top allows for that.
    for (const [t, r] of texts)
      if (r.top < svg.top - 8 || r.bottom > svg.bottom + 1 || r.left < svg.left - 1 || r.right > svg.right + 1)
        out.cut.push(`chart ${i}: "${t.textContent.slice(0, 24)}" cut off`);
    for (let a = 0; a < texts.length; a++) for (let z = a + 1; z < texts.length; z++) {
      const [ta, p] = texts[a], [tz, q] = texts[z];
      if (rotated(ta) && rotated(tz)) continue;
      const inter = Math.max(0, Math.min(p.right, q.right) - Math.max(p.left, q.left)) *
                    Math.max(0, Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top));
      if (inter > 0.25 * Math.min(p.width * p.height, q.width * q.height))
        out.overlaps.push(`chart ${i}: "${ta.textContent.slice(0, 24)}" / "${tz.textContent.slice(0, 24)}"`);
    }
  });
  return out;
}
"""


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width,height", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_page_fits_the_screen_for_any_sentence(chromium, app_server, screenshot_dir, width, height):
    from views.plumbing.state import VIEWS
    from viz.rows import MIN_ROW_PX

    pg = new_page(chromium, width=width, height=height, timeout=90_000)
    bad, charts = [], 0
    try:
        for name, sentence in SENTENCES.items():
            for view in VIEWS:
                params = dict(model_for(view), text=sentence) if view != "Training" else model_for(view)
                open_app(pg, app_server.link(view=view, present=1, **params))
                pg.wait_for_function(SETTLED_JS, timeout=90_000, polling="raf")
                pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=90_000, polling="raf")
                got = pg.evaluate(FIT_JS, [height, MIN_ROW_PX])
                charts += got["charts"]
                found = [f"the header takes {got['lines']} lines"] if got["lines"] != 1 else []
                found += [what for key in ("over", "rows", "overlaps", "cut") for what in got[key]]
                if found:  # a picture of what failed, for whoever reads the test's output
                    pg.screenshot(path=screenshot_dir / f"presenter_fit_{width}_{view}_{name}.png".replace(" ", "_"))
                bad += [f"{name}, {view}: {what}" for what in found]
    finally:
        pg.context.close()
    assert bad == [], f"at {width}×{height}:\n" + "\n".join(bad[:40])
    assert charts >= 20  # the pages drew their figures
