"""What the browser tests check on a drawn page, each as a function that returns the problems it found (an empty
list when there are none), so that one load of a page runs every check that applies to it (the tours of
tests/browser/test_browser_tour.py) and a test of one feature can run the same check after its own clicks.

The scripts read the page as Chromium drew it: Plotly's resolved layout (``gd._fullLayout``), the boxes of drawn
texts, computed font sizes. Plain strings for ``page.evaluate``; DRAW_COUNTER_JS is an init script
(``context.add_init_script``), installed before the app's own code.
"""
from __future__ import annotations

from browser_support import CHART, EXCEPTION, alert_texts

MAIN_CHART = "[data-testid='stMain'] [data-testid='stPlotlyChart']"  # not the warm-up chart, drawn off-screen

# ----------------------------------------------------------------------------- the app around the figures


def exceptions(page) -> list[str]:
    """A Streamlit exception box, a stack trace or an error box anywhere on the page."""
    found = [f"exception: {t[:300]}" for t in page.locator(EXCEPTION).all_inner_texts()]
    found += ["a stack trace on the page"] if "Traceback" in page.locator("body").inner_text() else []
    return found + [f"error box: {t[:200]}" for t in alert_texts(page, "Error")]


def escaped_markup(page) -> list[str]:
    """Escaping meant for Markdown (or HTML) shown as text: what the reader sees literally."""
    shown = page.locator("[data-testid='stMain']").inner_text()
    return [f"{leaked!r} shown literally" for leaked in ("&lt;", "&gt;", "&amp;", "\\.") if leaked in shown]


def unnamed_charts(page) -> list[str]:
    """Charts without a text alternative (their accessible name, aria-label): a screen reader says nothing."""
    charts = page.locator(CHART)
    names = [charts.nth(i).get_attribute("aria-label") or "" for i in range(charts.count())]
    return [f"chart {i} has no accessible name" for i, name in enumerate(names) if not name.strip()]


# Leaf elements whose text the browser cuts with an ellipsis or hides by overflow: what a reader cannot read.
TRUNCATED_JS = """
() => {
  const out = [];
  for (const el of document.querySelectorAll("[data-testid='stMain'] *, [data-testid='stSidebar'] *")) {
    if (!el.offsetParent || el.closest('.js-plotly-plot') || el.closest('[data-testid="stDataFrame"]')) continue;
    if (el.children.length > 0 || !el.textContent.trim()) continue;
    const cs = getComputedStyle(el);
    const clips = cs.textOverflow === 'ellipsis' || cs.overflowX === 'hidden' || cs.overflow === 'hidden';
    if (clips && el.scrollWidth > el.clientWidth + 1) out.push(el.textContent.trim().slice(0, 80));
  }
  // Select boxes show their value in an input that scrolls its text instead of wrapping.
  for (const el of document.querySelectorAll("input[role='combobox']")) {
    if (el.offsetParent && el.value && el.scrollWidth > el.clientWidth + 1) out.push('select: ' + el.value);
  }
  // Streamlit cuts a button's label with an ellipsis and clips a widget's label: the text is wider than its box.
  for (const el of document.querySelectorAll(
      "[data-testid='stMain'] button [data-testid='stMarkdownContainer'], "
      + "[data-testid='stMain'] [data-testid='stWidgetLabel'] [data-testid='stMarkdownContainer']"))
    if (el.checkVisibility() && el.scrollWidth > el.clientWidth + 1)  // not inside a folded expander
      out.push('label: ' + el.textContent.trim().slice(0, 80));
  return out;
}
"""


def cut_text(page) -> list[str]:
    return [f"text cut off: {t}" for t in page.evaluate(TRUNCATED_JS)]


# ----------------------------------------------------------------------------- the figures

