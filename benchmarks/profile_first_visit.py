"""Where a page's first visit goes: the server's run, the bytes sent, and Chromium's scripting, layout and paint.

    python benchmarks/profile_first_visit.py [--views Masks "Inside one head"] [--variants app floor] [--runs 1]
                                             [--app-root DIR] [--save-traces DIR] [--out NAME]

For each variant (the app, and the floor of bench_floor.py: benchmarks/floor_app.py) on a fresh server and
browser: every view once with the link's sentence (to learn what each holds), a new sentence typed on the
Attention view, then each chosen view once, its first visit for that sentence, under Chromium's performance
trace (devtools.timeline, with every task of the page: toplevel). Per first visit it reports
  total        the press to the frame where every chart is drawn (benchmarks/app_walk.py's clock)
  server done  the press to the last websocket frame of the run as the network received it (the server's part,
               with the transfer; frames are timed by Chromium's network stack, not the busy page)
  kB in        bytes of websocket frames the page received for it (the charts' JSON is most of it)
  script / style+layout / paint / other / idle
               milliseconds of the renderer's main thread in that window, by the self time of its trace events:
               scripting (JavaScript, its compilation and garbage collection), style recalculation and layout,
               paint / pre-paint / layerize / commit, the rest of busy time (a task's own bookkeeping), and time
               the thread was idle (no task at all); "of it forced": the style and layout a script forced by
               measuring a box (Plotly measures text that way), part of style+layout
and, for each variant, every chart of each view drawn alone: the JSON the browser gets for it (from an AppTest run
of the same script, the figures its server sends), its size, and Chromium's time to draw it with plotly.js alone
(Plotly.newPlot, as benchmarks/bench_draw.py draws). --draws-only skips the walks.
Writes benchmarks/results/profile_first_visit.json (--out NAME: NAME.json).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app_walk import INPUT_CLOCK_JS, new_sentence, page_switch, settle_view, views_of
from bench_floor import SKIP
from common import (
    ROOT,
    add_app_root_arg,
    add_server_args,
    app_script,
    checkout_name,
    distinct_sentences,
    machine,
    server_preflight,
    shown_path,
    table,
    write_results,
)

VARIANTS = {"app": "app.py", "floor": "benchmarks/floor_app.py"}
SAVE_TRACES: Path | None = None  # --save-traces DIR
# "toplevel" records every task of the thread: React's scheduler runs its work in MessagePort tasks, whose
# JavaScript devtools.timeline alone does not record (that time read as idle); the layouts they force are recorded.
CATEGORIES = "devtools.timeline,blink.user_timing,toplevel"

# A mark at the press puts it in the trace (the clock of the trace and of the network's websocket frames).
PRESS_MARK_JS = "document.addEventListener('pointerdown', () => performance.mark('atlas-press'), true);"

SCRIPT = {"FunctionCall", "MessagePort::Accept", "EvaluateScript", "v8.compile", "v8.compileModule",
          "v8.evaluateModule", "TimerFire",
          "FireAnimationFrame", "RunMicrotasks", "EventDispatch", "MinorGC", "MajorGC", "V8.GC_SCAVENGER",
          "v8.run", "v8.callFunction", "V8.Execute", "FireIdleCallback", "XHRReadyStateChange", "XHRLoad",
          "ResourceReceivedData", "v8.produceCache", "v8.parseOnBackground", "CpuProfiler::StartProfiling"}
LAYOUT = {"UpdateLayoutTree", "Document::UpdateStyleAndLayout", "LocalFrameView::UpdateStyleAndLayout",
          "Blink.ForcedStyleAndLayout.UpdateTime", "RecalculateStyles", "Layout", "UpdateLayer", "UpdateLayerTree",
          "HitTest",
          "ScheduleStyleRecalculation", "InvalidateLayout", "IntersectionObserverController::computeIntersections",
          "LocalFrameView::RunPostLifecycleSteps", "ResizeObserver::BroadcastObservations"}
PAINT = {"Paint", "PaintSetup", "PaintImage", "PrePaint", "Layerize", "Commit", "CompositeLayers", "Decode Image",
         "ImageDecodeTask", "UpdateLayer", "PaintLayer", "Draw LazyPixelRef", "RasterTask", "BeginMainThreadFrame",
         "Animation"}


def kind_of(name: str) -> str:
    if name in SCRIPT or name.startswith(("v8.", "V8.", "BlinkGC", "GC")):
        return "script"
    if name in LAYOUT:
        return "style+layout"
    if name in PAINT:
        return "paint"
    return "other"


def main_thread(events: list[dict]) -> tuple[int, int]:
    """(pid, tid) of the renderer main thread that was busiest: the app's page."""
    mains = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
             and e.get("args", {}).get("name") == "CrRendererMain"}
    busy = {m: 0 for m in mains}
    for e in events:
        if e.get("ph") == "X" and (e["pid"], e["tid"]) in busy:
            busy[(e["pid"], e["tid"])] += e.get("dur", 0)
    return max(busy, key=busy.get)


