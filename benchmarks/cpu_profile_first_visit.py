"""Which code a page's first visit runs in Chromium: a sampling CPU profile of each chosen first visit.

    python benchmarks/cpu_profile_first_visit.py [--views "Inside one head" Masks] [--variants app floor]
                                                 [--runs 1] [--app-root DIR] [--out NAME]

Walks as profile_first_visit.py does (a fresh server and browser per run, every view learned, a new sentence, then
each view once), but records each chosen first visit with Chromium's sampling profiler (the DevTools Protocol's
Profiler, a sample every 100 µs) instead of its trace. Per first visit it reports
  busy            the press to the page drawn, less the samples in which the renderer was idle
  by file         time by script file, by the function running (Plotly's chart code, React, Streamlit's Markdown;
                  "(native)": the browser's own work, garbage collection and layouts included)
  forced layout   time inside getBoundingClientRect: each call lays the page out for a script that measures a box
  from            the call paths those calls came from (four frames, innermost first)
Medians over runs (the paths: their time summed over runs, divided by runs). The profiler slows the page down, so
compare its numbers with each other, not with bench_floor.py's. Writes benchmarks/results/cpu_profile_first_visit.json.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
from pathlib import Path

import profile_first_visit as pfv
from app_walk import page_switch
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
    write_results,
)

FORCED = "getBoundingClientRect"


def profiled_switch(bs, browser, page, view: str, gen: int, expect: dict, label: str = "") -> dict:
    """One first visit of `view` under Chromium's sampling profiler: the walk's time and the profile's summary."""
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 100})
        cdp.send("Profiler.start")
        total = page_switch(bs, page, view, gen=gen, expect=expect)
        profile = cdp.send("Profiler.stop")["profile"]
    finally:
        cdp.detach()
    return {"total_ms": total * 1000, "timeline": [], **summary(profile)}


def summary(profile: dict) -> dict:
    """Busy time, time by script file, time in getBoundingClientRect and where it was called from (ms)."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {child: n["id"] for n in profile["nodes"] for child in n.get("children", ())}
    spent = collections.Counter()  # node id -> µs of samples in it
    for node, delta in zip(profile["samples"], profile["timeDeltas"][1:] + [0]):
        spent[node] += delta
    by_file, paths = collections.Counter(), collections.Counter()
    idle = forced = 0.0
    for node, us in spent.items():
        frame = nodes[node]["callFrame"]
        if frame["functionName"] == "(idle)":
            idle += us
            continue
        by_file[frame["url"].rsplit("/", 1)[-1].split(".")[0] or "(native)"] += us
        if frame["functionName"] == FORCED:
            forced += us
            paths[" < ".join(_callers(node, nodes, parent, 4))] += us
    return {"busy_ms": (sum(spent.values()) - idle) / 1000, "forced_layout_ms": forced / 1000,
            "by_file_ms": {k: v / 1000 for k, v in by_file.most_common(8)},
            "forced_from_ms": {k: v / 1000 for k, v in paths.most_common(5)}}


def _callers(node: int, nodes: dict, parent: dict, depth: int) -> list[str]:
    out, at = [], parent.get(node)
    while at is not None and len(out) < depth:
        frame = nodes[at]["callFrame"]
        out.append(f"{frame['functionName'] or '(anonymous)'} ({frame['url'].rsplit('/', 1)[-1].split('.')[0]})")
        at = parent.get(at)
    return out


def merged(runs: list[dict]) -> dict:
    """Per view: the medians of the numbers over runs; by file and call paths averaged over runs."""
    out = {}
    for view in runs[0]:
        rows = [r[view] for r in runs]
        out[view] = {k: statistics.median(r[k] for r in rows) for k in ("total_ms", "busy_ms", "forced_layout_ms")}
        for key in ("by_file_ms", "forced_from_ms"):
            total = collections.Counter()
            for r in rows:
                total.update(r[key])
            out[view][key] = {k: v / len(rows) for k, v in total.most_common(8)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--views", nargs="+", default=["Inside one head", "Embeddings", "Masks"])
    ap.add_argument("--variants", nargs="+", default=["app", "floor"], choices=list(pfv.VARIANTS))
    ap.add_argument("--runs", type=int, default=1, help="runs of each variant (medians are reported)")
    add_app_root_arg(ap)
    ap.add_argument("--out", default="cpu_profile_first_visit", help="result file name under benchmarks/results/")
    args = ap.parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    if args.app_root:
        pfv.VARIANTS["app"] = app_script(args)
        if pfv.VARIANTS["app"] is None:
            return 2
    from playwright.sync_api import sync_playwright

    pfv.traced_switch = profiled_switch  # the walk of profile_first_visit.py, each first visit profiled instead
    results = {}
    sentences = distinct_sentences(2 * args.runs + 1)
    with tempfile.TemporaryDirectory(prefix="cpu_profile_fv_") as tmp, sync_playwright() as p:
        for name in args.variants:
            runs = [pfv.profile_variant(bs, p, pfv.VARIANTS[name], args.views, ckpt_dir, args.model, env,
                                        (sentences[0], sentences[1 + 2 * i + (name == "app")]),
                                        Path(tmp) / f"{name}{i}.log") for i in range(args.runs)]
            results[name] = merged(runs)
    for name, per_view in results.items():
        for view, row in per_view.items():
            print(f"\n{name} · {view}: {row['total_ms']:.0f} ms, busy {row['busy_ms']:.0f} ms, forced layout "
                  f"{row['forced_layout_ms']:.0f} ms")
            print("  by file: " + ", ".join(f"{k} {v:.0f}" for k, v in row["by_file_ms"].items()))
            for path, ms in row["forced_from_ms"].items():
                print(f"  {ms:5.1f} ms from {path}")
    path = write_results(args.out, {"benchmark": "cpu_profile_first_visit", "model": args.model, "runs": args.runs,
                                    "app": checkout_name(Path(args.app_root or ROOT)), "machine": machine(),
                                    "views": results})
    print(f"\nwrote {shown_path(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
