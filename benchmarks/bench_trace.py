"""How long does the app's trace of one sentence take (greedy decoding, every step recorded), with and without the
model's int8 draft (model/inference/draft.py)?

    python benchmarks/bench_trace.py [--model multi30k-de-en] [--sentences 12] [--repeats 5]

The trace is most of a new sentence's server CPU. For the checkpoint (default: the shipped model), two Translators
are loaded: one never drafts, one with its draft built at once. Both trace the same `--sentences` generated German
sentences (benchmarks/common.py) and must give the same tokens (the draft only guesses; the float32 model checks
every guess); then each sentence is traced `--repeats` times by each, alternating, on one torch thread as the app
does. Reports the median and p10/p90 per trace, the draft's build time, and what `model.draft.worth_a_draft` says for
this model. Results: benchmarks/results/trace.json.
"""
from __future__ import annotations

import argparse
import sys
import time

from common import ROOT, distinct_sentences, machine, open_translator, summary, table, write_results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from model.inference.draft import MIN_GENERATOR_BYTES, build_draft, worth_a_draft

    unaided = open_translator(ROOT / "checkpoints" / args.model, threads=1, draft=False)
    if unaided is None:
        return 2
    drafted = open_translator(ROOT / "checkpoints" / args.model, threads=1, draft=False)
    t0 = time.perf_counter()
    drafted.draft = build_draft(drafted.model)  # what draft=True would build in the constructor, timed alone
    build_s = time.perf_counter() - t0
    if drafted.draft is None:
        print("this torch has no int8 engine: no draft to compare", file=sys.stderr)
        return 1
    sentences = distinct_sentences(args.sentences)
    for s in sentences:  # warm-up, and the draft must not change a token
        a, b = unaided.trace(s), drafted.trace(s)
        if a.raw_tokens != b.raw_tokens:
            print(f"drafted and unaided traces differ for {s!r}", file=sys.stderr)
            return 1
    times = {"unaided": [], "drafted": []}
    for _ in range(args.repeats):
        for s in sentences:
            for name, tr in (("unaided", unaided), ("drafted", drafted)):
                t0 = time.perf_counter()
                tr.trace(s)
                times[name].append(time.perf_counter() - t0)
    cfg = drafted.model.cfg
    generator_mb = cfg.d_model * cfg.tgt_vocab_size * 4 / 2**20
    res = {name: summary(v) for name, v in times.items()}
    rows = [[name, f"{r['median_ms']:.1f} ms", f"{r['p10_ms']:.1f}", f"{r['p90_ms']:.1f}", r["n"]]
            for name, r in res.items()]
    print(table(rows, ["trace", "median", "p10", "p90", "n"]))
    print(f"draft built in {build_s:.2f} s; float32 generator {generator_mb:.1f} MB; "
          f"worth_a_draft: {worth_a_draft(drafted.model)} (from {MIN_GENERATOR_BYTES / 2**20:g} MB)")
    path = write_results("trace", {"machine": machine(), "model": args.model, "sentences": sentences,
                                   "repeats": args.repeats, "torch_threads": 1, "draft_build_s": build_s,
                                   "generator_mb": generator_mb, "min_generator_mb": MIN_GENERATOR_BYTES / 2**20,
                                   "worth_a_draft": worth_a_draft(drafted.model), **res,
                                   "same_tokens": True})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