def split(events: list[dict], t0: float, t1: float) -> dict:
    """Milliseconds of self time by kind on the main thread between t0 and t1 (trace microseconds)."""
    pid, tid = main_thread(events)
    xs = sorted((e for e in events if e.get("ph") == "X" and e["pid"] == pid and e["tid"] == tid
                 and e["ts"] < t1 and e["ts"] + e.get("dur", 0) > t0), key=lambda e: (e["ts"], -e.get("dur", 0)))
    out = {"script": 0.0, "style+layout": 0.0, "paint": 0.0, "other": 0.0}
    busy = forced = 0.0  # forced: style and layout that a script asked for (a box measured), part of style+layout
    stack: list[list] = []  # [end, kind, child time]

    def close(item):
        start, end, kind, children = item
        own = max(0.0, min(end, t1) - max(start, t0)) - children
        out[kind] += max(0.0, own)
        if stack:
            stack[-1][3] += max(0.0, min(end, t1) - max(start, t0))

    for e in xs:
        start, end = e["ts"], e["ts"] + e.get("dur", 0)
        while stack and stack[-1][1] <= start:
            close(stack.pop())
        if not stack:
            busy += max(0.0, min(end, t1) - max(start, t0))
        kind = kind_of(e["name"])
        if kind == "style+layout" and stack and stack[-1][2] == "script":
            forced += max(0.0, min(end, t1) - max(start, t0))
        stack.append([start, end, kind, 0.0])
    while stack:
        close(stack.pop())
    out = {k: v / 1000 for k, v in out.items()}
    out["forced layout"] = forced / 1000
    out["idle"] = max(0.0, (t1 - t0) - busy) / 1000
    return out


def press_ts(events: list[dict]) -> float | None:
    marks = [e["ts"] for e in events if e.get("name") == "atlas-press"]
    return marks[-1] if marks else None


