"""How much does per-sentence head importance change the ranking, and does the batching still matter?

    python benchmarks/compare_importance.py [--old-rev 0a74625] [--batching N] [--batch-tokens 3000 150]

1. For each shipped report (checkpoints/multi30k-de-en, checkpoints/multi30k-de-en-words): Spearman's rank
   correlation of the normalised importance of all heads between the report in git at --old-rev (by default the
   commit that wrote the per-batch |dL_batch/dxi| reports) and the report in the working tree; per kind too, the
   least and the most important heads, each ranking's Spearman with the measured ablation loss increase, and the
   pruning summary of both.
2. With --batching N (e.g. 120): the importance of the first N validation sentences computed with each
   --batch-tokens size, both ways, from the same per-sentence gate gradients: per batch (|sum of the batch's
   gradients|, the old way) and per sentence (sum of |gradient|, model.analyze's way); Spearman between the sizes;
   and the seconds of the gradient passes with (L, h) gates shared by a batch and with a gate per sentence.
Writes benchmarks/results/compare_importance.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from scipy.stats import spearmanr

from common import ROOT, table, write_results

MODELS = ("multi30k-de-en", "multi30k-de-en-words")
OLD_REV = "0a74625"  # the commit whose reports hold the per-batch importance


def flat(importance: dict) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """(heads, values) over every kind, layer and head of a {kind: [layer][head]} grid."""
    from model.records import KINDS

    heads = [(k, l, h) for k in KINDS for l, row in enumerate(importance[k]) for h in range(len(row))]
    return heads, np.array([importance[k][l][h] for k, l, h in heads], dtype=np.float64)


SHORT = {"enc_self": "encoder self", "dec_self": "decoder self", "cross": "cross"}


def name(head: tuple[str, int, int]) -> str:
    """'cross L2 H3' (1-based), as the app writes a head where space is tight."""
    kind, layer, h = head
    return f"{SHORT[kind]} L{layer + 1} H{h + 1}"


def compare_reports(rev: str) -> dict:
    from model.records import KINDS

    out = {}
    for model in MODELS:
        path = f"checkpoints/{model}/head_report.json"
        old = json.loads(subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                                        text=True).stdout)
        new = json.loads((ROOT / path).read_text(encoding="utf-8"))
        heads, a = flat(old["importance"]["normalised"])
        _, b = flat(new["importance"]["normalised"])
        per_kind = {}
        for k in KINDS:
            idx = [n for n, h in enumerate(heads) if h[0] == k]
            per_kind[k] = float(spearmanr(a[idx], b[idx]).statistic)
        order = lambda v: [name(heads[n]) for n in np.argsort(v, kind="stable")]  # noqa: E731
        ablation = {}  # how well the gradient importance ranks the measured loss increase of switching a head off
        for tag, rep, v in (("old", old, a), ("new", new, b)):
            if "ablation_loss_increase" in rep["kinds"]["cross"]["measures"]:
                loss = flat({k: rep["kinds"][k]["measures"]["ablation_loss_increase"] for k in KINDS})[1]
                ablation[tag] = float(spearmanr(v, loss).statistic)
        out[model] = {"spearman_all": float(spearmanr(a, b).statistic), "spearman_per_kind": per_kind,
                      "least_important_old": order(a)[:5], "least_important_new": order(b)[:5],
                      "most_important_old": order(a)[::-1][:3], "most_important_new": order(b)[::-1][:3],
                      "spearman_with_ablation_loss": ablation,
                      "pruning_old": (old.get("pruning") or {}).get("heads_off_before_bleu_drop"),
                      "pruning_new": (new.get("pruning") or {}).get("heads_off_before_bleu_drop"),
                      "old_note": old["importance"].get("note"), "new_note": new["importance"].get("note")}
    return out


def batching(n: int, sizes: list[int], checkpoint: str) -> dict:
    """Importance of the first n val sentences with each batch size, per batch and per sentence."""
    import torch

    from model.analysis import importance as A
    from model.analysis.experiments import find_data_dir
    from model.analysis.sentences import prepare
    from model.inference.translator import Translator
    from model.records import KINDS
    from model.training.data import find_file, read_parallel

    folder, looked = find_data_dir("val")
    if folder is None:
        raise SystemExit("Multi30k val split not found; looked in: " + ", ".join(map(str, looked)))
    tr = Translator.from_checkpoint(checkpoint)
    src, ref = read_parallel(find_file(folder, "val", "de"), find_file(folder, "val", "en"))
    examples, _ = prepare(tr, src[:n], ref[:n])
    results, seconds = {}, {"shared_gates": 0.0, "gate_per_sentence": 0.0}
    for size in sizes:
        per_batch = {k: 0.0 for k in KINDS}
        per_sentence = {k: 0.0 for k in KINDS}
        for batch in A.example_batches(examples, size):
            src_t, tgt_in, tgt_out = A.example_tensors(examples, batch, tr)
            gates = A.ones_head_mask(tr.cfg, batch=src_t.shape[0])  # (L, b, h): each sentence's own gradient
            t0 = time.perf_counter()  # the cost of per-sentence gates: the same pass with (L, h) gates, alternated
            A.head_mask_gradient(tr.model, src_t, tgt_in, tgt_out)
            t1 = time.perf_counter()
            _, grads, _ = A.head_mask_gradient(tr.model, src_t, tgt_in, tgt_out, gates)
            seconds["shared_gates"] += t1 - t0
            seconds["gate_per_sentence"] += time.perf_counter() - t1
            for k in KINDS:
                g = grads[k].double()
                per_batch[k] = per_batch[k] + g.sum(1).abs().numpy()
                per_sentence[k] = per_sentence[k] + g.abs().sum(1).numpy()
        results[size] = {way: A.normalise_importance(v) for way, v in
                         (("per_batch", per_batch), ("per_sentence", per_sentence))}
    out = {"sentences": len(examples), "checkpoint": checkpoint, "batch_tokens": sizes, "torch_threads":
           torch.get_num_threads(), "gradient_seconds": seconds}
    for way in ("per_batch", "per_sentence"):
        first = flat(results[sizes[0]][way])[1]
        out[way] = {f"spearman_{sizes[0]}_vs_{s}": float(spearmanr(first, flat(results[s][way])[1]).statistic)
                    for s in sizes[1:]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-rev", default=OLD_REV, help="git revision holding the old reports (default %(default)s)")
    ap.add_argument("--batching", type=int, default=0, help="also compare batch sizes on the first N val sentences")
    ap.add_argument("--batch-tokens", type=int, nargs="+", default=[3000, 150])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"), help="for --batching")
    args = ap.parse_args()

    result = {"old_rev": args.old_rev, "reports": compare_reports(args.old_rev)}
    def moved(r: dict) -> str:
        old, new = r["pruning_old"] or {}, r["pruning_new"] or {}
        return ", ".join(f"{g} {old.get(g)} -> {new.get(g)}" for g in ("enc_self", "dec_self", "cross", "all"))

    rows = [[m, f"{r['spearman_all']:.3f}", ", ".join(f"{k} {v:.2f}" for k, v in r["spearman_per_kind"].items()),
             moved(r)] for m, r in result["reports"].items()]
    print(table(rows, ["model", "Spearman old vs new (36 heads)", "per kind", "heads off before BLEU -1"]))
    for m, r in result["reports"].items():
        print(f"{m}: least important old {r['least_important_old']}, new {r['least_important_new']}; "
              f"most important old {r['most_important_old']}, new {r['most_important_new']}; Spearman with the "
              f"ablation loss increase {r['spearman_with_ablation_loss']}")
    if args.batching:
        b = batching(args.batching, args.batch_tokens, args.checkpoint)
        result["batching"] = b
        print(f"{b['sentences']} val sentences, batch tokens {b['batch_tokens']}: per batch {b['per_batch']}, "
              f"per sentence {b['per_sentence']}; gradient passes (s, {b['torch_threads']} threads): "
              f"{b['gradient_seconds']}")
    print(f"wrote {write_results('compare_importance', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
