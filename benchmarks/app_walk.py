"""The browser walk of bench_pages.py and bench_server_cpu.py (and its --memory): the in-page clock that times an action
from the key or pointer press to the first animation frame in which the run has finished and every chart concerned
has emitted plotly_afterplot, and the actions (a cold start, a new sentence, a layer/head or attention-kind change,
a page switch, one under Chromium's trace).
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

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
# Streamlit fetches the code of an element type on its first use and shows a grey skeleton in the element's place
# until it has arrived and drawn: a page that still shows one (outside the stale leftovers) is not drawn yet.
SKELETON = "[data-testid='stSkeleton'], [data-testid='stSkeletonElement']"
LOADED_JS = """
  const loaded = () => [...document.querySelectorAll(""" + json.dumps(SKELETON) + """)]
    .every(el => el.closest("[data-stale='true']"));
"""
# Polled once an animation frame: true once no element of the page is waiting for its code.
NOTHING_LOADING_JS = "() => {" + LOADED_JS + "  return loaded(); }"
REDRAWN_JS = LOADED_JS + """
  const idle = !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']");
  const fresh = gd => (gd.__atlasPlotted || 0) > window.__atlasT0 || (gd.__atlasGen !== a.gen && !gd.__atlasTrapped);
  const drawn = gd => !!gd.querySelector('.main-svg');
"""

NEW_SENTENCE_DONE_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const src = document.querySelector("[data-testid='stMain'] h4");
  if (!src || src.innerText === a.oldSource) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
  if (charts.length === 0 || !charts.every(gd => drawn(gd) && fresh(gd)) || !loaded()) return false;
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
# A page can hold other than what was learned when what it shows depends on the sentence (a part drawn only for
# some sentences): then, once the run has finished, every chart it holds is drawn after the input and the page
# has not changed for QUIET_FRAMES frames, it is done when it last changed (window.__atlasOtherContent says so).
QUIET_FRAMES = 10
# The page's charts and tables, leftovers of the previous view (marked stale) left out; a table is drawn once its
# canvases have their size.
LIVE_JS = """
  const live = el => !el.closest("[data-stale='true']");
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].filter(live);
  const tables = [...document.querySelectorAll("[data-testid='stDataFrame']")].filter(live);
  const sized = t => {
    const c = [...t.querySelectorAll('canvas')];
    return c.length > 0 && c.every(x => x.width > 0 && x.height > 0);
  };
"""
ALL_REDRAWN_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) { window.__atlasStill = null; return false; }
""" + LIVE_JS + """
  const ready = charts.every(gd => drawn(gd) && fresh(gd) && gd._fullLayout && !gd._fullLayout._replotting)
                && tables.every(sized) && loaded();
  if (charts.length === a.charts && tables.length === a.tables) {
    if (!ready) return false;
    window.__atlasOtherContent = false;
    return performance.now() - window.__atlasT0;
  }
  const s = window.__atlasStill, now = performance.now();
  if (!ready || !s || s.changes !== window.__atlasChanges) {
    window.__atlasStill = {changes: window.__atlasChanges, since: now, frames: 0};
    return false;
  }
  if (++s.frames < """ + str(QUIET_FRAMES) + """) return false;
  window.__atlasOtherContent = {charts: charts.length, tables: tables.length};
  return s.since - window.__atlasT0;
}"""

# What the page holds once it has settled: the charts (all drawn) and tables (canvases sized), once the page
# has not changed for `quietMs` (Streamlit loads some element types, st.dataframe among them, on first use:
# a page can stay unchanged for a few frames while that code arrives), or null before.
PAGE_CONTENT_JS = """quietMs => {""" + LOADED_JS + """
  const now = performance.now(), q = window.__atlasSettle;
  if (!q || q.changes !== window.__atlasChanges) {
    window.__atlasSettle = {changes: window.__atlasChanges, since: now};
    return null;
  }
  if (now - q.since < quietMs) return null;
""" + LIVE_JS + """
  const drawn = gd => gd.querySelector('.main-svg') && gd._fullLayout && !gd._fullLayout._replotting;
  if (!charts.every(drawn) || !tables.every(sized) || !loaded()) return null;
  return {charts: charts.length, tables: tables.length};
}"""

# For error messages: what the page holds now.
PAGE_STATE_JS = """() => {""" + LIVE_JS + """
  return {runs: window.__atlasRuns, charts: charts.length, tables: tables.length, sized: tables.filter(sized).length,
          drawn_after_input: charts.filter(gd => (gd.__atlasPlotted || 0) > window.__atlasT0).length,
          idle: !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']"),
          exceptions: document.querySelectorAll("[data-testid='stException']").length};
}"""


