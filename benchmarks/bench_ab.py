"""Two versions of the app side by side: the same actions, interleaved, on servers that run at the same time.

    python benchmarks/bench_ab.py --variants before=/tmp/wt_before after=. [again=.] [--repeats 12]
                                  [--actions switch:Masks switch:Embeddings sentence layer-head] [--results NAME]

bench_app.py and bench_floor.py run one version after the other, so a difference between two of their runs mixes the
change with the machine's drift over minutes (the floor's own first visits move by 0.1 s from one run to the next).
Here every variant (NAME=DIR: the app.py of the checkout DIR, e.g. an older commit in a git worktree) gets its own
server and its own tab in one Chromium, and each repeat does every action once on each variant, the variants' order
reversed every other repeat. A variant named twice (`after=. again=.`) is the control: what two copies of the same
code differ by is the spread a difference must beat. Before the actions, each server serves one session that is
closed again (as a cold start's), and the measured session visits every view once.

Actions, each timed in the page from the press to the frame where everything is drawn (benchmarks/app_walk.py):
  switch:VIEW  from the Overview to VIEW (a repeated visit: the server keeps the sentence's figures)
  sentence     a new sentence on the Attention view, one not seen before
  layer-head   the head, then the layer, of the Attention view's selectors (between 1 and 2)
Prints the median, mean and minimum per action and variant; writes benchmarks/results/ab.json (--results NAME).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app_walk import INPUT_CLOCK_JS, change_layer_or_head, new_sentence, page_switch, settle_view, views_of
from common import (
    ROOT,
    add_server_args,
    checkout_name,
    compile_checkout,
    distinct_sentences,
    machine,
    server_preflight,
    shown_path,
    table,
    write_results,
)

PAUSE_S = 0.3  # after each action: the server's prefetch and the browser's idle work settle before the next


def open_variant(bs, browser, script: str, ckpt_dir: Path, model: str, env: dict, log: Path):
    """(server, page): a server whose first session has come and gone, and a session that has seen every view."""
    server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env, script=script)
    first = bs.new_page(browser, timeout=120_000)
    bs.open_app(first, server.url, timeout=120_000)
    bs.wait_charts(first, timeout=120_000)
    first.context.close()
    page = bs.new_page(browser, timeout=120_000)
    bs.open_app(page, server.link(view="Overview"), timeout=120_000)
    bs.wait_charts(page, timeout=120_000)
    page.evaluate(INPUT_CLOCK_JS)
    expect = {view: settle_view(bs, page, view) for view in views_of(bs, page)[1:] + ["Overview"]}
    return server, page, expect


def act(bs, page, action: str, expect: dict, gen: int, sentence: str, step: int) -> float:
    """One timed action on a page that shows the Overview; it shows the Overview again afterwards."""
    if action.startswith("switch:"):
        view = action.split(":", 1)[1]
        seconds = page_switch(bs, page, view, gen=gen, expect=expect[view])
    else:
        settle_view(bs, page, "Attention")
        if action == "sentence":
            seconds = new_sentence(bs, page, sentence, gen=gen)
        else:
            layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
            key = "head" if step % 2 == 0 else "layer"  # between 1 and 2: a model of two layers and heads or more
            value = (head if key == "head" else layer) % 2 + 1
            layer, head = (layer, value) if key == "head" else (value, head)
            seconds = change_layer_or_head(bs, page, key, value, layer, head, gen=gen)
    time.sleep(PAUSE_S)
    settle_view(bs, page, "Overview")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--variants", nargs="+", required=True, help="NAME=DIR: the app.py of checkout DIR")
    ap.add_argument("--actions", nargs="+", default=["switch:Masks", "switch:Embeddings", "sentence", "layer-head"])
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--results", default="ab")
    args = ap.parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    variants, compiled = {}, {ROOT}  # server_preflight compiled this checkout
    for spec in args.variants:
        name, _, root = spec.partition("=")
        root = Path(root or ".").resolve()
        if not (root / "app.py").is_file():
            print(f"{spec}: no app.py at {root}", file=sys.stderr)
            return 2
        if not args.from_source and root not in compiled:
            if not compile_checkout(root):
                print(f"{spec}: compiling {root} failed (see above)", file=sys.stderr)
                return 2
            compiled.add(root)
        variants[name] = str(root / "app.py")
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(args.repeats + 1)
    seconds = {(name, a): [] for name in variants for a in args.actions}
    opened = {}
    with tempfile.TemporaryDirectory(prefix="bench_ab_") as tmp, sync_playwright() as p:
        browser = bs.launch_chromium(p)
        try:
            for name, script in variants.items():
                opened[name] = open_variant(bs, browser, script, ckpt_dir, args.model, env, Path(tmp) / f"{name}.log")
            gen = 100
            for i in range(args.repeats):
                order = list(variants) if i % 2 == 0 else list(variants)[::-1]
                for action in args.actions:
                    for name in order:
                        server, page, expect = opened[name]
                        page.bring_to_front()
                        gen += 10
                        seconds[(name, action)].append(act(bs, page, action, expect, gen, sentences[i], i))
                print(f"repeat {i + 1} of {args.repeats} done", flush=True)
        finally:
            for server, page, _ in opened.values():
                bs.stop_server(server)
            browser.close()
    rows = [[action, name, f"{statistics.median(s) * 1000:.0f}", f"{statistics.mean(s) * 1000:.0f}",
             f"{min(s) * 1000:.0f}", str(len(s))] for (name, action), s in seconds.items()]
    rows.sort(key=lambda r: (args.actions.index(r[0]), list(variants).index(r[1])))
    print()
    print(table(rows, ["action", "variant", "median ms", "mean ms", "min ms", "n"]))
    path = write_results(args.results, {"benchmark": "ab", "model": args.model, "machine": machine(),
                                        "variants": {n: checkout_name(Path(s).parent) for n, s in variants.items()},
                                        "actions": args.actions, "repeats": args.repeats,
                                        "seconds": {f"{n} | {a}": s for (n, a), s in seconds.items()}})
    print(f"\nwrote {shown_path(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
