"""How quickly does the app respond in a real browser?

    python benchmarks/bench_app.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--repeats 10]
                                   [--cold-repeats 3] [--mode normal|presenter|compare]

Starts `streamlit run app.py` on a free port and drives Debian's Chromium with Playwright:
  cold start   from starting the server process to the Overview page fully drawn in a fresh page
               (model load and the first trace included); --cold-repeats fresh servers
  new sentence on the Attention view, type a different sentence and press Ctrl+Enter: until the script
               run that follows has finished, the sentence line above the view shows the new sentence
               and every chart of the view has been drawn again
  layer/head   on the Attention view, pick another layer or head: until the run has finished and the
               single-head chart has been drawn again with the new "layer L, head H" title
  attention kind  on the Attention view, pick another attention kind (encoder self, decoder self, cross):
               until the run has finished and every chart of the view has been drawn again
  page switch  click a view in the sidebar's "View" radio: until the run has finished, the page has as many
               charts and tables as that view has, every chart has finished a plot (plotly_afterplot) after
               the click, and every st.dataframe's canvas has its size. --repeats cycles through all views, each cycle
               a rotation with another step (so every switch goes to a different view, from varying
               views), after one warm-up cycle; the sentence stays the same (each page was drawn once for it)
Interaction times are measured inside the page, from the key press or pointer press to the frame in
which everything is drawn; a chart counts as drawn once it has emitted plotly_afterplot after the press,
new charts included (their SVG appears before Plotly has finished, and Plotly may redraw for the margins).
--mode presenter measures the Attention view in presenter mode (one head large;
the sidebar is opened for the page switches), --mode compare side by side (two sentences, one head).
Writes benchmarks/results/app.json (app_presenter.json, app_compare.json).
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

from common import (
    ROOT,
    add_server_args,
    distinct_sentences,
    machine,
    server_preflight,
    summary,
    table,
    verdict,
    write_results,
)

# Issue 10's targets (medians): cold start = server start -> first page drawn.
TARGETS = {"cold_start_s": 4.0, "new_sentence_median_s": 0.5, "layer_head_median_s": 0.25,
           "page_switch_median_s": 0.5}

# Records when the user acted: the first Enter key press or pointer press after arm().
# Also notes when each chart created from now on finishes a plot: Plotly gives every chart div an own `emit`
# method (gd.emit = ...) and ends each Plotly.newPlot/react with gd.emit('plotly_afterplot'), after the
# margins are settled and any redraw they caused. A setter on the div prototype catches that assignment and
# wraps it, so even a chart's first plot is seen (gd.on() can only be called once the chart exists, often
# after that first plot). The SVG appears, and _fullLayout._replotting drops, before that redraw.
INPUT_CLOCK_JS = """() => {
  if (window.__atlasClock) return;
  window.__atlasClock = true;
  window.__atlasT0 = null;
  const mark = () => { if (window.__atlasT0 === null) window.__atlasT0 = performance.now(); };
  document.addEventListener('keydown', e => { if (e.key === 'Enter') mark(); }, true);
  document.addEventListener('pointerdown', mark, true);
  Object.defineProperty(HTMLDivElement.prototype, 'emit', {
    configurable: true,
    get() { return undefined; },
    set(fn) {
      const gd = this;
      gd.__atlasTrapped = true;
      Object.defineProperty(gd, 'emit', {configurable: true, writable: true, enumerable: true, value: function (name) {
        if (name === 'plotly_afterplot') gd.__atlasPlotted = performance.now();
        return fn.apply(this, arguments);
      }});
    },
  });
}"""

# Tag every chart now on the page and note its redraws; reset the input clock.
ARM_JS = """gen => {
  window.__atlasT0 = null;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    gd.__atlasGen = gen;
    if (!gd.__atlasHooked && gd.on) {
      gd.__atlasHooked = true;
      gd.on('plotly_afterplot', () => { gd.__atlasPlotted = performance.now(); });
    }
  }
}"""

# A chart counts as drawn again when it finished a plot after the input (or, for a new element whose plots
# are not seen, when it is there: no tag).
REDRAWN_JS = """
  const idle = !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']");
  const fresh = gd => (gd.__atlasPlotted || 0) > window.__atlasT0 || (gd.__atlasGen !== a.gen && !gd.__atlasTrapped);
  const drawn = gd => !!gd.querySelector('.main-svg');
"""

NEW_SENTENCE_DONE_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const src = document.querySelector("[data-testid='stMain'] h4");
  if (!src || src.innerText === a.oldSource) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
  if (charts.length === 0 || !charts.every(gd => drawn(gd) && fresh(gd))) return false;
  return performance.now() - window.__atlasT0;
}"""