# A first visit under Chromium's performance trace (bench_pages.py --profile): a mark at the press puts it on the
# trace's clock, which the network's websocket frames share; trace events by kind of work.
# "toplevel" records every task of the thread: React's scheduler runs its work in MessagePort tasks.
CATEGORIES = ["devtools.timeline", "blink.user_timing", "toplevel"]
PRESS_MARK_JS = "document.addEventListener('pointerdown', () => performance.mark('atlas-press'), true);"
KINDS = {"script": ("FunctionCall MessagePort::Accept EvaluateScript TimerFire FireAnimationFrame RunMicrotasks "
                    "EventDispatch MinorGC MajorGC FireIdleCallback XHRReadyStateChange XHRLoad ResourceReceivedData"),
         "style+layout": ("UpdateLayoutTree Document::UpdateStyleAndLayout LocalFrameView::UpdateStyleAndLayout "
                          "RecalculateStyles Layout UpdateLayer UpdateLayerTree HitTest ScheduleStyleRecalculation "
                          "InvalidateLayout IntersectionObserverController::computeIntersections "
                          "LocalFrameView::RunPostLifecycleSteps ResizeObserver::BroadcastObservations"),
         "paint": ("Paint PaintSetup PaintImage PrePaint Layerize Commit CompositeLayers ImageDecodeTask PaintLayer "
                   " RasterTask BeginMainThreadFrame Animation")}
KIND_OF = {name: kind for kind, names in KINDS.items() for name in names.split()}


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
        page.wait_for_function(NOTHING_LOADING_JS, polling="raf", timeout=120_000)
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


def change_layer_or_head(bs, page, key: str, value: int, layer: int, head: int, gen: int, before=None) -> float:
    """Pick `value` in the layer or head selectbox (`before`: see press); seconds until the head's chart shows it."""
    bs.widget(page, key).locator("input[role='combobox']").click()
    option = page.locator("[role='listbox'] [role='option']").get_by_text(str(value), exact=True)
    option.wait_for(state="visible")
    args = press(bs, page, option, gen, before, title=f"layer {layer}, head {head}", chart="head_fig")
    ms = page.wait_for_function(LAYER_HEAD_DONE_JS, arg=args, polling="raf", timeout=60_000).json_value()
    return ms / 1000


def press(bs, page, option, gen: int, before=None, **wait) -> dict:
    """Arm the clock, call before() if given (bench_server_cpu.py reads CPU there), click `option`; the wait's args."""
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), **wait}
    if before is not None:
        before()
    option.click()
    return args


def open_drawn(bs, browser, url: str, timeout: float = 120_000):
    """A new page of `browser` showing `url`, once its charts are drawn."""
    page = bs.new_page(browser, timeout=120_000)
    bs.open_app(page, url, timeout=timeout)
    bs.wait_charts(page, timeout=120_000)
    return page


def page_content(page, quiet_ms: float = 500, timeout: float = 120_000) -> dict:
    """Once the page has not changed for `quiet_ms`: {"charts": n, "tables": m} (every chart drawn, every table's
    canvas sized)."""
    page.evaluate("() => { window.__atlasSettle = null; }")
    return page.wait_for_function(PAGE_CONTENT_JS, arg=quiet_ms, polling="raf", timeout=timeout).json_value()


def views_of(bs, page) -> list[str]:
    """The options of the sidebar's "View" radio, in order."""
    return [t.strip() for t in bs.widget(page, "view").locator("[data-testid='stRadioOption']").all_inner_texts()]


def settle_view(bs, page, view: str) -> dict:
    """Switch to `view` without measuring; returns what the settled page holds (for page_switch's `expect`)."""
    bs.choose_view(page, view, timeout=120_000)
    return page_content(page)


def page_switch(bs, page, view: str, gen: int, expect: dict, before=None) -> float:
    """Click `view` in the sidebar's radio (`before`: see press); seconds until the run has finished and the page
    holds `expect` ({"charts": n, "tables": m}, from settle_view), every chart drawn after the click, tables sized."""
    option = bs.widget(page, "view").locator("[data-testid='stRadioOption']").get_by_text(view, exact=True)
    option.wait_for(state="visible")
    args = press(bs, page, option, gen, before, charts=expect["charts"], tables=expect["tables"])
    return _wait_all_redrawn(page, args, f"switching to {view}", timeout=120_000)


