"""How long does each part of the what-if lab take to draw in the browser, next to the Attention page?

    python benchmarks/bench_lab.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--rounds 5]
                                   [--limit 1.5] [--out benchmarks/results/lab.json]

One `streamlit run app.py` and one headless Chromium, in the same run on the same machine. Each round opens
pages in new tabs (fresh sessions; one browser context keeps Plotly's code cached, as a returning user's browser
does) through links, each with sentences no earlier visit used, so every trace, knockout, patching, lens and
contrast is computed, not taken from the server's caches:
  the Attention page (the baseline): all three of its figures;
  the What if page with a pair of the same token count: the minimal pair (A beside B, B − A) and the head
    knockout (grid, one head's bars); then, in the same tab, a click on "Run activation patching": the patching
    (heads, positions), which runs when asked for;
  the Decoding page at step 2: the logit lens, and why A and not B (source bars, heads);
  for the record, the What if page opened from a link that asks for patching (`lab_patch=1`): every part at once.
A part's time runs from the navigation's start (or the click) to the end of the first plot (plotly_afterplot) of
the last of its figures, in the page's own clock: what a user waits to see it, the computations of the parts drawn
above it included. The Attention page's time is that of its last figure. Each part's median is compared with the
Attention page's median (limit: --limit times; the last row is reported, not held to it). A warm-up round loads the
model and fills the browser's cache first; the server runs one torch thread per request, as the app does.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench_patch import corrupted
from common import (
    ROOT,
    add_server_args,
    distinct_sentences,
    machine,
    open_translator,
    server_preflight,
    shown_path,
    table,
)

PAGE_PARTS = {  # (view, part) -> the chart keys it draws, for the parts drawn when a page opens
    ("Attention", "the whole page"): ("heads_fig", "head_fig", "overview_fig"),
    ("What if", "minimal pair"): ("pair_fig", "pair_diff_fig"),
    ("What if", "head knockout"): ("knockout_fig", "knockout_bars"),
    ("Decoding", "logit lens"): ("lens_fig",),
    ("Decoding", "why A and not B"): ("why_fig", "why_heads_fig"),
}
PATCHING = ("patch_heads_fig", "patch_pos_fig")
CLICKED = ("What if", "activation patching (the switch clicked)")
FROM_LINK = ("What if", "every part, patching asked for in the link")
ROWS = list(PAGE_PARTS)[:3] + [CLICKED] + list(PAGE_PARTS)[3:] + [FROM_LINK]
# Notes, on every chart div, when it finished its first plot (Plotly ends each Plotly.newPlot/react with
# gd.emit('plotly_afterplot'); a setter on the div prototype catches the chart's own `emit` as it is assigned, so
# the first plot is seen too), and when the pointer was last pressed: both in the page's clock, ms since the
# navigation started.
CLOCK_JS = """() => {
  document.addEventListener('pointerdown', () => { window.__atlasPress = performance.now(); }, true);
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
# True once the script run has finished and every chart asked for has finished its first plot.
DRAWN_JS = """([keys, idle]) => !!document.querySelector(idle) && keys.every(k => {
  const gd = document.querySelector(`.st-key-${k} .js-plotly-plot`);
  return gd && gd.__atlasFirst !== undefined;
})"""


def pairs(translator, n: int) -> list[tuple[str, str]]:
    """n new (A, B) pairs: caption sentences and a one-word swap of each that keeps its number of tokens."""
    count = lambda s: len(translator.prepare(s).tokens)  # noqa: E731
    return [(a, corrupted(a, count)) for a in distinct_sentences(200)[50 : 50 + n]]


def browser_context(chromium):
    """One browser context for every visit: like a returning user's, it keeps Plotly's code in its cache, so a visit
    times the app, not the download of a 4.6 MB script."""
    context = chromium.new_context(viewport={"width": 1440, "height": 1000})
    from browser_js import RUN_COUNTER_JS  # beside browser_support, in tests/

    context.set_default_timeout(120_000)
    context.add_init_script(RUN_COUNTER_JS)
    context.add_init_script(f"({CLOCK_JS})()")
    return context


def drawn(bs, page, keys) -> dict[str, float]:
    """Once the run has finished and each chart of `keys` has plotted: ms from the navigation to its first plot."""
    page.wait_for_function(DRAWN_JS, arg=[list(keys), bs.IDLE], polling="raf", timeout=120_000)
    if page.locator(bs.EXCEPTION).count():
        raise RuntimeError(f"{page.url}: the app showed an exception")
    return page.evaluate(PLOTTED_JS, list(keys))


def what_if(bs, context, url: str) -> tuple[dict[str, float], float]:
    """The What if page from `url` (chart key -> ms to its first plot), then seconds from the click on "Run
    activation patching" to the patching figures' first plots."""
    page = context.new_page()
    try:
        bs.open_app(page, url, timeout=120_000)
        got = drawn(bs, page, [k for p in PAGE_PARTS if p[0] == "What if" for k in PAGE_PARTS[p]])
        switch = bs.widget(page, "lab_patch").locator("label")
        switch.scroll_into_view_if_needed()
        switch.click()
        patched = drawn(bs, page, PATCHING)
        return got, (max(patched.values()) - page.evaluate("() => window.__atlasPress")) / 1000
    finally:
        page.close()


def visit(bs, context, url: str, keys) -> dict[str, float]:
    """Open `url` in a new tab; chart key -> ms from the navigation's start to its first plot."""
    page = context.new_page()
    try:
        bs.open_app(page, url, timeout=120_000)
        return drawn(bs, page, keys)
    finally:
        page.close()


def measure(bs, context, server, work: list[tuple[str, str]], rounds: int,
            name: str = "round") -> dict[tuple[str, str], list[float]]:
    """Each round: the Attention, What if and Decoding pages, and What if from a link asking for patching, each
    with sentences of its own."""
    times: dict[tuple[str, str], list[float]] = {row: [] for row in ROWS}
    seconds = lambda got, keys: max(got[k] for k in keys) / 1000  # noqa: E731
    for r in range(rounds):
        (a1, _), (a2, b2), (a3, _), (a4, b4) = work[4 * r : 4 * r + 4]
        got = visit(bs, context, server.link(view="Attention", text=a1, kind="cross", layer=2, head=1),
                    PAGE_PARTS[("Attention", "the whole page")])
        times[("Attention", "the whole page")].append(seconds(got, got))
        got, clicked = what_if(bs, context, server.link(view="What if", text=a2, pair=b2, kind="cross", layer=2))
        for part in (("What if", "minimal pair"), ("What if", "head knockout")):
            times[part].append(seconds(got, PAGE_PARTS[part]))
        times[CLICKED].append(clicked)
        keys = [k for p in PAGE_PARTS if p[0] == "Decoding" for k in PAGE_PARTS[p]]
        got = visit(bs, context, server.link(view="Decoding", text=a3, dec_step=2, dec_lens=1, dec_why=1), keys)
        for part in (("Decoding", "logit lens"), ("Decoding", "why A and not B")):
            times[part].append(seconds(got, PAGE_PARTS[part]))
        keys = [k for p in PAGE_PARTS if p[0] == "What if" for k in PAGE_PARTS[p]] + list(PATCHING)
        got = visit(bs, context, server.link(view="What if", text=a4, pair=b4, kind="cross", layer=2, lab_patch=1),
                    keys)
        times[FROM_LINK].append(seconds(got, got))
        print(f"{name} {r + 1}: " + ", ".join(f"{p[1]} {times[p][-1]:.2f} s" for p in ROWS), flush=True)
    return times


def summarise(times: dict, limit: float) -> tuple[dict, list[list]]:
    base = statistics.median(times[ROWS[0]])
    results, rows = {}, []
    for (view, part), seconds in times.items():
        median = statistics.median(seconds)
        ratio = median / base
        held = view != "Attention" and (view, part) != FROM_LINK
        ok = not held or ratio <= limit
        results[f"{view}: {part}"] = {"median_s": round(median, 3), "all_s": [round(s, 3) for s in seconds],
                                      "vs_attention": round(ratio, 3), "held_to_limit": held, "within_limit": ok}
        rows.append([view, part, median, f"{ratio:.2f}×", ("ok" if ok else "MISSED") if held else "-"])
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
    work = pairs(translator, 4 * args.rounds + 4)
    from playwright.sync_api import sync_playwright

    server = bs.start_server(ckpt_dir, args.model, Path(tempfile.gettempdir()) / "atlas-bench-lab.log",
                             extra_env={"OMP_NUM_THREADS": "1", **env})
    try:
        with sync_playwright() as p:
            chromium = bs.launch_chromium(p)
            context = browser_context(chromium)
            measure(bs, context, server, work[:4], 1, "warm-up")  # loads the model, fills the browser's cache
            times = measure(bs, context, server, work[4:], args.rounds)
            chromium.close()
    finally:
        bs.stop_server(server)
    results, rows = summarise(times, args.limit)
    print(table(rows, ["page", "part", "median s", "vs Attention", f"≤ {args.limit}×"]))
    info = machine()
    print(f"load average (1, 5, 15 min): {info.get('loadavg_1_5_15')}; {info['cpus']} CPUs")
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "checkpoint_dir": shown_path(args.checkpoint_dir),
                               "rounds": args.rounds, "limit": args.limit, "results": results, "machine": info},
                              indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {shown_path(out)}")
    return 0 if all(r["within_limit"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
