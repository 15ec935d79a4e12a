"""How quickly does the app respond in a real browser?

    python benchmarks/bench_app.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--repeats 10]
                                   [--cold-repeats 3] [--mode normal|presenter|compare]

Starts `streamlit run app.py` on a free port and drives Debian's Chromium with Playwright:
  cold start   from starting the server process to the Overview page fully drawn in a fresh page
               (model load and the first trace included); --cold-repeats fresh servers
  new sentence on the Attention view, type a different sentence and press Ctrl+Enter: until the script
               run that follows has finished, the sentence line above the view shows the new sentence
               and every chart of the view has been drawn again
  layer/head   on the Attention view, pick another layer or head: until the run has finished and the
               single-head chart has been drawn again with the new "layer L, head H" title
  attention kind  on the Attention view, pick another attention kind (encoder self, decoder self, cross):
               until the run has finished and every chart of the view has been drawn again
  page switch  click a view in the sidebar's "View" radio: until the run has finished, the page has as many
               charts and tables as that view has, every chart has finished a plot (plotly_afterplot) after
               the click, and every st.dataframe's canvas has its size. --repeats cycles through all views, each cycle
               a rotation with another step (so every switch goes to a different view, from varying
               views), after one warm-up cycle; the sentence stays the same (each page was drawn once for it)
Interaction times are measured inside the page, from the key press or pointer press to the frame in
which everything is drawn; a chart counts as drawn once it has emitted plotly_afterplot after the press,
new charts included (their SVG appears before Plotly has finished, and Plotly may redraw for the margins).
--mode presenter measures the Attention view in presenter mode (one head large;
the sidebar is opened for the page switches), --mode compare side by side (two sentences, one head).
Writes benchmarks/results/app.json (app_presenter.json, app_compare.json).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from app_walk import (
    INPUT_CLOCK_JS,
    MODES,
    change_kind,
    change_layer_or_head,
    checkpoint_config,
    cold_start,
    new_sentence,
    open_sidebar,
    page_switch,
    settle_view,
    view_cycles,
    views_of,
)
from common import (
    ROOT,
    add_server_args,
    distinct_sentences,
    machine,
    server_preflight,
    shown_path,
    summary,
    table,
    verdict,
    write_results,
)

# The targets (medians) a classroom needs for the app to feel immediate; cold start = server start -> first
# page drawn.
TARGETS = {"cold_start_s": 4.0, "new_sentence_median_s": 0.5, "layer_head_median_s": 0.25,
           "page_switch_median_s": 0.5}

NOTES = ("Interaction times measured in the page from the key/pointer press to the first frame with the "
         "run finished and the charts drawn again. Cold starts after the first find the files in the OS cache. "
         "Page switches: one warm-up cycle through every view first (each page drawn once for the sentence), "
         "then rotations with varying steps; a switch is done when the page holds as many charts and "
         "tables as the warm-up found, every chart new or re-plotted after the click, every table's "
         "canvas sized.")


def walk_sentences(bs, page, sentences: list[str]) -> list[float]:
    """Type each sentence on the Attention view; seconds of all but the first (a warm-up)."""
    sentence_s = []
    for i, text in enumerate(sentences):
        s = new_sentence(bs, page, text, gen=i + 1)
        if i:  # the first is a warm-up
            sentence_s.append(s)
    print(f"new sentence: {len(sentence_s)} measured", flush=True)
    return sentence_s


def walk_layer_head(bs, page, cfg: dict, repeats: int, mode: str) -> tuple[list[float], list[str]]:
    """Change the head and the layer in turn, repeats + 1 times (the first a warm-up): seconds, and which changed."""
    layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the default kind is cross-attention
    layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
    switch_s, kinds = [], []
    for i in range(repeats + 1):
        if i % 2 == 0 or layers == 1:
            head = head % heads + 1
            key, value = "head", head
        else:
            layer = layer % layers + 1
            key, value = "layer", layer
        s = change_layer_or_head(bs, page, key, value, layer, head, gen=1000 + i, mode=mode)
        if i:
            switch_s.append(s)
            kinds.append(key)
    print(f"layer/head change: {len(switch_s)} measured", flush=True)
    return switch_s, kinds


def walk_kinds(bs, page, repeats: int) -> tuple[list[float], list[str]]:
    """Change the attention kind repeats + 1 times (the first a warm-up): seconds, and the kind picked."""
    kind_s, kind_to = [], []
    for i in range(repeats + 1):
        s, label = change_kind(bs, page, gen=2000 + i)
        if i:
            kind_s.append(s)
            kind_to.append(label)
    print(f"attention kind change: {len(kind_s)} measured", flush=True)
    return kind_s, kind_to


def walk_pages(bs, page, repeats: int, presenter: bool) -> dict:
    """One warm-up cycle through every view (what each page holds), then `repeats` rotations of page switches."""
    if presenter:
        open_sidebar(bs, page)
    views = views_of(bs, page)
    start = bs.selected_view(page)
    expect = {}
    for view in view_cycles(views, start, 1):  # warm-up: each page drawn once; what each page holds
        expect[view] = settle_view(bs, page, view)
    page_order = view_cycles(views, start, repeats, first_step=1)
    page_s, page_from, prev = [], [], start
    for i, view in enumerate(page_order):
        page_s.append(page_switch(bs, page, view, gen=3000 + i, expect=expect[view]))
        page_from.append(prev)
        prev = view
    print(f"page switch: {len(page_s)} measured", flush=True)
    return {"views": views, "expect": expect, "order": page_order, "seconds": page_s, "from": page_from}


def print_measures(cold, sent, sw, sw_head, sw_layer, kind, pages, per_view) -> None:
    def row(name, st):
        return [name, st["n"], st["median_ms"], st["p10_ms"], st["p90_ms"], st["min_ms"], st["max_ms"]]

    rows = [row("cold start (Popen -> Overview drawn)", cold), row("new sentence (Attention view)", sent),
            row("layer/head change (Attention view)", sw)]
    if sw_head:
        rows.append(row("  of which head", sw_head))
    if sw_layer:
        rows.append(row("  of which layer", sw_layer))
    rows.append(row("attention kind change (Attention view)", kind))
    rows.append(row("page switch, every view", pages))
    rows += [row(f"  to {v} ({d['expect']['charts']} charts, {d['expect']['tables']} tables)", d)
             for v, d in per_view.items()]
    print()
    print(table(rows, ["measure", "n", "median ms", "p10", "p90", "min", "max"]))


def target_checks(cold, sent, sw, kind, worst_view: str, worst: float) -> list[tuple]:
    """(target, measured, limit, verdict) per target; `worst` is the slowest view's median in seconds."""
    t = TARGETS
    return [
        ("cold start, median", f"{cold['median_ms'] / 1000:.2f} s", f"<= {t['cold_start_s']:g} s",
         verdict(cold["median_ms"] / 1000, t["cold_start_s"])),
        ("new sentence, median", f"{sent['median_ms'] / 1000:.2f} s", f"<= {t['new_sentence_median_s']:g} s",
         verdict(sent["median_ms"] / 1000, t["new_sentence_median_s"])),
        ("layer/head change, median", f"{sw['median_ms'] / 1000:.2f} s", f"<= {t['layer_head_median_s']:g} s",
         verdict(sw["median_ms"] / 1000, t["layer_head_median_s"])),
        ("attention kind change, median", f"{kind['median_ms'] / 1000:.2f} s",
         f"<= {t['layer_head_median_s']:g} s (as layer/head)",
         verdict(kind["median_ms"] / 1000, t["layer_head_median_s"])),
        ("page switch, median of every view", f"{worst:.2f} s (slowest: {worst_view})",
         f"<= {t['page_switch_median_s']:g} s", verdict(worst, t["page_switch_median_s"])),
    ]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--repeats", type=int, default=10,
                    help="new sentences, layer/head changes and attention-kind changes measured, and cycles "
                         "through every view")
    ap.add_argument("--cold-repeats", type=int, default=3, help="fresh servers started for the cold start")
    ap.add_argument("--mode", choices=list(MODES), default="normal",
                    help="the Attention view as is, in presenter mode, or side by side")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(args.repeats + 1)
    server = None
    with tempfile.TemporaryDirectory(prefix="bench_app_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)  # launched first: the cold start is the server's, not the browser's
        try:
            colds = []
            for i in range(args.cold_repeats):
                if server is not None:
                    bs.stop_server(server)
                cold, server = cold_start(bs, chromium, ckpt_dir, args.model, env, Path(tmp) / f"server{i}.log")
                colds.append(cold)
                print(f"cold start {i + 1}: {cold['total_s']:.2f} s (healthy after {cold['until_healthy_s']:.2f} s)",
                      flush=True)

            page = bs.new_page(chromium, timeout=120_000)
            bs.open_app(page, server.link(view="Attention", **MODES[args.mode][0]), timeout=120_000)
            bs.wait_charts(page, timeout=120_000)
            page.evaluate(INPUT_CLOCK_JS)
            sentence_s = walk_sentences(bs, page, sentences)
            cfg = checkpoint_config(ckpt_dir / args.model)
            switch_s, kinds = walk_layer_head(bs, page, cfg, args.repeats, args.mode)
            kind_s, kind_to = walk_kinds(bs, page, args.repeats)
            walk = walk_pages(bs, page, args.repeats, presenter=args.mode == "presenter")
            exceptions = page.locator(bs.EXCEPTION).count()
            page.context.close()
        finally:
            if server is not None:
                bs.stop_server(server)
            chromium.close()

    cold = summary([c["total_s"] for c in colds])
    sent = summary(sentence_s)
    sw = summary(switch_s)
    kind = summary(kind_s)
    sw_head = summary([s for s, k in zip(switch_s, kinds) if k == "head"]) if "head" in kinds else None
    sw_layer = summary([s for s, k in zip(switch_s, kinds) if k == "layer"]) if "layer" in kinds else None
    page_s, page_order = walk["seconds"], walk["order"]
    pages = summary(page_s)
    per_view = {v: {"seconds": [s for s, w in zip(page_s, page_order) if w == v]} for v in walk["views"]}
    for v, d in per_view.items():
        d.update(summary(d["seconds"]), expect=walk["expect"][v])

    print_measures(cold, sent, sw, sw_head, sw_layer, kind, pages, per_view)
    worst_view = max(per_view, key=lambda v: per_view[v]["median_ms"])
    worst = per_view[worst_view]["median_ms"] / 1000
    checks = target_checks(cold, sent, sw, kind, worst_view, worst)
    print()
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    path = write_results("app" if args.mode == "normal" else f"app_{args.mode}", {
        "benchmark": "app", "mode": args.mode, "checkpoint_dir": shown_path(ckpt_dir), "model": args.model,
        "repeats": args.repeats,
        "torch_threads": args.torch_threads or 1, "machine": machine(),
        "cold_start": {"runs": colds, **cold}, "new_sentence": {"seconds": sentence_s, **sent},
        "layer_head": {"seconds": switch_s, "changed": kinds, **sw, "head": sw_head, "layer": sw_layer},
        "attention_kind": {"seconds": kind_s, "to": kind_to, **kind},
        "page_switch": {"seconds": page_s, "to": page_order, "from": walk["from"], **pages, "views": per_view,
                        "slowest_view": worst_view, "slowest_view_median_ms": worst * 1000,
                        "sidebar_opened": args.mode == "presenter"},
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks],
        "notes": NOTES,
    })
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
