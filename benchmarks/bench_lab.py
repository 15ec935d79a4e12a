"""How long does each part of the what-if lab take to draw in the browser, next to the Attention page?

    python benchmarks/bench_lab.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--rounds 5]
                                   [--limit 1.5] [--out benchmarks/results/lab.json]

One `streamlit run app.py` and one headless Chromium, in the same run on the same machine. Each round opens, in a
fresh page (a fresh session) through a link, with sentences no earlier visit used (so every trace, knockout,
patching, lens and contrast is computed, not taken from the server's caches):
  the Attention page (baseline): all its figures;
  the What if page with a pair of the same token count: the minimal pair (A beside B, B − A), the head
    knockout (grid, one head's bars) and the patching (heads, positions);
  the Decoding page at step 2: the logit lens, and why A and not B (source bars, heads).
A part's time runs from the navigation's start to the end of the first plot (plotly_afterplot) of the last of its
figures, in the page's own clock: what a user waits to see it, the computations of the parts drawn above it
included. The
Attention page's time is that of its last figure. Each part's median is compared with the Attention page's median
(limit: --limit times). The model is loaded by a warm-up visit first; one torch thread, as the app runs.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from app_walk import page_content
from bench_patch import corrupted
from common import ROOT, add_server_args, distinct_sentences, machine, open_translator, server_preflight, table

PARTS = {  # (view, part) -> the chart keys it draws
    ("Attention", "the whole page"): ("heads_fig", "head_fig", "overview_fig"),
    ("What if", "minimal pair"): ("pair_fig", "pair_diff_fig"),
    ("What if", "head knockout"): ("knockout_fig", "knockout_bars"),
    ("What if", "activation patching"): ("patch_heads_fig", "patch_pos_fig"),
    ("Decoding", "logit lens"): ("lens_fig",),
    ("Decoding", "why A and not B"): ("why_fig", "why_heads_fig"),
}
# Notes, on every chart div, when it finished its first plot (Plotly ends each Plotly.newPlot/react with
# gd.emit('plotly_afterplot'); a setter on the div prototype catches the chart's own `emit` as it is assigned, so
# the first plot is seen too), in the page's clock: ms since the navigation started.
FIRST_PLOT_JS = """() => {
  Object.defineProperty(HTMLDivElement.prototype, 'emit', {
    configurable: true,
    get() { return undefined; },
    set(fn) {
      const gd = this;
      Object.defineProperty(gd, 'emit', {configurable: true, writable: true, enumerable: true, value: function (name) {
        if (name === 'plotly_afterplot' && gd.__atlasFirst === undefined) gd.__atlasFirst = performance.now();
        return fn.apply(this, arguments);
      }});
    },
  });
}"""
PLOTTED_JS = """keys => Object.fromEntries(keys.map(k => {
  const gd = document.querySelector(`.st-key-${k} .js-plotly-plot`);
  return [k, gd && gd.__atlasFirst !== undefined ? gd.__atlasFirst : null];
}))"""


def pairs(translator, n: int) -> list[tuple[str, str]]:
    """n new (A, B) pairs: caption sentences and a one-word swap of each that keeps its number of tokens."""
    count = lambda s: len(translator.prepare(s).tokens)  # noqa: E731
    return [(a, corrupted(a, count)) for a in distinct_sentences(200)[50 : 50 + n]]


def visit(bs, chromium, url: str, keys: list[str]) -> dict[str, float]:
    """Open `url` in a fresh page; ms from the navigation's start to each chart's last plot."""
    page = bs.new_page(chromium, timeout=120_000)
    page.context.add_init_script(f"({FIRST_PLOT_JS})()")
    try:
        bs.open_app(page, url, timeout=120_000)
        page_content(page, quiet_ms=800)
        if page.locator(bs.EXCEPTION).count():
            raise RuntimeError(f"{url}: the app showed an exception")
        got = page.evaluate(PLOTTED_JS, keys)
    finally:
        page.context.close()
    missing = [k for k, v in got.items() if v is None]
    if missing:
        raise RuntimeError(f"{url}: charts not drawn: {missing}")
    return got


def measure(bs, chromium, server, work: list[tuple[str, str]], rounds: int) -> dict[tuple[str, str], list[float]]:
    """Each round: the Attention page, the What if page and the Decoding page, each with sentences of its own."""
    times: dict[tuple[str, str], list[float]] = {part: [] for part in PARTS}
    for r in range(rounds):
        (a1, _), (a2, b2), (a3, _) = work[3 * r : 3 * r + 3]
        links = {"Attention": server.link(view="Attention", text=a1, kind="cross", layer=2, head=1),
                 "What if": server.link(view="What if", text=a2, pair=b2, kind="cross", layer=2, head=1),
                 "Decoding": server.link(view="Decoding", text=a3, dec_step=2)}
        for view, url in links.items():
            parts = [p for p in PARTS if p[0] == view]
            got = visit(bs, chromium, url, [k for p in parts for k in PARTS[p]])
            for p in parts:
                times[p].append(max(got[k] for k in PARTS[p]) / 1000)
        print(f"round {r + 1}: " + ", ".join(f"{p[1]} {times[p][-1]:.2f} s" for p in PARTS), flush=True)
    return times


def summarise(times: dict, limit: float) -> tuple[dict, list[list]]:
    base = statistics.median(times[("Attention", "the whole page")])
    results, rows = {}, []
    for (view, part), seconds in times.items():
        median = statistics.median(seconds)
        ratio = median / base
        ok = view == "Attention" or ratio <= limit
        results[f"{view}: {part}"] = {"median_s": round(median, 3), "all_s": [round(s, 3) for s in seconds],
                                      "vs_attention": round(ratio, 3), "within_limit": ok}
        rows.append([view, part, median, ratio, "-" if view == "Attention" else ("ok" if ok else "MISSED")])
    return results, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--limit", type=float, default=1.5, help="a part may take this many times the Attention page")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "lab.json"))
    args = ap.parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    translator = open_translator(ckpt_dir / args.model, threads=1, draft=False)
    if translator is None:
        return 2
    work = pairs(translator, 3 * args.rounds + 1)
    from playwright.sync_api import sync_playwright

    server = bs.start_server(ckpt_dir, args.model, Path(tempfile.gettempdir()) / "atlas-bench-lab.log",
                             extra_env={"OMP_NUM_THREADS": "1", **env})
    try:
        with sync_playwright() as p:
            chromium = bs.launch_chromium(p)
            a, b = work.pop()
            visit(bs, chromium, server.link(view="What if", text=a, pair=b), list(PARTS[("What if", "minimal pair")]))
            times = measure(bs, chromium, server, work, args.rounds)
            chromium.close()
    finally:
        bs.stop_server(server)
    results, rows = summarise(times, args.limit)
    print(table([[v, p, m, f"{r:.2f}×", ok] for v, p, m, r, ok in rows],
                ["page", "part", "median s", "vs Attention", f"≤ {args.limit}×"]))
    info = machine()
    print(f"load average (1, 5, 15 min): {info.get('loadavg_1_5_15')}; {info['cpus']} CPUs")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    import json

    out.write_text(json.dumps({"model": args.model, "rounds": args.rounds, "limit": args.limit,
                               "checkpoint_dir": str(Path(args.checkpoint_dir).resolve().relative_to(ROOT))
                               if Path(args.checkpoint_dir).resolve().is_relative_to(ROOT) else args.checkpoint_dir,
                               "results": results, "machine": info}, indent=2, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out}")
    return 0 if all(r["within_limit"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