def traced_switch(bs, browser, page, view: str, gen: int, expect: dict, label: str = "") -> dict:
    """One first visit of `view` under the trace: the walk's time, the server's part, bytes in, main-thread split."""
    frames: list[tuple[float, int]] = []  # (network timestamp in s, bytes) of each websocket message received
    cdp = page.context.new_cdp_session(page)
    cdp.on("Network.webSocketFrameReceived",
           lambda e: frames.append((e["timestamp"], len(e["response"].get("payloadData", "")) * 3 // 4)))
    cdp.send("Network.enable")
    page.evaluate("() => performance.clearMarks()")
    browser.start_tracing(page=page, categories=CATEGORIES.split(","))
    try:
        total = page_switch(bs, page, view, gen=gen, expect=expect)
    finally:
        trace = json.loads(browser.stop_tracing())
        cdp.send("Network.disable")
        cdp.detach()
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    if SAVE_TRACES:  # for chrome://tracing or Perfetto
        SAVE_TRACES.mkdir(parents=True, exist_ok=True)
        (SAVE_TRACES / f"{label}{view.replace(' ', '_')}.json").write_text(json.dumps(events))
    t0 = press_ts(events)  # µs, the clock of the trace and of the network events
    if t0 is None:
        raise RuntimeError(f"{view}: the press is not in the trace")
    after = [(ts * 1e6 - t0, n) for ts, n in frames if ts * 1e6 >= t0]
    row = {"total_ms": total * 1000, "last_msg_ms": after[-1][0] / 1000 if after else None,
           "kb_in": sum(n for _, n in after) / 1024, "messages": len(after),
           "timeline": [[round(t / 1000, 1), n] for t, n in after]}
    row.update({f"{k}_ms": v for k, v in split(events, t0, t0 + total * 1e6).items()})
    return row


def profile_variant(bs, playwright, script: str, views: list[str], ckpt_dir: Path, model: str, env: dict,
                    sentences: tuple[str, str], log: Path) -> dict:
    """A fresh server and browser; learn every view, type a new sentence, then each view's traced first visit."""
    chromium = bs.launch_chromium(playwright)
    server = None
    try:
        page = bs.new_page(chromium, timeout=120_000)
        page.context.add_init_script(PRESS_MARK_JS)
        server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env, script=script)
        bs.open_app(page, server.link(view="Overview", text=sentences[0]), timeout=120_000)
        bs.wait_charts(page, timeout=120_000)
        page.evaluate(INPUT_CLOCK_JS)
        bs.widget(page, "view").locator("[data-testid='stRadioOption']").first.wait_for(timeout=60_000)
        all_views = [v for v in views_of(bs, page) if v not in SKIP]
        if not set(views) <= set(all_views):
            raise RuntimeError(f"{script}: the sidebar lists the views {all_views}, not all of {views}")
        expect = {v: settle_view(bs, page, v) for v in all_views[1:] + all_views[:1]}
        settle_view(bs, page, "Attention")
        new_sentence(bs, page, sentences[1], gen=1)
        time.sleep(1.0)  # let anything the new sentence started in the background finish, as a student's reading does
        rows = {}
        for i, view in enumerate(v for v in all_views if v != "Attention"):
            if view in views:
                rows[view] = traced_switch(bs, chromium, page, view, 10 + i, expect[view],
                                           f"{Path(script).stem}_{sentences[1][:12].replace(' ', '_')}_") | expect[view]
            else:
                page_switch(bs, page, view, gen=10 + i, expect=expect[view])
    finally:
        if server is not None:
            bs.stop_server(server)
        chromium.close()
    return rows


def page_figures(script: str, views: list[str], ckpt_dir: Path, model: str, sentence: str) -> dict:
    """Per view: each chart's name (its key, or its position) and the JSON the browser gets for it, from one
    AppTest run of `script` (the same figures its server sends)."""
    import os

    from streamlit.testing.v1 import AppTest

    os.environ["ATLAS_CHECKPOINT_DIR"], os.environ["ATLAS_DEFAULT_MODEL"] = str(ckpt_dir), model
    out = {}
    for view in views:
        at = AppTest.from_file(str(ROOT / script), default_timeout=120)
        at.query_params["view"], at.query_params["text"] = view, sentence
        at.run()
        out[view] = [(c.proto.id.rsplit("-", 1)[-1] if c.proto.id.count("-") > 1 else str(i), c.proto.spec)
                     for i, c in enumerate(at.get("plotly_chart"))]
    return out


DRAW_JS = """async (f) => {
  const el = document.getElementById('g'); Plotly.purge(el);
  const t0 = performance.now(); await Plotly.newPlot(el, f.data, f.layout);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0; }"""


def draw_times(figures: dict, repeats: int) -> dict:
    """Per view, per chart: its JSON's size and Chromium's time to draw it alone with plotly.js (Plotly.newPlot
    into a 1100 px div until two frames later; median of `repeats` after a warm-up), as bench_draw.py draws."""
    import os

    import plotly
    from playwright.sync_api import sync_playwright

    from browser_support import launch_chromium

    plotly_js = Path(os.path.dirname(plotly.__file__)) / "package_data" / "plotly.min.js"
    html = ("<html><body><div id=g style='width:1100px'></div><script>" + plotly_js.read_text(encoding="utf-8")
            + "</script></body></html>")
    out = {}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_content(html)
        for view, charts in figures.items():
            out[view] = []
            for name, spec in charts:
                fig = json.loads(spec)
                page.evaluate(DRAW_JS, fig)
                ms = statistics.median(page.evaluate(DRAW_JS, fig) for _ in range(repeats))
                out[view].append({"chart": name, "kb": len(spec) / 1024, "draw_ms": ms})
        browser.close()
    return out


def merged(runs: list[dict]) -> dict:
    """Per view, the median of each measure over runs."""
    out = {}
    for view in runs[0]:
        keys = [k for k, v in runs[0][view].items() if isinstance(v, (int, float))]
        out[view] = {k: statistics.median(r[view][k] for r in runs if r[view].get(k) is not None) for k in keys}
    return out


def walks(bs, views: list[str], variants: list[str], runs: int, ckpt_dir: Path, model: str, env: dict,
          sentences: list[str]) -> dict:
    """Per variant: the medians of each view's traced first visit over `runs`, and the message timelines."""
    from playwright.sync_api import sync_playwright

    results = {}
    with tempfile.TemporaryDirectory(prefix="profile_fv_") as tmp, sync_playwright() as p:
        for name in variants:
            pair = [(sentences[0], sentences[1 + 2 * i + (name == "app")]) for i in range(runs)]
            done = [profile_variant(bs, p, VARIANTS[name], views, ckpt_dir, model, env, pair[i],
                                    Path(tmp) / f"{name}{i}.log") for i in range(runs)]
            results[name] = merged(done)
            results[name + "_timelines"] = {v: [r[v]["timeline"] for r in done] for v in done[0]}
    return results


def report(views: list[str], results: dict, draws: dict) -> None:
    cols = ["total_ms", "last_msg_ms", "kb_in", "script_ms", "style+layout_ms", "forced layout_ms", "paint_ms",
            "other_ms", "idle_ms"]
    rows = [[view, name, int(res[view]["charts"])] + [f"{res[view].get(c, float('nan')):.0f}" for c in cols]
            for view in views for name, res in results.items() if not name.endswith("_timelines")]
    if rows:
        print(table(rows, ["view", "variant", "charts", "total ms", "server done ms", "kB in", "script",
                           "style+layout", "of it forced", "paint", "other", "idle"]))
    print("\nEach chart drawn alone with plotly.js (ms, median of --draws) and its JSON (kB):")
    for name, per_view in draws.items():
        for view, charts in per_view.items():
            print(f"{name:5} {view}: {sum(c['draw_ms'] for c in charts):.0f} ms in all; "
                  + ", ".join(f"{c['chart']} {c['draw_ms']:.0f} ms {c['kb']:.0f} kB" for c in charts))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--views", nargs="+", default=None, help="views to trace (default: every view but Attention)")
    ap.add_argument("--variants", nargs="+", default=["app", "floor"], choices=list(VARIANTS))
    ap.add_argument("--runs", type=int, default=1, help="runs of each variant (medians are reported)")
    ap.add_argument("--draws", type=int, default=5, help="draws of each chart alone (median)")
    ap.add_argument("--draws-only", action="store_true", help="only the charts drawn alone, no walks")
    ap.add_argument("--out", default="profile_first_visit", help="result file name under benchmarks/results/")
    ap.add_argument("--save-traces", type=Path, default=None, help="write each first visit's trace into this folder")
    add_app_root_arg(ap)
    args = ap.parse_args()
    global SAVE_TRACES
    SAVE_TRACES = args.save_traces
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    if args.app_root:
        VARIANTS["app"] = app_script(args)
        if VARIANTS["app"] is None:
            return 2
    from model.records import VIEWS

    views = args.views or [v for v in VIEWS if v != "Attention" and v not in SKIP]
    sentences = distinct_sentences(2 * args.runs + 1)
    results = {} if args.draws_only else walks(bs, views, args.variants, args.runs, ckpt_dir, args.model, env,
                                                sentences)
    draws = {name: draw_times(page_figures(VARIANTS[name], views, ckpt_dir, args.model, sentences[1]), args.draws)
             for name in args.variants} if args.draws > 0 else {}
    report(views, results, draws)
    path = write_results(args.out, {"benchmark": "profile_first_visit", "model": args.model, "runs": args.runs,
                                    "app": checkout_name(Path(args.app_root or ROOT)),
                                    "machine": machine(), "views": results, "figures": draws})
    print(f"\nwrote {shown_path(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