# For every drawn heatmap axis: tick labels whose boxes overlap their neighbour's (squashed or smeared labels).
OVERLAPS_JS = """
() => {
  const out = [];
  document.querySelectorAll('.js-plotly-plot').forEach((plot, p) => {
    for (const axis of ['ytick', 'xtick']) {
      const boxes = [...plot.querySelectorAll('g.' + axis + ' text')].map(t => t.getBoundingClientRect())
        .filter(r => r.width > 0 && r.height > 0);
      for (let i = 1; i < boxes.length; i++) {
        const a = boxes[i - 1], b = boxes[i];
        const inter = Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                      Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
        // rotated x labels have overlapping bounding boxes by construction; their right edges sit at the
        // ticks, so require real spacing between those instead
        if (axis === 'xtick') {
          if (Math.abs(b.right - a.right) < 9)
            out.push(`chart ${p} ${axis} ${i}: ${Math.abs(b.right - a.right).toFixed(1)} px apart`);
        } else if (inter > 0.25 * Math.min(a.width * a.height, b.width * b.height)) {
          out.push(`chart ${p} ${axis} ${i}: overlap ${inter.toFixed(0)} px²`);
        }
      }
    }
  });
  return out;
}
"""


def tick_overlaps(page) -> list[str]:
    return [f"tick labels overlap: {t}" for t in page.evaluate(OVERLAPS_JS)]


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


def margins(page) -> list[str]:
    """The heatmaps are drawn with the margins they asked for (viz.layout.label_margins estimates what the labels
    need, so plotly draws once instead of measuring and drawing again): plotly pushed nothing, the labels reach
    into the margins but no further, the estimate wastes at most 40 px (a quarter for long labels), an axis title
    covers no tick label, and a heatmap with axis labels has its axis titles."""
    charts, found = page.evaluate(MARGINS_JS), []
    labelled = [c for c in charts if c["reachLeft"] or c["reachBottom"]]  # not the thumbnail grid (no axis text)
    for c in charts:
        if (c["usedL"], c["usedB"]) != (c["askedL"], c["askedB"]):
            found.append(f"plotly pushed the margins: {c}")
        if c["overlaps"]:
            found.append(f"an axis title covers a tick label: {c}")
    for c in labelled:
        for reach, used in (("reachLeft", "usedL"), ("reachBottom", "usedB")):
            if not 0 < c[reach] <= c[used] <= c[reach] + max(40, 0.25 * c[reach]):
                found.append(f"the {used[-1]} margin does not fit its labels: {c}")
    if labelled and not any(c["titles"] for c in labelled):
        found.append("no axis title on the heatmaps")
    return found


def heatmaps_with_labels(page) -> int:
    """How many heatmaps have tick labels or axis titles (a page about a matrix must draw at least one)."""
    return sum(1 for c in page.evaluate(MARGINS_JS) if c["reachLeft"] or c["reachBottom"])


# Records the size of every full draw per chart: Plotly gives each chart div its event methods, `emit` last, when it
# first plots; a setter on the div prototype catches that and subscribes to plotly_beforeplot, which starts every
# full draw, and to plotly_afterplot, when the drawn size is known. Not counted: Plotly's own redraw when labels
# turn out to need wider margins (the margins check above).
DRAW_COUNTER_JS = """(() => {
  Object.defineProperty(HTMLDivElement.prototype, 'emit', {
    configurable: true,
    get() { return undefined; },
    set(fn) {
      Object.defineProperty(this, 'emit', {configurable: true, writable: true, enumerable: true, value: fn});
      const gd = this;
      gd.__draws = [];
      gd.on('plotly_beforeplot', () => {
        if (!(gd._fullLayout && gd._fullLayout._redrawFromAutoMarginCount)) gd.__full = true;
      });
      gd.on('plotly_afterplot', () => {
        if (gd.__full) gd.__draws.push(`${gd._fullLayout.width}×${gd._fullLayout.height}`);
        gd.__full = false;
      });
    },
  });
})()"""

