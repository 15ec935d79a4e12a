"""How long Chromium takes to draw the Embeddings page's vocabulary map: the previous design against the current one.

    python benchmarks/bench_vocab_map.py [--repeats 7] [--model multi30k-de-en] [--big 58000] [--dots 0 300 1000]

Draws, with plotly.js in headless Debian Chromium (the flags of tests/browser_support.py, no GPU), each
figure into a fresh div and waits two animation frames:
  webgl-all   the previous design: one WebGL scatter of every vocabulary entry, named on hover
  density, N dots
              viz.embeddings.vocab_map_figure: every entry counted into a grey density, the first N entries
              as named dots (the page draws views/embeddings.py's VOCAB_DOTS), the sentence's words on top
for the shipped model's source vocabulary, and for a random `--big`-entry vocabulary (an opus-mt-size
one). First it times the map's projection on the server, the one a page's first visit for a model waits for:
viz.embeddings.pca_2d (the scatter matrix's eigenvectors) against the SVD of the centred table it replaced.
Results: benchmarks/results/vocab_map.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio

from common import ROOT, machine, open_translator, summary, table, write_results

DRAW_JS = """async (f) => {
  const el = document.getElementById('g'); Plotly.purge(el);
  const t0 = performance.now(); await Plotly.newPlot(el, f.data, f.layout);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0; }"""


def webgl_all(coords: np.ndarray, tokens: list[str], idx: list[int]) -> go.Figure:
    """The map as it was before: every entry a WebGL point with its word as hover text."""
    fig = go.Figure(go.Scattergl(x=coords[:, 0], y=coords[:, 1], mode="markers", text=tokens,
                                 marker=dict(size=4, color="rgba(120,120,120,0.25)"),
                                 hovertemplate="%{text}<extra></extra>"))
    fig.add_trace(go.Scatter(x=coords[idx, 0], y=coords[idx, 1], mode="markers+text",
                             text=[tokens[i] for i in idx], textposition="top center"))
    return fig.update_layout(height=600, template="plotly_white")


def svd_2d(matrix: np.ndarray) -> np.ndarray:
    """The projection as it was before: the SVD of the whole centred (V, d) table."""
    centred = np.asarray(matrix, dtype=np.float64) - np.mean(matrix, axis=0, dtype=np.float64)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return (centred @ vt[:2].T).astype(np.float32)


def projection_times(tables: dict, repeats: int) -> tuple[dict, list]:
    """Median ms of pca_2d and of the SVD on each (V, d) table, after one untimed call of each."""
    from viz.embeddings import pca_2d

    results, rows = {}, []
    for name, m in tables.items():
        for how, fn in (("svd (before)", svd_2d), ("pca_2d", pca_2d)):
            fn(m)
            ms = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn(m)
                ms.append((time.perf_counter() - t0) * 1000)
            results[f"{name} · {how}"] = summary([x / 1000 for x in ms])
            rows.append([name, how, f"{results[f'{name} · {how}']['median_ms']:.0f} ms"])
    return results, rows


def main() -> int:
    from playwright.sync_api import sync_playwright

    from browser_support import launch_chromium
    from viz.embeddings import pca_2d, vocab_map_figure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--big", type=int, default=58_000, help="entries of the random large vocabulary")
    ap.add_argument("--dots", type=int, nargs="+", default=[0, 300, 1000], help="named dots of the density designs")
    args = ap.parse_args()

    tr = open_translator(ROOT / "checkpoints" / args.model)
    if tr is None:
        return 2
    lut, itos = tr.embedding_matrix("src")
    ns = tr.n_specials
    rng = np.random.default_rng(0)
    big = rng.normal(size=(args.big, lut.shape[1])).astype(np.float32)
    projection, rows = projection_times({f"{args.model} ({len(itos) - ns:,} × {lut.shape[1]})": lut[ns:],
                                         f"random ({args.big:,} × {lut.shape[1]})": big}, args.repeats)
    print(table(rows, ["vocabulary table", "projection", "median"]))
    cases = {f"{args.model} ({len(itos) - ns:,} entries)": (pca_2d(lut[ns:]), list(itos[ns:]))}
    cases[f"random ({args.big:,} entries)"] = (rng.normal(size=(args.big, 2)).astype(np.float32),
                                               [f"▁w{i}" for i in range(args.big)])
    plotly_js = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    page_html = ("<html><body><div id=g style='width:1200px;height:600px'></div><script>"
                 + open(plotly_js, encoding="utf-8").read() + "</script></body></html>")

    results, rows = {}, []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_content(page_html)
        for name, (coords, tokens) in cases.items():
            idx = list(range(5, 60, 5))  # eleven "sentence" words
            figs = {"webgl-all": webgl_all(coords, tokens, idx)}
            figs |= {f"density, {n:,} dots": vocab_map_figure(coords, tokens, idx, n_dots=n) for n in args.dots}
            for design, fig in figs.items():
                payload = json.loads(pio.to_json(fig))
                page.evaluate(DRAW_JS, payload)  # warm-up: plotly.js compiles its code paths once
                ms = [page.evaluate(DRAW_JS, payload) for _ in range(args.repeats)]
                s = summary([m / 1000 for m in ms])
                results[f"{name} · {design}"] = {**s, "json_kb": len(pio.to_json(fig)) // 1024}
                rows.append([name, design, f"{s['median_ms']:.0f} ms", f"{len(pio.to_json(fig)) // 1024} KB"])
        browser.close()
    print(table(rows, ["vocabulary", "design", "draw, median", "figure JSON"]))
    path = write_results("vocab_map", {"machine": machine(), "repeats": args.repeats, "projection": projection,
                                       "results": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
