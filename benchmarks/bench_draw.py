"""How long Chromium takes to draw the Attention page's figures, each alone, with plotly.js and nothing else.

    python benchmarks/bench_draw.py [--repeats 7] [--model multi30k-de-en] [--out draw]

For one sentence of the shipped model, every figure the Attention page shows (all heads of layer 1, one head,
every layer × head) for each attention kind and the Embeddings page's two large ones (the four stages, the
scaling), and the Attention page's three for an opus-mt-size model (6 layers × 8 heads, a 30-token sentence,
random attention), built by the app's own code (viz/) and sent as the app sends it (viz.transport.browser_json: the
median time to write it, its size). Each is drawn into a fresh div with Plotly.newPlot in headless Debian Chromium (the
flags of tests/browser_support.py, no GPU), timed until two animation frames later; the median of `--repeats`
draws after a warm-up. plotly.js is the copy that ships with the plotly Python package (its version is printed and
stored); Streamlit ships its own, so this measures the figures, not the page. Run it on two commits (a git
worktree) to compare them. Results: benchmarks/results/<out>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import plotly

from common import ROOT, machine, open_translator, summary, table, write_results

DRAW_JS = """async (f) => {
  const el = document.getElementById('g'); Plotly.purge(el);
  const t0 = performance.now(); await Plotly.newPlot(el, f.data, f.layout);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0; }"""

SENTENCE = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."


def random_probs(shape: tuple, seed: int = 0) -> np.ndarray:
    """Softmax rows of random scores, peaked as trained heads often are."""
    x = np.random.default_rng(seed).normal(scale=2.0, size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def attention_page(probs: np.ndarray, q_tokens, k_tokens, kind: str, mask) -> dict:
    """The Attention page's three figures for layer 1, head 1, as views/attention.py builds them."""
    from viz.attention import attention_figure, heads_figure, overview_figure
    from viz.layout import PAGE_WIDTH_PX

    return {
        "all heads of the layer": heads_figure(probs[0], q_tokens, k_tokens, kind, 0, mask=mask, zmax=None,
                                               width_px=PAGE_WIDTH_PX),
        "one head": attention_figure(probs[0, 0], q_tokens, k_tokens, kind, mask=mask, zmax=None,
                                     title="layer 1, head 1", width_px=PAGE_WIDTH_PX),
        "every layer × head": overview_figure(probs, kind, zmax=None),
    }


def main() -> int:
    from playwright.sync_api import sync_playwright

    from browser_support import launch_chromium
    from viz.transport import browser_json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--out", default="draw", help="results file name (benchmarks/results/<out>.json)")
    args = ap.parse_args()

    tr = open_translator(ROOT / "checkpoints" / args.model, threads=1)
    if tr is None:
        return 2
    trace = tr.trace(SENTENCE).trace
    cases = {}
    for kind in ("enc_self", "dec_self", "cross"):
        q, k = trace.axes(kind)
        figs = attention_page(trace.probs(kind), q, k, kind, trace.attn[kind][0]["mask"])
        cases.update({(f"{args.model}, {kind}", name): fig for name, fig in figs.items()})
    from viz.embeddings import embedding_stages_figure, scaling_figure

    emb, cfg = trace.src_embed, tr.cfg
    cases[(f"{args.model}, Embeddings (source)", "four stages")] = embedding_stages_figure(
        emb["token"], emb["scaled"], emb["positional"], emb["total"], trace.src_tokens)
    cases[(f"{args.model}, Embeddings (source)", "scaling")] = scaling_figure(emb["token"], emb["scaled"], cfg.d_model,
                                                                              trace.src_tokens)
    words = [f"w{i}" for i in range(30)]
    big = attention_page(random_probs((6, 8, 30, 30)), words, words, "cross", None)
    cases.update({("opus-mt size (6 × 8 heads, 30 tokens), cross", name): fig for name, fig in big.items()})

    plotly_js = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    page_html = ("<html><body><div id=g style='width:1100px'></div><script>"
                 + open(plotly_js, encoding="utf-8").read() + "</script></body></html>")
    results, rows = {}, []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_content(page_html)
        version = page.evaluate("() => Plotly.version")
        for (case, name), fig in cases.items():
            write = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                text = browser_json(fig, "bench")
                write.append(time.perf_counter() - t0)
            payload = json.loads(text)
            page.evaluate(DRAW_JS, payload)  # warm-up: plotly.js compiles its code paths once
            s = summary([page.evaluate(DRAW_JS, payload) / 1000 for _ in range(args.repeats)])
            w = summary(write)
            results[f"{case} · {name}"] = {**s, "traces": len(payload["data"]), "json_kb": len(text) // 1024,
                                           "write_json": w}
            rows.append([case, name, f"{s['median_ms']:.1f} ms", len(payload["data"]), f"{len(text) // 1024} KB",
                         f"{w['median_ms']:.1f} ms"])
        browser.close()
    print(f"plotly.js {version}, {args.repeats} draws each")
    print(table(rows, ["figures", "figure", "draw, median", "traces", "JSON", "JSON written in"]))
    path = write_results(args.out, {"machine": machine(), "repeats": args.repeats, "plotly_js": version,
                                    "sentence": SENTENCE, "results": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
