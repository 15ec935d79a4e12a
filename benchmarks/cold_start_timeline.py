"""Where does a cold start's time go? A timeline of server start → first page drawn, in Chromium.

    python benchmarks/cold_start_timeline.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--runs 2]
                                             [--app-root DIR]

Starts `streamlit run app.py` (as bench_app.py's cold start does: Chromium already running, a fresh page) and
records, in seconds from the server's start: the health check answering, the page's DOMContentLoaded, the websocket
opening, the first run's last websocket frame, when Plotly's code (`PlotlyChart.*.js`) and the table's code
(`DataFrame.*.js`) arrived, the first run finished (as bench_app.py waits for it) and every chart drawn.
`--app-root` serves another checkout's app.py (e.g. an older commit in a git worktree) with this script's clock.
Prints one timeline per run and writes benchmarks/results/cold_start_timeline.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import ROOT, machine, write_results

sys.path.insert(0, str(ROOT / "tests"))


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
        for prefix, label in (("PlotlyChart.", "Plotly's code arrived"), ("DataFrame.", "the table's code arrived")):
            if name.startswith(prefix):
                events.setdefault(label, now())

    page.on("websocket", on_ws)
    page.on("requestfinished", on_script)
    page.on("domcontentloaded", lambda: events.setdefault("DOMContentLoaded", now()))
    server = bs.start_server(ckpt_dir, model, log, timeout=120)
    try:
        events["healthy"] = now()
        bs.open_app(page, server.url, timeout=120_000)
        events["first run finished"] = now()
        frames_then = list(frames)
        bs.wait_charts(page, timeout=120_000)
        events["every chart drawn"] = now()
        if frames_then:
            events["first run's last frame"] = frames_then[-1]
    finally:
        page.context.close()
        bs.stop_server(server)
    return {k: round(v - server.started, 3) for k, v in sorted(events.items(), key=lambda kv: kv[1])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--app-root", default=str(ROOT), help="the checkout whose `streamlit run app.py` is started")
    args = ap.parse_args()
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
                    print(f"  {s:6.2f} s  {name}")
        finally:
            chromium.close()
    path = write_results("cold_start_timeline", {
        "what": "cold start timeline: seconds from starting `streamlit run app.py` (Chromium already running)",
        "command": "python benchmarks/cold_start_timeline.py " + " ".join(sys.argv[1:]),
        "model": args.model, "app_root": args.app_root, "runs": runs, "machine": machine()})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
