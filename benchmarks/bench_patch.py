"""How long do the what-if lab's computations take for one sentence?

    python benchmarks/bench_patch.py [--checkpoint checkpoints/multi30k-de-en] [--length 15] [--repeats 3]
                                     [--threads 1] [--out FILE.json]

A German sentence of exactly --length source tokens, teacher-forced on its greedy translation with the end
token, and a corrupted twin with one word swapped (the same number of tokens). Times, median of --repeats after
one warm-up run, one torch thread as in the app: the head-knockout grid (model.patch.knockout), the patching
grids clean -> corrupted (model.patch.patching: every head, every encoder and decoder residual position) and one
logit-lens step (model.lens.logit_lens, the middle step). Prints the seconds and the load average; --out also
writes them as JSON.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import ROOT, machine, open_translator, sentence_of_length

TARGETS_S = {"knockout": 1.0, "patching": 2.0, "logit_lens": 0.05}
# Words that take the place of one word of the clean sentence: the first swap that keeps the token count wins.
SWAPS = ["Mann", "Hund", "Frau", "Kind", "Junge", "Katze", "Park", "Schnee", "roten", "blauen", "kleiner", "großer"]


def corrupted(text: str, count) -> str:
    """`text` with one word swapped for another of SWAPS, keeping count(text) tokens; a word of SWAPS first
    (a noun for a noun), then any word."""
    words = text.split()
    order = sorted(range(len(words)), key=lambda i: words[i].strip(".,") not in SWAPS)
    for i in order:
        word = words[i]
        for swap in SWAPS:
            if swap == word.strip(".,"):
                continue
            other = " ".join(words[:i] + [swap + word[len(word.rstrip(".,")):]] + words[i + 1 :])
            if count(other) == count(text):
                return other
    raise RuntimeError(f"no one-word swap of {text!r} keeps its token count")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--length", type=int, default=15, help="source tokens (default 15)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="also write the timings here as JSON")
    args = ap.parse_args()

    import torch

    from model.analysis.lens import logit_lens
    from model.analysis.patch import knockout, patching

    translator = open_translator(args.checkpoint, args.threads, draft=False)
    if translator is None:
        return 2
    count = lambda s: len(translator.prepare(s, max_tokens=10**6).tokens)  # noqa: E731
    clean = sentence_of_length(args.length, lambda s: translator.prepare(s, max_tokens=10**6).tokens)
    corrupt = corrupted(clean, count)
    out = translator.translate(clean)
    tgt = out.raw_tokens + [translator.tgt_vocab.token("eos")]
    step = len(tgt) // 2
    print(f"clean:   {clean!r}\ncorrupt: {corrupt!r}\n-> {' '.join(tgt)}\n{args.length} source tokens (+ end), "
          f"{len(tgt)} target tokens (the end token included); torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), median of {args.repeats} after 1 warm-up run")

    jobs = {
        "knockout": lambda: knockout(translator, clean, tgt),
        "patching": lambda: patching(translator, clean, corrupt, tgt),
        "logit_lens": lambda: logit_lens(translator, clean, tgt, step),
    }
    results = {}
    for name, job in jobs.items():
        job()
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            job()
            times.append(time.perf_counter() - t0)
        results[name] = {"median_s": statistics.median(times), "all_s": times, "target_s": TARGETS_S[name]}
        ok = "ok" if results[name]["median_s"] <= TARGETS_S[name] else "MISSED"
        print(f"{name:11s} {results[name]['median_s']:.4f} s  (target <= {TARGETS_S[name]} s: {ok}; "
              f"runs {', '.join(f'{t:.4f}' for t in times)})")
    info = machine()
    print(f"load average (1, 5, 15 min): {info.get('loadavg_1_5_15')}; {info['cpus']} CPUs")
    if args.out:
        import json
        from pathlib import Path

        Path(args.out).write_text(json.dumps({"clean": clean, "corrupt": corrupt, "tgt_tokens": tgt,
                                              "threads": args.threads, "results": results, "machine": info},
                                             indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