LAYER_HEAD_DONE_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const gd = document.querySelector(".st-key-" + a.chart + " .js-plotly-plot");
  if (!gd || !drawn(gd) || !fresh(gd)) return false;
  const title = gd.querySelector('.gtitle');
  if (!title || !title.textContent.includes(a.title)) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
  if (!charts.every(drawn)) return false;
  return performance.now() - window.__atlasT0;
}"""

# After a page switch or an attention-kind change: the run has finished, the page holds the expected number of
# charts and tables (leftovers of the previous view marked stale do not count), every chart finished a plot
# after the input and is not drawing, and every table's canvas has its size.
ALL_REDRAWN_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const live = el => !el.closest("[data-stale='true']");
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].filter(live);
  if (charts.length !== a.charts) return false;
  if (!charts.every(gd => drawn(gd) && fresh(gd) && gd._fullLayout && !gd._fullLayout._replotting)) return false;
  const tables = [...document.querySelectorAll("[data-testid='stDataFrame']")].filter(live);
  if (tables.length !== a.tables) return false;
  const sized = t => {
    const c = [...t.querySelectorAll('canvas')];
    return c.length > 0 && c.every(x => x.width > 0 && x.height > 0);
  };
  if (!tables.every(sized)) return false;
  return performance.now() - window.__atlasT0;
}"""

# What the page holds once it has settled: the charts (all drawn) and tables (canvases sized), once the page
# has not changed for `quietMs` (Streamlit loads some element types, st.dataframe among them, on first use:
# a page can stay unchanged for a few frames while that code arrives), or null before.
PAGE_CONTENT_JS = """quietMs => {
  const now = performance.now(), q = window.__atlasSettle;
  if (!q || q.changes !== window.__atlasChanges) {
    window.__atlasSettle = {changes: window.__atlasChanges, since: now};
    return null;
  }
  if (now - q.since < quietMs) return null;
  const live = el => !el.closest("[data-stale='true']");
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].filter(live);
  const tables = [...document.querySelectorAll("[data-testid='stDataFrame']")].filter(live);
  const drawn = gd => gd.querySelector('.main-svg') && gd._fullLayout && !gd._fullLayout._replotting;
  const sized = t => {
    const c = [...t.querySelectorAll('canvas')];
    return c.length > 0 && c.every(x => x.width > 0 && x.height > 0);
  };
  if (!charts.every(drawn) || !tables.every(sized)) return null;
  return {charts: charts.length, tables: tables.length};
}"""

# For error messages: what the page holds now.
PAGE_STATE_JS = """gen => ({
  runs: window.__atlasRuns, t0: window.__atlasT0,
  idle: !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']"),
  charts: [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].map(gd => ({
    stale: !!gd.closest("[data-stale='true']"), tagged: gd.__atlasGen === gen, svg: !!gd.querySelector('.main-svg'),
    plotted_after_input: (gd.__atlasPlotted || 0) > window.__atlasT0,
    title: ((gd.querySelector('.gtitle') || {}).textContent || '').slice(0, 50)})),
  tables: [...document.querySelectorAll("[data-testid='stDataFrame']")].map(t => ({
    stale: !!t.closest("[data-stale='true']"),
    canvases: [...t.querySelectorAll('canvas')].map(c => [c.width, c.height])})),
  exceptions: document.querySelectorAll("[data-testid='stException']").length,
})"""


def cold_start(bs, chromium, ckpt_dir: Path, model: str, env: dict, log: Path) -> tuple[dict, object]:
    """Start a server and open the Overview in a fresh page; returns the timings and the running server."""
    page = bs.new_page(chromium, timeout=120_000)
    server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env)
    healthy = time.perf_counter()
    try:
        bs.open_app(page, server.url, timeout=120_000)
        errors = bs.alert_texts(page, "Error")
        if errors:
            raise RuntimeError("the app shows an error: " + " | ".join(errors))
        bs.wait_charts(page, timeout=120_000)
        done = time.perf_counter()
    except Exception:
        bs.stop_server(server)
        raise
    finally:
        page.context.close()
    return {"total_s": done - server.started, "until_healthy_s": healthy - server.started,
            "first_page_s": done - healthy}, server


