"""How long the server takes to build a page's figures and write them as the browser gets them.

    python benchmarks/bench_build.py [--repeats 30] [--model multi30k-de-en]

For one sentence of the shipped model, builds the figures of the Attention page (each attention kind, layer 1,
head 1), of Masks (the causal mask and the attention beside it) and of Inside one head (every step of the
pipeline), with the app's own code (viz/), each followed by viz.transport.browser_json (what views/figcache.py keeps
and sends). Reports the median milliseconds per page of `--repeats` builds after a warm-up, one thread. The figure
cache is not used: this is what a page costs the first time a sentence is seen. Run it on two commits (a git
worktree) to compare them. Results: benchmarks/results/build.json.
"""
from __future__ import annotations

import argparse
import sys
import time

from bench_draw import SENTENCE, attention_page
from common import ROOT, machine, open_translator, summary, table, write_results


def pages(trace) -> dict:
    """page name -> a function that builds that page's figures (a list)."""
    from viz.attention import attention_figure
    from viz.head import head_pipeline_figures
    from viz.masks import mask_figure

    out = {}
    for kind in ("enc_self", "dec_self", "cross"):
        q, k = trace.axes(kind)
        probs, mask = trace.probs(kind), trace.attn[kind][0]["mask"]
        out[f"Attention, {kind}"] = lambda q=q, k=k, p=probs, m=mask, kind=kind: list(
            attention_page(p, q, k, kind, m).values())
    rec = trace.attn["dec_self"][0]
    t = trace.tgt_tokens
    out["Masks, causal mask and attention"] = lambda: [
        mask_figure(rec["mask"], t, t, title="causal mask the model used", kind="dec_self", width_px=376),
        attention_figure(rec["probs"][0], t, t, "dec_self", mask=rec["mask"], title="with the mask", width_px=470)]
    a = trace.attn["cross"][0]
    q, k = trace.axes("cross")
    out["Inside one head, cross"] = lambda: list(head_pipeline_figures(
        a["q"][0], a["k"][0], a["v"][0], None, None, a["probs"][0], a["out"][0], q, k, "cross",
        scaled_scores=a["scores"][0]).values())
    return out


def main() -> int:
    from viz.transport import browser_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--model", default="multi30k-de-en")
    args = ap.parse_args()
    tr = open_translator(ROOT / "checkpoints" / args.model, threads=1)
    if tr is None:
        return 2
    trace = tr.trace(SENTENCE).trace
    results, rows = {}, []
    for name, build in pages(trace).items():
        def once():
            t0 = time.perf_counter()
            figs = build()
            for i, f in enumerate(figs):
                browser_json(f, f"r{i}")
            return time.perf_counter() - t0, len(figs)
        once()
        times = []
        for _ in range(args.repeats):
            seconds, n = once()
            times.append(seconds)
        results[name] = {"figures": n, **summary(times)}
        rows.append([name, n, results[name]["median_ms"], results[name]["p10_ms"], results[name]["p90_ms"]])
    print(table(rows, ["page", "figures", "median ms", "p10", "p90"]))
    path = write_results("build", {"benchmark": "build", "model": args.model, "sentence": SENTENCE,
                                   "repeats": args.repeats, "machine": machine(), "pages": results})
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
