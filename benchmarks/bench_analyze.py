"""How long does the corpus head analysis (model/analysis/analyze.py) take on the Multi30k validation split?

    python benchmarks/bench_analyze.py [--checkpoint checkpoints/multi30k-de-en] [--threads N]
                                       [--batch-tokens N] [--pruning-limit N] [--ablation-limit N] [--write-report]

Runs model.analyze.analyze() with its defaults on the 1,014 validation sentences (never the test split) and
times its steps: the attention measures with the gradient head importance (one traced, gated forward and
backward per batch), the per-head ablation losses (one forward per switched-off head per batch) and the
pruning curve (41 greedy decodes of the first --pruning-limit sentences, scored with sacreBLEU).
Writes benchmarks/results/analyze.json; with --write-report also the report itself to
CHECKPOINT/head_report.json (what the app reads), so the numbers belong to the report shipped.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from common import ROOT, machine, table, verdict, write_results

TARGETS = {"measures_importance_s": 60.0, "ablation_plus_pruning_s": 300.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = all cores, as the CLI)")
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: model.analyze's")
    ap.add_argument("--pruning-limit", type=int, default=None, help="default: model.analyze's")
    ap.add_argument("--ablation-limit", type=int, default=0, help="0 = all sentences (the default)")
    ap.add_argument("--write-report", action="store_true", help="also write CHECKPOINT/head_report.json")
    args = ap.parse_args()

    import torch

    from model.analysis import analyze as A
    from model.analysis.experiments import find_data_dir
    from model.analysis.importance import DEFAULT_BATCH_TOKENS
    from model.analysis.pruning import DEFAULT_PRUNING_LIMIT
    from model.analysis.report import write_report
    from model.inference.translator import Translator
    from model.io.checkpoint import CheckpointError
    from model.training.data import DataError, find_file, read_parallel

    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    folder, looked = find_data_dir("val")
    if folder is None:
        print("Multi30k val split not found; looked in: " + ", ".join(map(str, looked)), file=sys.stderr)
        return 2
    try:
        translator = Translator.from_checkpoint(args.checkpoint)
        src_path, ref_path = find_file(folder, "val", "de"), find_file(folder, "val", "en")
        src, ref = read_parallel(src_path, ref_path)
    except (CheckpointError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    batch_tokens = args.batch_tokens or DEFAULT_BATCH_TOKENS
    pruning_limit = DEFAULT_PRUNING_LIMIT if args.pruning_limit is None else args.pruning_limit
    print(f"checkpoint {args.checkpoint}; {len(src)} sentences of {src_path.name}; torch {torch.__version__}, "
          f"{threads} threads; batch_tokens {batch_tokens}, pruning limit {pruning_limit or 'all'}, "
          f"ablation limit {args.ablation_limit or 'all'}", flush=True)
    before = machine()
    last = [0.0]

    def progress(fraction: float, message: str) -> None:  # a line every 10 %, so a long run shows it is alive
        if fraction >= last[0] + 0.1 or fraction >= 1.0:
            last[0] = fraction
            print(f"  {fraction:5.0%}  {message}", flush=True)

    t0 = time.perf_counter()
    report = A.analyze(translator, src, ref, progress=progress, batch_tokens=batch_tokens,
                       ablation_limit=args.ablation_limit, pruning_limit=pruning_limit,
                       name=os.path.basename(os.path.abspath(args.checkpoint)), src_path=str(src_path),
                       ref_path=str(ref_path))
    wall = time.perf_counter() - t0
    t = report["timings"]
    measures = t["measures_importance"]
    ab_pr = t.get("ablation", 0.0) + t.get("pruning", 0.0)
    tm, tap = TARGETS["measures_importance_s"], TARGETS["ablation_plus_pruning_s"]
    rows = [["measures + importance", measures, tm, verdict(measures, tm)],
            ["ablation (every head)", t.get("ablation", 0.0), "", ""],
            [f"pruning curve ({report['pruning']['sentences']} sentences)", t.get("pruning", 0.0), "", ""],
            ["ablation + pruning", ab_pr, tap, verdict(ab_pr, tap)],
            ["total (with preparation)", t["total"], "", ""]]
    print(table(rows, ["step", "seconds", "target s", "verdict"]))
    written = None
    if args.write_report:
        written = write_report(report, None, Path(args.checkpoint))
        print(f"wrote {written}")
    out = write_results("analyze", {
        "machine_before": before, "machine_after": machine(), "checkpoint": str(args.checkpoint),
        "sentences": report["corpus"]["sentences"], "target_tokens": report["corpus"]["tokens"]["tgt"],
        "settings": report["settings"], "pruning_sentences": report["pruning"]["sentences"],
        "timings_s": t, "wall_s": wall, "targets": TARGETS,
        "verdicts": {"measures_importance_s": verdict(measures, tm), "ablation_plus_pruning_s": verdict(ab_pr, tap)},
        "report_written": None if written is None else str(written),
        "pruning_summary": {"baseline_bleu": report["pruning"]["baseline_bleu"],
                            "heads_off_before_bleu_drop": report["pruning"]["heads_off_before_bleu_drop"]},
    })
    print(f"wrote {out}")
    print(json.dumps(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