def new_sentence(bs, page, text: str, gen: int, before=None) -> float:
    """Type `text`, press Ctrl+Enter; seconds until the Attention view is drawn again for it.

    `before`, if given, is called just before the key press (bench_server_cpu.py reads the server's CPU there)."""
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page),
            "oldSource": page.locator("[data-testid='stMain'] h4").first.inner_text()}
    area = bs.widget(page, "text").locator("textarea")
    area.fill(text)
    page.evaluate("() => { window.__atlasT0 = null; }")  # fill() may have pressed nothing, but be sure
    if before is not None:
        before()
    area.press("Control+Enter")
    ms = page.wait_for_function(NEW_SENTENCE_DONE_JS, arg=args, polling="raf", timeout=120_000).json_value()
    return ms / 1000


# What each mode opens (the Attention view) and where its one-head chart is.
MODES = {
    "normal": ({}, "head_fig"),
    "presenter": ({"present": 1, "focus": "one head"}, "head_fig"),
    "compare": ({"compare": "sentence", "text2": "Den Mann beißt der Hund.", "focus": "one head"}, "compare_fig"),
}


def change_layer_or_head(bs, page, key: str, value: int, layer: int, head: int, gen: int, mode: str = "normal",
                         before=None) -> float:
    """Pick `value` in the layer or head selectbox; seconds until the single-head chart shows layer/head.

    `before`, if given, is called just before the pointer press on the option."""
    bs.widget(page, key).locator("input[role='combobox']").click()
    label = f"{key} {value}" if mode == "presenter" else str(value)  # presenter's boxes say "layer 2"
    option = page.locator("[role='listbox'] [role='option']").get_by_text(label, exact=True)
    option.wait_for(state="visible")
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), "title": f"layer {layer}, head {head}", "chart": MODES[mode][1]}
    if before is not None:
        before()
    option.click()
    ms = page.wait_for_function(LAYER_HEAD_DONE_JS, arg=args, polling="raf", timeout=60_000).json_value()
    return ms / 1000


def page_content(page, quiet_ms: float = 500, timeout: float = 120_000) -> dict:
    """Once the page has not changed for `quiet_ms`: {"charts": n, "tables": m} (every chart drawn, every table's
    canvas sized)."""
    page.evaluate("() => { window.__atlasSettle = null; }")
    return page.wait_for_function(PAGE_CONTENT_JS, arg=quiet_ms, polling="raf", timeout=timeout).json_value()


def views_of(bs, page) -> list[str]:
    """The options of the sidebar's "View" radio, in order."""
    return [t.strip() for t in bs.widget(page, "view").locator("[data-testid='stRadioOption']").all_inner_texts()]


def open_sidebar(bs, page) -> None:
    """Unfold the sidebar if it is folded (presenter mode), so its "View" radio can be clicked."""
    sidebar = page.locator(bs.SIDEBAR)
    if sidebar.count() and sidebar.first.get_attribute("data-collapsed") == "true":
        page.locator("[data-testid='stExpandSidebarButton']").click()
        page.wait_for_function("""sel => {
            const s = document.querySelector(sel);
            return s !== null && s.getAttribute('data-collapsed') === 'false' && s.getBoundingClientRect().right > 50;
        }""", arg=bs.SIDEBAR, timeout=10_000)
        page.evaluate("() => new Promise(r => setTimeout(r, 500))")  # the slide-in animation


def settle_view(bs, page, view: str) -> dict:
    """Switch to `view` without measuring; returns what the settled page holds (for page_switch's `expect`)."""
    bs.choose_view(page, view, timeout=120_000)
    return page_content(page)


def page_switch(bs, page, view: str, gen: int, expect: dict, before=None) -> float:
    """Click `view` in the sidebar's radio; seconds until the run has finished and the page holds `expect`
    ({"charts": n, "tables": m}, from settle_view), every chart drawn after the click, every table sized.

    `before`, if given, is called just before the pointer press."""
    option = bs.widget(page, "view").locator("[data-testid='stRadioOption']").get_by_text(view, exact=True)
    option.wait_for(state="visible")
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), "charts": expect["charts"], "tables": expect["tables"]}
    if before is not None:
        before()
    option.click()
    return _wait_all_redrawn(page, args, f"switching to {view}", timeout=120_000)