def _wait_all_redrawn(page, args: dict, what: str, timeout: float) -> float:
    """Seconds from the input to ALL_REDRAWN_JS's frame; on a timeout, says what the page held instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        seconds = page.wait_for_function(ALL_REDRAWN_JS, arg=args, polling="raf", timeout=timeout).json_value() / 1000
        other = page.evaluate("() => window.__atlasOtherContent")
        if other:
            print(f"note: {what}: the page held {other}, not the {args['charts']} chart(s) and {args['tables']} "
                  "table(s) learned; timed until it last changed", file=sys.stderr)
        return seconds
    except PlaywrightTimeout:
        state = page.evaluate(PAGE_STATE_JS)
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
    args = press(bs, page, options.get_by_text(label, exact=True), gen, before, charts=expect["charts"],
                 tables=expect["tables"])
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


def checkpoint_config(folder: Path) -> dict:
    """The checkpoint folder's config.json (layer and head counts for the layer/head walk)."""
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def main_thread(events: list[dict]) -> tuple[int, int]:
    """(pid, tid) of the busiest renderer main thread: the app's page."""
    busy = {(e["pid"], e["tid"]): 0 for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    for e in events:
        if e.get("ph") == "X" and (e["pid"], e["tid"]) in busy:
            busy[(e["pid"], e["tid"])] += e.get("dur", 0)
    return max(busy, key=busy.get)


def split(events: list[dict], t0: float, t1: float) -> dict:
    """Milliseconds of self time by kind on the main thread between t0 and t1 (trace microseconds)."""
    pid, tid = main_thread(events)
    xs = sorted((e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) == (pid, tid)
                 and e["ts"] < t1 and e["ts"] + e.get("dur", 0) > t0), key=lambda e: (e["ts"], -e.get("dur", 0)))
    out = {"script": 0.0, "style+layout": 0.0, "paint": 0.0, "other": 0.0}
    busy = forced = 0.0  # forced: style and layout that a script asked for (a box measured)
    stack: list[list] = []  # [start, end, kind, children's time]
    clip = lambda a, b: max(0.0, min(b, t1) - max(a, t0))  # noqa: E731 - the part of [a, b] inside [t0, t1]

    def close(item):
        start, end, kind, children = item
        out[kind] += max(0.0, clip(start, end) - children)
        if stack:
            stack[-1][3] += clip(start, end)

    for e in xs:
        start, end = e["ts"], e["ts"] + e.get("dur", 0)
        while stack and stack[-1][1] <= start:
            close(stack.pop())
        busy += 0.0 if stack else clip(start, end)
        name = e["name"]
        kind = KIND_OF.get(name) or ("script" if name.startswith(("v8.", "V8.", "BlinkGC", "GC")) else "other")
        forced += clip(start, end) if kind == "style+layout" and stack and stack[-1][2] == "script" else 0.0
        stack.append([start, end, kind, 0.0])
    while stack:
        close(stack.pop())
    return {k: v / 1000 for k, v in out.items()} | {"forced layout": forced / 1000, "idle": (t1 - t0 - busy) / 1000}


def traced_switch(bs, browser, page, view: str, gen: int, expect: dict, save: Path | None) -> dict:
    """One first visit of `view` under the trace: the walk's time, bytes in, the last frame, the main thread's split."""
    frames: list[tuple[float, int]] = []  # (network timestamp in s, bytes) of each websocket message received
    cdp = page.context.new_cdp_session(page)
    cdp.on("Network.webSocketFrameReceived",
           lambda e: frames.append((e["timestamp"], len(e["response"].get("payloadData", "")) * 3 // 4)))
    cdp.send("Network.enable")
    page.evaluate("() => performance.clearMarks()")
    browser.start_tracing(page=page, categories=CATEGORIES)
    try:
        total = page_switch(bs, page, view, gen=gen, expect=expect)
    finally:
        trace = json.loads(browser.stop_tracing())
        cdp.send("Network.disable")
        cdp.detach()
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    if save:  # for Perfetto or chrome://tracing
        save.mkdir(parents=True, exist_ok=True)
        (save / f"{time.strftime('%H%M%S')}_{view.replace(' ', '_')}.json").write_text(json.dumps(events))
    t0 = ([e["ts"] for e in events if e.get("name") == "atlas-press"] or [None])[-1]  # µs, the trace's clock
    if t0 is None:
        raise RuntimeError(f"{view}: the press is not in the trace")
    after = [(ts * 1e6 - t0, n) for ts, n in frames if ts * 1e6 >= t0]
    return {"total_ms": total * 1000, "last_frame_ms": after[-1][0] / 1000 if after else None,
            "kb_in": sum(n for _, n in after) / 1024, "frames": len(after)} | {
        f"{k}_ms": v for k, v in split(events, t0, t0 + total * 1e6).items()}
