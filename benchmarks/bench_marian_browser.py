"""How quickly does the app respond in a real browser with a model of opus-mt size?

    python benchmarks/bench_marian_browser.py [--repeats 10] [--page-cycles 2] [--max-len 20] [--torch-threads N]

Builds bench_marian.py's model (random weights in our checkpoint format, shaped like Helsinki-NLP/opus-mt-de-en:
6+6 layers, 8 heads, d_model 512, d_ff 2048, one shared vocabulary of 58,000 pieces, SentencePiece models trained
here) into a temporary folder, starts `streamlit run app.py` on it and drives Debian's Chromium with Playwright,
as bench_app.py does (the same waits, from app_walk.py):
  cold start   from starting the server process to the Attention view fully drawn in a fresh page (loading the
               296 MB folder and the first trace included); one server
  new sentence on the Attention view (cross-attention, layer 1, head 1), type a different sentence and press
               Ctrl+Enter: until the script run that follows has finished, the sentence line above the view
               shows the new sentence and every chart of the view has been drawn again; --repeats distinct
               sentences after one warm-up
  page switch  click a view in the sidebar's "View" radio: until the run has finished, the page holds as many
               charts and tables as that view has, every chart plotted after the click, every table sized;
               one warm-up cycle through every view, then --page-cycles rotations (the sentence stays the same)
Random weights never say </s>: every translation runs to the length limit, so the URL fixes it (--max-len 20,
the length bench_marian.py decodes; the app's automatic limit would be 2 × source pieces + 10). The sentences
are Multi30k-like captions of about 11 words, about 30 pieces under this piece model (counts in the results).
Target: new sentence ≤ 1.5 s median. Writes benchmarks/results/marian_browser.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from app_walk import INPUT_CLOCK_JS, new_sentence, page_switch, settle_view, view_cycles, views_of
from bench_marian import SIZE, VOCAB, build_folder
from common import ROOT, distinct_sentences, machine, summary, table, verdict, write_results

MODEL = "opus-mt-size"
TARGETS = {"new_sentence_median_s": 1.5}


def measure_sentences(bs, page, texts: list[str]) -> tuple[list[float], list[int]]:
    """Type each text on the Attention view: seconds and source pieces of each but the first (a warm-up)."""
    sentence_s, pieces = [], []
    for i, text in enumerate(texts):
        s = new_sentence(bs, page, text, gen=i + 1)
        pieces.append(len(page.locator(f"{bs.MAIN} h4").first.inner_text().split()) - 1)  # minus "FR"
        sentence_s.append(s)
    print(f"new sentence: {len(sentence_s) - 1} measured", flush=True)
    return sentence_s[1:], pieces[1:]  # the first is a warm-up


def measure_pages(bs, page, cycles: int) -> tuple[list[str], dict, list[float], list[str]]:
    """One warm-up cycle through every view, then `cycles` rotations of page switches (none if 0): the views,
    what each page holds, the seconds of each switch and the view it went to."""
    views = views_of(bs, page)
    start = bs.selected_view(page)
    expect, page_s, page_order = {}, [], []
    if cycles:
        for view in view_cycles(views, start, 1):  # warm-up: each page drawn once; what each holds
            expect[view] = settle_view(bs, page, view)
        page_order = view_cycles(views, start, cycles)
        for i, view in enumerate(page_order):
            page_s.append(page_switch(bs, page, view, gen=3000 + i, expect=expect[view]))
        print(f"page switch: {len(page_s)} measured", flush=True)
    return views, expect, page_s, page_order


def print_report(sent: dict, per_view: dict, cold: dict) -> str:
    """Print the table and the verdict on the target; returns the verdict."""
    def row(name, st):
        return [name, st["n"], st["median_ms"], st["p10_ms"], st["p90_ms"], st["min_ms"], st["max_ms"]]

    rows = [row("new sentence (Attention view)", sent)]
    rows += [row(f"page switch to {v} ({d['expect']['charts']} charts, {d['expect']['tables']} tables)", d)
             for v, d in per_view.items()]
    print()
    print(table(rows, ["measure", "n", "median ms", "p10", "p90", "min", "max"]))
    check = verdict(sent["median_ms"] / 1000, TARGETS["new_sentence_median_s"])
    print(f"\nnew sentence median {sent['median_ms'] / 1000:.2f} s: {check} (target ≤ "
          f"{TARGETS['new_sentence_median_s']:g} s); cold start {cold['total_s']:.1f} s")
    return check


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10, help="new sentences measured (after one warm-up)")
    ap.add_argument("--page-cycles", type=int, default=2, help="rotations through every view measured (0: none)")
    ap.add_argument("--max-len", type=int, default=20, help="output tokens per translation (the URL's max_len)")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch threads per request in the server (ATLAS_TORCH_THREADS; the app's default is 1)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import browser_support as bs

    missing = bs.chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    env = {"ATLAS_TORCH_THREADS": str(args.torch_threads)} if args.torch_threads else {}
    sentences = distinct_sentences(args.repeats + 1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-marian-browser-"))
    server = None
    try:
        t0 = time.perf_counter()
        build_folder(tmp / "root" / MODEL)
        build_s = time.perf_counter() - t0
        print(f"built the {VOCAB:,}-piece model in {build_s:.0f} s", flush=True)
        with sync_playwright() as p:
            chromium = bs.launch_chromium(p)  # launched first: the cold start is the server's, not the browser's
            try:
                page = bs.new_page(chromium, timeout=120_000)
                server = bs.start_server(tmp / "root", MODEL, tmp / "server.log", timeout=180, extra_env=env)
                healthy = time.perf_counter()
                bs.open_app(page, server.link(view="Attention", text=sentences[0], kind="cross", layer=1, head=1,
                                              max_len=args.max_len), timeout=300_000)
                errors = bs.alert_texts(page, "Error")
                if errors:
                    raise RuntimeError("the app shows an error: " + " | ".join(errors))
                charts = bs.wait_charts(page, timeout=120_000)
                cold = {"total_s": time.perf_counter() - server.started, "until_healthy_s": healthy - server.started}
                print(f"cold start: {cold['total_s']:.1f} s (healthy after {cold['until_healthy_s']:.1f} s), "
                      f"{charts} charts on the Attention view", flush=True)

                page.evaluate(INPUT_CLOCK_JS)
                sentence_s, pieces = measure_sentences(bs, page, sentences[1:])
                views, expect, page_s, page_order = measure_pages(bs, page, args.page_cycles)
                exceptions = page.locator(bs.EXCEPTION).count()
                page.context.close()
            finally:
                if server is not None:
                    bs.stop_server(server)
                chromium.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    sent = summary(sentence_s)
    per_view = {}
    for v in views if page_s else []:
        seconds = [s for s, w in zip(page_s, page_order) if w == v]
        per_view[v] = {"seconds": seconds, **summary(seconds), "expect": expect[v]}
    check = print_report(sent, per_view, cold)
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    path = write_results("marian_browser", {
        "benchmark": "marian_browser",
        "command": "python benchmarks/bench_marian_browser.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "what": "opus-mt-size model (random weights) served by `streamlit run app.py`, driven in Chromium",
        "model": {**SIZE, "vocabulary": VOCAB}, "max_len": args.max_len, "torch_threads": args.torch_threads or 1,
        "build_s": round(build_s, 1), "loadavg_before": load_before, "machine": machine(),
        "cold_start": cold,
        "new_sentence": {"seconds": sentence_s, "sentences": sentences[2:], "source_pieces": pieces, **sent},
        "page_switch": {"seconds": page_s, "to": page_order, "views": per_view},
        "exceptions_seen": exceptions, "targets": TARGETS, "verdict": {"new_sentence_median_s": check},
        "notes": "Interaction times measured in the page (bench_app.py's waits) from the key/pointer press to the "
                 "first frame with the run finished and every chart drawn again. Random weights never end a "
                 "translation, so every one is max_len tokens long.",
    })
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
