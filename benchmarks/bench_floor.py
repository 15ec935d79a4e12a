"""First visits against a floor: the app's pages next to a bare Streamlit app that draws the same charts.

    python benchmarks/bench_floor.py [--walks 3] [--checkpoint-dir checkpoints] [--model multi30k-de-en]
                                     [--cold-only] [--app-root DIR] [--results NAME]

The floor (benchmarks/floor_app.py) has the app's sidebar and draws on every view three ordinary Plotly figures
of the app's sizes, built from nothing on every run. Walks alternate floor / app / floor / app …, each on a fresh
server and a freshly launched Chromium:
  cold start   browser launch + server start -> the Overview drawn (model load and first trace included): every
               chart drawn and no element still waiting for its code (Streamlit's grey skeleton)
  learn        every view once with the link's sentence, to learn how many charts and tables each one holds
  new sentence on the Attention view, type a sentence not seen before and press Ctrl+Enter: until every chart
               is drawn again for it
  first visit  then every other view once, in the sidebar's order: each one's first visit for that sentence
               (until the run has finished and the view holds its charts and tables, every chart drawn after
               the click)
The What if page is left out (--skip-views): its sentence B keeps the previous sentence, so what it holds after
a new sentence is not what the walk learned.
Times are measured in the page from the press to the frame where everything is drawn (benchmarks/app_walk.py).
Both apps start from compiled bytecode, as a server does after its first start (benchmarks/common.py's
compile_checkout; --from-source measures starts that compile the checkout's modules, which is every start where
PYTHONDONTWRITEBYTECODE is set and no bytecode was written).
Per measure it prints the median over the walks for the app and for the floor and their ratio; absolute times
vary between machines, the ratio measured in one run much less. Writes benchmarks/results/floor.json.
--cold-only stops each walk after its cold start (floor_cold.json): a cold start moves by ±0.5 s from walk to walk,
so telling two versions' cold starts apart takes more walks than a whole walk's time allows. --app-root serves
another checkout's app.py (an older commit in a git worktree) as the app, for a before / after in the same session.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app_walk import INPUT_CLOCK_JS, NOTHING_LOADING_JS, new_sentence, page_switch, settle_view, views_of
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

VARIANTS = {"floor": "benchmarks/floor_app.py", "app": "app.py"}
TARGETS = {"first_visit": 1.25, "new_sentence": 1.0, "cold_start": 1.2}  # app / floor, at most
# What if's sentence B starts as the sentence of the first visit and keeps it: after a new sentence the page shows a
# pair that differs, with more charts than the walk learned, so its first visits are not comparable.
SKIP = ("What if",)


def walk(bs, playwright, script: str, ckpt_dir: Path, model: str, env: dict, sentence: str, log: Path,
         skip: tuple[str, ...] = SKIP, cold_only: bool = False) -> dict:
    """One walk on a fresh server and browser: cold start, learn, new sentence, first visits (seconds)."""
    t0 = time.perf_counter()
    chromium = bs.launch_chromium(playwright)
    server = None
    try:
        page = bs.new_page(chromium, timeout=120_000)
        server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env, script=script)
        bs.open_app(page, server.link(view="Overview"), timeout=120_000)
        bs.wait_charts(page, timeout=120_000)
        page.wait_for_function(NOTHING_LOADING_JS, polling="raf", timeout=120_000)  # no element waits for its code
        cold = time.perf_counter() - t0
        if cold_only:
            return {"cold_start": cold, "exceptions": page.locator(bs.EXCEPTION).count()}
        page.evaluate(INPUT_CLOCK_JS)
        bs.widget(page, "view").locator("[data-testid='stRadioOption']").first.wait_for(timeout=60_000)
        views = [v for v in views_of(bs, page) if v not in skip]
        if len(views) < 2:
            raise RuntimeError(f"{script}: the sidebar lists the views {views}")
        expect = {view: settle_view(bs, page, view) for view in views[1:] + views[:1]}
        settle_view(bs, page, "Attention")
        sentence_s = new_sentence(bs, page, sentence, gen=1)
        first = {}
        for i, view in enumerate(v for v in views if v != "Attention"):
            first[view] = page_switch(bs, page, view, gen=10 + i, expect=expect[view])
        exceptions = page.locator(bs.EXCEPTION).count()
    finally:
        if server is not None:
            bs.stop_server(server)
        chromium.close()
    return {"cold_start": cold, "new_sentence": sentence_s, "first_visit": first, "exceptions": exceptions,
            "expect": expect}


def medians(walks: list[dict]) -> dict:
    """Median seconds per measure over walks: cold_start, new_sentence, first visit per view (those measured)."""
    out = {k: statistics.median(w[k] for w in walks) for k in ("cold_start", "new_sentence") if k in walks[0]}
    out["first_visit"] = {v: statistics.median(w["first_visit"][v] for w in walks)
                          for v in walks[0].get("first_visit", {})}
    return out


def report(app: dict, floor: dict) -> list[dict]:
    """One row per measure: app and floor medians, their ratio and the target."""
    rows = [{"measure": "cold start", "key": "cold_start", "app": app["cold_start"], "floor": floor["cold_start"]}]
    if "new_sentence" in app:
        rows.append({"measure": "new sentence (Attention)", "key": "new_sentence", "app": app["new_sentence"],
                     "floor": floor["new_sentence"]})
    rows += [{"measure": f"first visit: {v}", "key": "first_visit", "app": s, "floor": floor["first_visit"][v]}
             for v, s in app["first_visit"].items()]
    for r in rows:
        r["ratio"] = r["app"] / r["floor"]
        r["limit"] = TARGETS[r["key"]]
        r["meets"] = r["ratio"] <= r["limit"]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--walks", type=int, default=3, help="walks of each variant (alternating floor, app)")
    ap.add_argument("--skip-views", nargs="*", default=list(SKIP), help="views left out of the walk")
    ap.add_argument("--cold-only", action="store_true",
                    help="walk only as far as the cold start (more walks in the same time; the cold start varies "
                         "most); writes benchmarks/results/floor_cold.json")
    add_app_root_arg(ap)
    ap.add_argument("--results", default=None,
                    help="name of the results file in benchmarks/results/ (default: floor, or floor_cold)")
    args = ap.parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    variants = dict(VARIANTS)
    if args.app_root:
        variants["app"] = app_script(args)
        if variants["app"] is None:
            return 2
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(2 * args.walks)
    walks = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench_floor_") as tmp, sync_playwright() as p:
        for i in range(args.walks):
            for name, script in variants.items():
                w = walk(bs, p, script, ckpt_dir, args.model, env, sentences[2 * i + (name == "app")],
                         Path(tmp) / f"{name}{i}.log", tuple(args.skip_views), args.cold_only)
                walks[name].append(w)
                print(f"walk {i + 1} {name}: cold {w['cold_start']:.2f} s" + ("" if args.cold_only else
                      f", new sentence {w['new_sentence']:.2f} s, first visits "
                      + ", ".join(f"{v} {s:.2f}" for v, s in w["first_visit"].items())), flush=True)
    rows = report(medians(walks["app"]), medians(walks["floor"]))
    print()
    print(table([[r["measure"], f"{r['app']:.2f}", f"{r['floor']:.2f}", f"{r['ratio']:.2f}", f"<= {r['limit']}",
                  "ok" if r["meets"] else "MISSED"] for r in rows],
                ["measure (median of walks)", "app s", "floor s", "app/floor", "target", ""]))
    exceptions = sum(w["exceptions"] for ws in walks.values() for w in ws)
    if exceptions:
        print(f"\nWARNING: {exceptions} exception box(es) seen")
    path = write_results(args.results or ("floor_cold" if args.cold_only else "floor"),
                         {"benchmark": "floor", "model": args.model, "walks": args.walks, "machine": machine(),
                          "app": checkout_name(Path(args.app_root or ROOT)), "cold_only": args.cold_only,
                          "bytecode": "from source" if args.from_source else "compiled first",
                          "rows": rows, "runs": walks, "targets": TARGETS, "exceptions_seen": exceptions})
    print(f"\nwrote {shown_path(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