def _wait_all_redrawn(page, args: dict, what: str, timeout: float) -> float:
    """Seconds from the input to ALL_REDRAWN_JS's frame; on a timeout, says what the page held instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        return page.wait_for_function(ALL_REDRAWN_JS, arg=args, polling="raf", timeout=timeout).json_value() / 1000
    except PlaywrightTimeout:
        state = page.evaluate(PAGE_STATE_JS, args["gen"])
        raise RuntimeError(f"{what}: the page was not drawn as expected ({args}) within {timeout / 1000:.0f} s; "
                           f"it shows {state}") from None


def change_kind(bs, page, gen: int, before=None) -> tuple[float, str]:
    """Pick the next attention kind in the `kind` selectbox (cycling through its options); seconds until the run
    has finished and every chart of the view has been drawn again, and the kind picked."""
    expect = page_content(page)
    current = bs.selectbox_value(page, "kind")
    bs.widget(page, "kind").locator("input[role='combobox']").click()
    options = page.locator("[role='listbox'] [role='option']")
    options.first.wait_for(state="visible")
    labels = [t.strip() for t in options.all_inner_texts()]
    label = labels[(labels.index(current) + 1) % len(labels)] if current in labels else labels[0]
    option = options.get_by_text(label, exact=True)
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), "charts": expect["charts"], "tables": expect["tables"]}
    if before is not None:
        before()
    option.click()
    return _wait_all_redrawn(page, args, f"changing the attention kind to {label}", timeout=60_000), label


def view_cycles(views: list[str], start: str, cycles: int, first_step: int = 1) -> list[str]:
    """`cycles` rotations through `views` from `start`: cycle k steps by the k-th step coprime to len(views)
    (1, 2, 3, ... for 7 views), so it visits every view once and ends at `start`, and no switch stays on a view."""
    n = len(views)
    steps = [s for s in range(1, n) if math.gcd(s, n) == 1] or [0]
    i, out = views.index(start), []
    for k in range(cycles):
        step = steps[(first_step - 1 + k) % len(steps)]
        for _ in range(n):
            i = (i + step) % n
            out.append(views[i])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--repeats", type=int, default=10,
                    help="new sentences, layer/head changes and attention-kind changes measured, and cycles "
                         "through every view")
    ap.add_argument("--cold-repeats", type=int, default=3, help="fresh servers started for the cold start")
    ap.add_argument("--mode", choices=list(MODES), default="normal",
                    help="the Attention view as is, in presenter mode, or side by side")
    args = ap.parse_args()

    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(args.repeats + 1)
    server = None
    with tempfile.TemporaryDirectory(prefix="bench_app_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)  # launched first: the cold start is the server's, not the browser's
        try:
            colds = []
            for i in range(args.cold_repeats):
                if server is not None:
                    bs.stop_server(server)
                cold, server = cold_start(bs, chromium, ckpt_dir, args.model, env, Path(tmp) / f"server{i}.log")
                colds.append(cold)
                print(f"cold start {i + 1}: {cold['total_s']:.2f} s (healthy after {cold['until_healthy_s']:.2f} s)",
                      flush=True)

            page = bs.new_page(chromium, timeout=120_000)
            bs.open_app(page, server.link(view="Attention", **MODES[args.mode][0]), timeout=120_000)
            bs.wait_charts(page, timeout=120_000)
            page.evaluate(INPUT_CLOCK_JS)
            sentence_s = []
            for i, text in enumerate(sentences):
                s = new_sentence(bs, page, text, gen=i + 1)
                if i:  # the first is a warm-up
                    sentence_s.append(s)
            print(f"new sentence: {len(sentence_s)} measured", flush=True)

            cfg = _config(ckpt_dir / args.model)
            layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the default kind is cross-attention
            layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
            switch_s, kinds = [], []
            for i in range(args.repeats + 1):
                if i % 2 == 0 or layers == 1:
                    head = head % heads + 1
                    key, value = "head", head
                else:
                    layer = layer % layers + 1
                    key, value = "layer", layer
                s = change_layer_or_head(bs, page, key, value, layer, head, gen=1000 + i, mode=args.mode)
                if i:
                    switch_s.append(s)
                    kinds.append(key)
            print(f"layer/head change: {len(switch_s)} measured", flush=True)

            kind_s, kind_to = [], []
            for i in range(args.repeats + 1):
                s, label = change_kind(bs, page, gen=2000 + i)
                if i:
                    kind_s.append(s)
                    kind_to.append(label)
            print(f"attention kind change: {len(kind_s)} measured", flush=True)

            if args.mode == "presenter":
                open_sidebar(bs, page)
            views = views_of(bs, page)
            start = bs.selected_view(page)
            expect = {}
            for view in view_cycles(views, start, 1):  # warm-up: each page drawn once; what each page holds
                expect[view] = settle_view(bs, page, view)
            page_order = view_cycles(views, start, args.repeats, first_step=1)
            page_s, page_from, prev = [], [], start
            for i, view in enumerate(page_order):
                page_s.append(page_switch(bs, page, view, gen=3000 + i, expect=expect[view]))
                page_from.append(prev)
                prev = view
            print(f"page switch: {len(page_s)} measured", flush=True)
            exceptions = page.locator(bs.EXCEPTION).count()
            page.context.close()
        finally:
            if server is not None:
                bs.stop_server(server)
            chromium.close()

    cold = summary([c["total_s"] for c in colds])
    sent = summary(sentence_s)
    sw = summary(switch_s)
    sw_head = summary([s for s, k in zip(switch_s, kinds) if k == "head"]) if "head" in kinds else None
    sw_layer = summary([s for s, k in zip(switch_s, kinds) if k == "layer"]) if "layer" in kinds else None
    kind = summary(kind_s)
    pages = summary(page_s)
    per_view = {v: {"seconds": [s for s, w in zip(page_s, page_order) if w == v]} for v in views}
    for v, d in per_view.items():
        d.update(summary(d["seconds"]), expect=expect[v])

    def row(name, st):
        return [name, st["n"], st["median_ms"], st["p10_ms"], st["p90_ms"], st["min_ms"], st["max_ms"]]

    rows = [row("cold start (Popen -> Overview drawn)", cold), row("new sentence (Attention view)", sent),
            row("layer/head change (Attention view)", sw)]
    if sw_head:
        rows.append(row("  of which head", sw_head))
    if sw_layer:
        rows.append(row("  of which layer", sw_layer))
    rows.append(row("attention kind change (Attention view)", kind))
    rows.append(row("page switch, every view", pages))
    rows += [row(f"  to {v} ({d['expect']['charts']} charts, {d['expect']['tables']} tables)", d)
             for v, d in per_view.items()]
    print()
    print(table(rows, ["measure", "n", "median ms", "p10", "p90", "min", "max"]))
    worst_view = max(per_view, key=lambda v: per_view[v]["median_ms"])
    worst = per_view[worst_view]["median_ms"] / 1000
    t = TARGETS
    checks = [
        ("cold start, median", f"{cold['median_ms'] / 1000:.2f} s", f"<= {t['cold_start_s']:g} s",
         verdict(cold["median_ms"] / 1000, t["cold_start_s"])),
        ("new sentence, median", f"{sent['median_ms'] / 1000:.2f} s", f"<= {t['new_sentence_median_s']:g} s",
         verdict(sent["median_ms"] / 1000, t["new_sentence_median_s"])),
        ("layer/head change, median", f"{sw['median_ms'] / 1000:.2f} s", f"<= {t['layer_head_median_s']:g} s",
         verdict(sw["median_ms"] / 1000, t["layer_head_median_s"])),
        ("attention kind change, median", f"{kind['median_ms'] / 1000:.2f} s",
         f"<= {t['layer_head_median_s']:g} s (as layer/head)",
         verdict(kind["median_ms"] / 1000, t["layer_head_median_s"])),
        ("page switch, median of every view", f"{worst:.2f} s (slowest: {worst_view})",
         f"<= {t['page_switch_median_s']:g} s", verdict(worst, t["page_switch_median_s"])),
    ]
    print()
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    path = write_results("app" if args.mode == "normal" else f"app_{args.mode}", {
        "benchmark": "app", "mode": args.mode, "checkpoint_dir": str(ckpt_dir), "model": args.model,
        "repeats": args.repeats,
        "torch_threads": args.torch_threads or 1, "machine": machine(),
        "cold_start": {"runs": colds, **cold}, "new_sentence": {"seconds": sentence_s, **sent},
        "layer_head": {"seconds": switch_s, "changed": kinds, **sw, "head": sw_head, "layer": sw_layer},
        "attention_kind": {"seconds": kind_s, "to": kind_to, **kind},
        "page_switch": {"seconds": page_s, "to": page_order, "from": page_from, **pages, "views": per_view,
                        "slowest_view": worst_view, "slowest_view_median_ms": worst * 1000,
                        "sidebar_opened": args.mode == "presenter"},
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks],
        "notes": "Interaction times measured in the page from the key/pointer press to the first frame with the "
                 "run finished and the charts drawn again. Cold starts after the first find the files in the OS cache. "
                 "Page switches: one warm-up cycle through every view first (each page drawn once for the sentence), "
                 "then rotations with varying steps; a switch is done when the page holds as many charts and "
                 "tables as the warm-up found, every chart new or re-plotted after the click, every table's "
                 "canvas sized.",
    })
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


def _config(folder: Path) -> dict:
    import json

    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


if __name__ == "__main__":
    sys.exit(main())
