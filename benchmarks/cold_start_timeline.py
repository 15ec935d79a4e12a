"""Where does a cold start's time go? A timeline of server start → first page drawn, in Chromium.

    python benchmarks/cold_start_timeline.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--runs 2]
                                             [--app-root DIR]

Starts `streamlit run app.py` (as bench_app.py's cold start does: Chromium already running, a fresh page) and
records, in seconds from the server's start: the health check answering, the page's DOMContentLoaded, the websocket
opening, the sidebar's sentence box drawn, the first run's last websocket frame, when the code of Plotly's charts,
of st.table, st.metric, the download button and st.dataframe (`PlotlyChart.*.js`, `Table.*.js`, ...) arrived, the
first run finished (as bench_app.py waits for it), every chart drawn (with how many elements still showed
Streamlit's grey skeleton, waiting for their code, at that moment) and no element waiting for its code any more.
`--app-root` serves another checkout's app.py (e.g. an older commit in a git worktree) with this script's clock.
Like the other benchmarks it compiles the served checkout's bytecode first (`--from-source`: not).
Prints one timeline per run and writes benchmarks/results/cold_start_timeline.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app_walk import NOTHING_LOADING_JS, SKELETON
from common import ROOT, checkout_name, compile_checkout, machine, write_results

sys.path.insert(0, str(ROOT / "tests"))
CODE = (("PlotlyChart.", "Plotly's code arrived"), ("Table.", "the table's code arrived"),
        ("Metric.", "the metric's code arrived"), ("DownloadButton.", "the download button's code arrived"),
        ("DataFrame.", "st.dataframe's code arrived"))
# When the sidebar's sentence box first appears, on the page's clock (epoch milliseconds).
SIDEBAR_CLOCK_JS = """(() => {
  const seen = () => { if (!window.__atlasSidebarAt && document.querySelector("[data-testid='stSidebar'] textarea"))
    window.__atlasSidebarAt = performance.timeOrigin + performance.now(); };
  new MutationObserver(seen).observe(document, {subtree: true, childList: true});
})();"""


def one_run(bs, chromium, ckpt_dir: Path, model: str, log: Path) -> dict:
    page = bs.new_page(chromium, timeout=120_000)
    events: dict[str, float] = {}
    frames: list[float] = []
    now = time.perf_counter

    def on_ws(ws):
        events.setdefault("websocket open", now())
        ws.on("framereceived", lambda payload: frames.append(now()))

    def on_script(request):
        name = request.url.rsplit("/", 1)[-1]
        for prefix, label in CODE:
            if name.startswith(prefix):
                events.setdefault(label, now())

    page.on("websocket", on_ws)
    page.on("requestfinished", on_script)
    page.on("domcontentloaded", lambda: events.setdefault("DOMContentLoaded", now()))
    page.add_init_script(SIDEBAR_CLOCK_JS)
    server = bs.start_server(ckpt_dir, model, log, timeout=120)
    try:
        events["healthy"] = now()
        bs.open_app(page, server.url, timeout=120_000)
        events["first run finished"] = now()
        frames_then = list(frames)
        bs.wait_charts(page, timeout=120_000)
        events["every chart drawn"] = now()
        waiting = page.locator(SKELETON).count()
        page.wait_for_function(NOTHING_LOADING_JS, polling="raf", timeout=120_000)
        events["no element waiting for its code"] = now()
        sidebar_ms = page.evaluate("() => window.__atlasSidebarAt")
        if sidebar_ms:  # the page's epoch clock, onto this process's perf_counter
            events["the sidebar's sentence box drawn"] = now() - (time.time() - sidebar_ms / 1000)
        if frames_then:
            events["first run's last frame"] = frames_then[-1]
    finally:
        page.context.close()
        bs.stop_server(server)
    timeline = {k: round(v - server.started, 3) for k, v in sorted(events.items(), key=lambda kv: kv[1])}
    return {**timeline, "elements waiting for their code when every chart was drawn": waiting}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--app-root", default=str(ROOT), help="the checkout whose `streamlit run app.py` is started")
    ap.add_argument("--from-source", action="store_true", help="do not compile the checkout's bytecode first")
    args = ap.parse_args()
    if not args.from_source and not compile_checkout(Path(args.app_root).resolve()):
        print("compiling the checkout's Python files failed (see above)", file=sys.stderr)
        return 2
    import browser_support as bs

    bs.ROOT = Path(args.app_root).resolve()  # start_server runs `streamlit run app.py` there
    from playwright.sync_api import sync_playwright

    runs = []
    with sync_playwright() as p:
        chromium = bs.launch_chromium(p)
        try:
            for i in range(args.runs):
                t = one_run(bs, chromium, Path(args.checkpoint_dir), args.model, ROOT / "artifacts" / "cold_start.log")
                runs.append(t)
                print(f"run {i + 1}")
                for name, s in t.items():
                    print(f"  {s:6.2f} s  {name}" if isinstance(s, float) else f"  {s:6d}    {name}")
        finally:
            chromium.close()
    path = write_results("cold_start_timeline", {
        "what": "cold start timeline: seconds from starting `streamlit run app.py` (Chromium already running)",
        "command": "python benchmarks/cold_start_timeline.py " + " ".join(  # the served checkout by its commit
            checkout_name(Path(a)) if a == args.app_root else a for a in sys.argv[1:]),
        "model": args.model, "app_root": checkout_name(Path(args.app_root)), "runs": runs, "machine": machine()})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
