"""How long does attribute() take for one sentence?

    python benchmarks/bench_attribution.py [--checkpoint checkpoints/multi30k-de-en] [--repeats 20] [--threads 1]

For a 20-token source sentence, teacher-forced on its greedy translation, it times
model.attribution.attribute() with the four default methods (rollout, relevance, input × gradient,
raw cross-attention) and each method alone; then the default methods on exactly 20 output tokens (the
first 20 of the greedy translation of a longer source sentence, forced), for the whole matrix and for one
row (`rows=`: the step the Decoding page shows; the middle one here). Median of --repeats after 2
warm-up runs, one torch thread as in the app. Writes benchmarks/results/attribution.json.
"""
from __future__ import annotations

import argparse
import sys
import time

from common import ROOT, machine, open_translator, sentence_of_length, summary, table, verdict, write_results

TARGET_MS = 1000.0  # "well under a second" for a 20-token sentence


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--length", type=int, default=20, help="source tokens (default 20)")
    args = ap.parse_args()

    import torch

    from model.analysis.attribution import DEFAULT_METHODS, METHODS, attribute

    translator = open_translator(args.checkpoint, args.threads)
    if translator is None:
        return 2
    text = sentence_of_length(args.length, lambda s: translator.prepare(s, max_tokens=10**6).tokens)
    tgt = translator.translate(text).raw_tokens
    print(f"{text!r}\n-> {' '.join(tgt)}\n{args.length} source tokens (+ <eos>), {len(tgt)} output tokens; "
          f"torch {torch.__version__}, {args.threads} thread(s), {args.repeats} repeats after 2 warm-up runs")

    def timed(methods, text=text, tgt=tgt, rows=None) -> dict:
        for _ in range(2):
            attribute(translator, text, tgt, methods, rows=rows)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            attribute(translator, text, tgt, methods, rows=rows)
            times.append(time.perf_counter() - t0)
        return summary(times)

    runs = {"default (" + ", ".join(DEFAULT_METHODS) + ")": timed(DEFAULT_METHODS)}
    for m in METHODS:
        runs[m] = timed((m,))
    # Exactly 20 output tokens: the shortest longer source whose greedy translation has at least 20.
    long_text, long_tgt = text, tgt
    for n in range(args.length + 1, 60):
        long_text = sentence_of_length(n, lambda s: translator.prepare(s, max_tokens=10**6).tokens)
        long_tgt = translator.translate(long_text).raw_tokens
        if len(long_tgt) >= 20:
            break
    long_tgt = long_tgt[:20]
    n_long = len(translator.prepare(long_text).tokens)
    runs[f"default, {len(long_tgt)} output tokens ({n_long}-token source, forced)"] = timed(
        DEFAULT_METHODS, long_text, long_tgt)
    runs[f"default, one row of those {len(long_tgt)} (the Decoding page's step)"] = timed(
        DEFAULT_METHODS, long_text, long_tgt, rows=[len(long_tgt) // 2])
    rows = [[name, s["median_ms"], s["p10_ms"], s["p90_ms"]] for name, s in runs.items()]
    print(table(rows, ["methods", "median ms", "p10", "p90"]))
    default = next(iter(runs.values()))
    print(f"\ndefault methods, median {default['median_ms']:.0f} ms (limit {TARGET_MS:.0f} ms): "
          f"{verdict(default['median_ms'], TARGET_MS)}")
    path = write_results("attribution", {
        "benchmark": "attribution", "checkpoint": args.checkpoint, "text": text, "source_tokens": args.length,
        "output_tokens": len(tgt), "torch": torch.__version__, "torch_threads": args.threads,
        "repeats": args.repeats, "warmup": 2, "machine": machine(), "runs": runs,
        "twenty_output_tokens": {"text": long_text, "target": long_tgt, "source_tokens": n_long},
        "target_default_median_ms": TARGET_MS, "verdict": verdict(default["median_ms"], TARGET_MS),
    })
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