# Per chart on the page (not a stale leftover, not the warm-up chart): its title and the sizes of its full draws
# since the last reset.
DRAWS_JS = """reset => [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")]
  .filter(gd => !gd.closest("[data-stale='true']") && !gd.closest('.st-key-atlas-warm'))
  .map(gd => { const sizes = gd.__draws || []; if (reset) gd.__draws = [];
               return [((gd.querySelector('.gtitle') || {}).textContent || '').slice(0, 60), sizes]; })"""


def settled_draws(page) -> list:
    """[title, sizes of its full draws] per chart once they have not changed for 0.6 s (a second draw follows the
    first by less); the record starts again, empty."""
    last = None
    for _ in range(40):
        now = page.evaluate(DRAWS_JS, False)
        if now == last:
            return page.evaluate(DRAWS_JS, True)
        last = now
        page.wait_for_timeout(600)
    raise AssertionError(f"the charts kept drawing: {last}")


def drawn_twice(page) -> list[str]:
    """Charts drawn again at the size they were drawn at: Streamlit's chart element hands Plotly.react a figure twice
    when it mounts, and the app's figures are prepared so that the second time is no change (viz.transport.
    browser_json, viz.look). A draw at another size is not that: a cold page's container can change width after a
    chart's first draw (a scroll bar appears, the page's stylesheet arrives), and Plotly must draw again. Needs
    DRAW_COUNTER_JS."""
    return [f"chart {title!r} drawn again at the same size (its draws: {', '.join(sizes)})"
            for title, sizes in settled_draws(page) if any(a == b for a, b in zip(sizes, sizes[1:]))]


# ----------------------------------------------------------------------------- presenter mode, at a projector's size

# Every text Plotly drew (tick labels, titles, colourbars, annotations, bar labels) that is visible, with its
# computed font size in CSS pixels.
FIGURE_TEXT_JS = """
() => [...document.querySelectorAll('.js-plotly-plot text')]
  .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0 && !t.closest('.st-key-atlas-warm'))
  .map(t => [parseFloat(getComputedStyle(t).fontSize), t.textContent.trim().slice(0, 40)])
"""


def small_figure_text(page, least_px: float) -> list[str]:
    """Figure texts below `least_px` (presenter mode promises 20 px: legible from the back of a lecture hall)."""
    texts = page.evaluate(FIGURE_TEXT_JS)
    return [f"figure text below {least_px:g} px: {size:g} px {text!r}" for size, text in texts if size < least_px]


# Legend entries a chart's legend does not show: a legend taller than its figure scrolls inside its box, and the
# entries below the box are hidden (a projector showed 5 of 8 waves' names).
HIDDEN_LEGEND_JS = """
() => [...document.querySelectorAll('.js-plotly-plot .legend')].flatMap(legend => {
  const box = legend.querySelector('.bg').getBoundingClientRect();
  return [...legend.querySelectorAll('.traces')].filter(t => {
    const r = t.getBoundingClientRect();
    return r.bottom > box.bottom + 1 || r.top < box.top - 1 || r.right > box.right + 1;
  }).map(t => t.textContent.trim().slice(0, 40));
})
"""


def hidden_legend_entries(page) -> list[str]:
    return [f"legend entry not shown: {name!r}" for name in page.evaluate(HIDDEN_LEGEND_JS)]


# Each colour bar's tick labels and title (a projector's short bar once wrote one "0" and nothing else).
COLORBARS_JS = """
() => [...document.querySelectorAll('.js-plotly-plot .colorbar')].map(bar => [
  [...bar.querySelectorAll('text')].filter(t => !t.closest('.cbtitle') && t.textContent.trim()).length,
  [...bar.querySelectorAll('.cbtitle text')].map(t => t.textContent.trim()).join(' ')])
"""


def unreadable_colorbars(page) -> list[str]:
    """Colour bars with fewer than two tick labels or no title: a colour without a scale to read it by."""
    return [f"a colour bar with {n} tick label(s) and title {title!r}" for n, title in page.evaluate(COLORBARS_JS)
            if n < 2 or not title]


