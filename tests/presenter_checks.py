"""Presenter mode in a real browser: the header's "Choose", where the page's pickers are, and the check that a short
sentence's heatmaps are whole."""
from __future__ import annotations

CHOOSE = ".st-key-atlas_header_line [data-testid='stPopover'] button:has-text('Choose')"


def open_choose(page) -> None:
    """Presenter mode: open the header's "Choose" (the page's pickers), unless it is open."""
    button = page.locator(CHOOSE)
    if button.get_attribute("aria-expanded") != "true":
        button.click()
    page.locator("[data-testid='stPopoverBody']").first.wait_for(state="visible")


def close_choose(page) -> None:
    """Presenter mode: close the header's "Choose", if it is open, so that it covers no figure."""
    button = page.locator(CHOOSE)
    if button.count() and button.get_attribute("aria-expanded") == "true":
        page.keyboard.press("Escape")
        page.wait_for_function("sel => document.querySelector(sel)?.getAttribute('aria-expanded') !== 'true'",
                               arg=CHOOSE.replace(":has-text('Choose')", ""))


# The page was drawn for the window's own size (views/plumbing/screen.py sends it after the first drawing).
DRAWN_FOR_JS = """() => { const d = document.querySelector('.atlas-screen')?.dataset.drawn?.split('x').map(Number);
  return !!d && Math.abs(d[0] - innerWidth) <= 8 && Math.abs(d[1] - innerHeight) <= 8; }"""


WHOLE_JS = r"""
limit => {
  const out = [];
  document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart'] .js-plotly-plot").forEach((gd, i) => {
    const fl = gd._fullLayout;
    if (!fl || !gd._fullData) return;
    const named = fl.title && fl.title.text && !/^Click to enter/.test(fl.title.text);
    const title = (named ? fl.title.text : `chart ${i}`).replace(/<[^>]+>/g, ' ').slice(0, 40);
    // the labels an axis draws, and whether another axis of the same direction, beside it (the same domain
    // across), draws them for it (panels in a row share their rows' labels, panels in a column their keys')
    const labels = ax => ax && ax.showticklabels ? (ax._vals || []).filter(v => `${v.text}`.trim() !== '').length : 0;
    const axes = letter => Object.keys(fl).filter(k => new RegExp(`^${letter}axis\\d*$`).test(k)).map(k => fl[k]);
    for (const tr of gd._fullData) {
      if (tr.type !== 'heatmap' || tr.visible === false || !tr.z || !tr.z.length) continue;
      const n = {x: tr.z[0].length, y: tr.z.length};
      for (const letter of ['x', 'y']) {
        if (n[letter] > limit) continue;
        const ax = fl[tr[`${letter}axis`].replace(letter, `${letter}axis`)];
        if (!ax || ax.type !== 'category' && ax.tickmode !== 'array') continue;  // a number axis (dimensions)
        const span = Math.abs(ax.range[1] - ax.range[0]);
        if (span < n[letter] - 0.01) out.push(`${letter} shows ${span.toFixed(0)} of ${n[letter]}: ${title}`);
        const mates = axes(letter).filter(a => Math.abs(a.domain[0] - ax.domain[0]) < 0.01 &&
                                                Math.abs(a.domain[1] - ax.domain[1]) < 0.01);
        const most = Math.max(...mates.map(labels));
        const yDomain = t => fl[t.yaxis.replace('y', 'yaxis')].domain;
        const [lo, hi] = yDomain(tr);  // heatmaps side by side: their heights overlap
        const beside = gd._fullData.filter(t => t.type === 'heatmap' && yDomain(t)[0] < hi && yDomain(t)[1] > lo)
          .length;
        const what = beside > 1 ? `multi-panel ${letter}` : letter;
        if (most < n[letter]) out.push(`${what} labels ${most} of ${n[letter]}: ${title}`);
      }
    }
  });
  return [...new Set(out)];
}
"""


def cut_heatmaps(page, limit: int) -> list[str]:
    """Heatmaps on the page (its main area) with at most ``limit`` rows or keys that show a window of them, or leave
    some of them without a label: neither on their own axis nor on a neighbouring panel's that shares the axis
    (problems of a figure with several heatmaps side by side begin with "multi-panel")."""
    return page.evaluate(WHOLE_JS, limit)
