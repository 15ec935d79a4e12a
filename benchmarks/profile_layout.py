"""Who makes the browser lay the page out during a first visit: Chromium's JavaScript CPU profile of each one.

    python benchmarks/profile_layout.py [--views "Inside one head" Masks Embeddings] [--variant app|floor]
                                        [--out profile_layout]

Walks the app (or the floor of bench_floor.py) as bench_floor.py does on a fresh server and browser (every view
once with the link's sentence, a new sentence on Attention, then each view once) and records each chosen view's
first visit with Chromium's sampling profiler (CDP Profiler, one sample per 200 µs). A script that reads a size
(getBoundingClientRect) after the page changed makes the browser lay out the whole page there and then: the
profile charges that layout to getBoundingClientRect, so its samples, grouped by the four functions that called
it (file names of Streamlit's and plotly.js's bundles), say who forced each layout and what it cost. Per view it
prints the first visit's time (benchmarks/app_walk.py's clock; slower than bench_floor.py's, the profiler
running), the forced layouts' total and their callers. Writes benchmarks/results/NAME.json (--out).
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

from app_walk import INPUT_CLOCK_JS, new_sentence, page_switch, settle_view, views_of
from bench_floor import SKIP, VARIANTS
from common import ROOT, add_server_args, distinct_sentences, machine, server_preflight, write_results

SAMPLING_US = 200


def forced_layouts(profile: dict, depth: int = 4) -> collections.Counter:
    """Milliseconds sampled in getBoundingClientRect, by its chain of `depth` callers ("name@file:line < ...")."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children", ())}
    out = collections.Counter()
    for sample, delta_us in zip(profile["samples"], profile["timeDeltas"]):
        if nodes[sample]["callFrame"]["functionName"] != "getBoundingClientRect":
            continue
        chain, node = [], sample
        for _ in range(depth):
            node = parent.get(node)
            if node is None:
                break
            frame = nodes[node]["callFrame"]
            where = f"{frame['url'].split('/')[-1]}:{frame['lineNumber']}"
            chain.append(f"{frame['functionName'] or '(anonymous)'}@{where}")
        out[" < ".join(chain)] += delta_us / 1000
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--views", nargs="+", default=["Embeddings", "Inside one head", "Masks"])
    ap.add_argument("--variant", choices=list(VARIANTS), default="app")
    ap.add_argument("--out", default="profile_layout", help="result file name under benchmarks/results/")
    args = ap.parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    results = {}
    with tempfile.TemporaryDirectory(prefix="profile_layout_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)
        server = None
        try:
            page = bs.new_page(chromium, timeout=120_000)
            server = bs.start_server(ckpt_dir, args.model, Path(tmp) / "server.log", timeout=120, extra_env=env,
                                     script=VARIANTS[args.variant])
            bs.open_app(page, server.link(view="Overview"), timeout=120_000)
            bs.wait_charts(page, timeout=120_000)
            page.evaluate(INPUT_CLOCK_JS)
            bs.widget(page, "view").locator("[data-testid='stRadioOption']").first.wait_for(timeout=60_000)
            views = [v for v in views_of(bs, page) if v not in SKIP]
            expect = {view: settle_view(bs, page, view) for view in views[1:] + views[:1]}
            settle_view(bs, page, "Attention")
            new_sentence(bs, page, distinct_sentences(1)[0], gen=1)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": SAMPLING_US})
            for i, view in enumerate(v for v in views if v != "Attention"):
                if view in args.views:
                    cdp.send("Profiler.start")
                seconds = page_switch(bs, page, view, gen=10 + i, expect=expect[view])
                if view in args.views:
                    callers = forced_layouts(cdp.send("Profiler.stop")["profile"])
                    results[view] = {"first_visit_ms": seconds * 1000, "forced_layout_ms": sum(callers.values()),
                                     "callers_ms": dict(callers.most_common(12))}
        finally:
            if server is not None:
                bs.stop_server(server)
            chromium.close()
    for view, r in results.items():
        print(f"{args.variant} {view}: first visit {r['first_visit_ms']:.0f} ms, forced layouts "
              f"{r['forced_layout_ms']:.1f} ms")
        for chain, ms in r["callers_ms"].items():
            print(f"  {ms:6.1f} ms  {chain}")
    path = write_results(args.out, {"benchmark": "profile_layout", "variant": args.variant, "model": args.model,
                                    "sampling_us": SAMPLING_US, "machine": machine(), "views": results})
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