# The header's line, every chart's box, rows shorter than the least a row may be, and overlapping texts in a chart
# (two rotated labels are compared by where they end, as OVERLAPS_JS does).
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


def off_the_screen(page, height: int) -> tuple[list[str], int]:
    """Presenter mode on a screen `height` px tall: the header takes two lines at most, every chart ends on the
    screen, a heatmap's rows are at least viz.rows.MIN_ROW_PX tall, no text of a figure runs into another or past
    the figure's edge. Returns the problems and how many charts were measured."""
    from viz.rows import MIN_ROW_PX

    got = page.evaluate(FIT_JS, [height, MIN_ROW_PX])
    found = [f"the header takes {got['lines']} lines"] if not 1 <= got["lines"] <= 2 else []
    found += [f"{key}: {what}" for key in ("over", "rows", "overlaps", "cut") for what in got[key]]
    return found, got["charts"]


def figure_text_problems(page, least_px: float) -> list[str]:
    """Every figure on the page (a phone's): no two of its texts overlap, none is drawn past its figure's edge (the
    top allows for a title's ascent, as in off_the_screen), none is smaller than `least_px`."""
    got = page.evaluate(FIT_JS, [10**6, 0])
    return [f"{key}: {what}" for key in ("overlaps", "cut") for what in got[key]] + small_figure_text(page, least_px)


SIDEBAR_OPEN_JS = """sel => { const s = document.querySelector(sel);
  return s !== null && s.getAttribute('data-collapsed') === 'false' && s.getBoundingClientRect().right > 50; }"""

# ----------------------------------------------------------------------------- a phone

# A phone's browser says so in its User-Agent (views/plumbing/screen.py draws its first page for a phone).
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 3,
         "user_agent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
                       "Chrome/131.0.0.0 Mobile Safari/537.36"}
PHONE_FIGURE = f"{MAIN_CHART}:not(.st-key-atlas-warm *)"  # the page's figures (the warm-up chart is off-screen)

# What a phone shows: sideways scroll of the document and of Streamlit's main area, the sidebar's box, the top of the
# figure highest on the screen, and the tick labels drawn below 12 px.
PHONE_JS = r"""
([figure, minPx]) => {
  const main = document.querySelector("[data-testid='stMain']");
  const side = document.querySelector("[data-testid='stSidebar']").getBoundingClientRect();
  const figures = [...document.querySelectorAll(figure)].map(c => c.getBoundingClientRect()).filter(b => b.width);
  const small = [...main.querySelectorAll(".js-plotly-plot g[class$='tick'] > text")]
    .filter(t => t.textContent.trim() && parseFloat(getComputedStyle(t).fontSize) < minPx)
    .map(t => `"${t.textContent}" at ${getComputedStyle(t).fontSize}`);
  return {page: document.scrollingElement.scrollWidth, main: main.scrollWidth, width: window.innerWidth,
          sidebar: side.right, top: figures.length ? Math.min(...figures.map(b => b.top)) : null,
          figures: figures.length, small};
}
"""


def phone_problems(page) -> list[str]:
    """On a 390×844 phone: nothing scrolls sideways (neither the document nor Streamlit's main area), the sidebar is
    folded (it would cover the whole page), the first figure starts within the first screen and every tick label is
    drawn at 12 px or more."""
    got = page.evaluate(PHONE_JS, [PHONE_FIGURE, 12])
    height = PHONE["viewport"]["height"]
    found = [f"the page is {got['page']} px wide"] if got["page"] > got["width"] else []
    found += [f"the main area is {got['main']} px wide"] if got["main"] > got["width"] else []
    found += [f"the sidebar reaches {got['sidebar']:.0f} px"] if got["sidebar"] > 0 else []
    if got["figures"] and (got["top"] is None or got["top"] >= height):
        found.append(f"the first figure starts at {got['top']:.0f} px")
    return found + [f"tick label below 12 px: {s}" for s in got["small"][:5]]
