"""Corpus head analysis: what every attention head does on a whole test set, teacher-forced on the references.

    python -m model.analyze [--checkpoint DIR] [--src F] [--ref F] [--limit N] [--out FILE.json]
                            [--batch-tokens N] [--ablation-limit N] [--pruning-limit N] [--threads N]
                            [--no-ablation] [--no-pruning]

Without --src/--ref the Multi30k validation split is used (model.experiments.find_data_dir("val")).
The report (schema "attention-atlas-head-report/1") goes to DIR/head_report.json, or, when the checkpoint folder
is not writable, to $XDG_CACHE_HOME/attention-atlas/<checkpoint name>/head_report.json (XDG_CACHE_HOME defaults
to ~/.cache); the path written is printed.

For every attention kind (enc_self, dec_self, cross), layer and head, over every real (non-pad) query of the corpus:
confidence and entropy (Voita et al. 2019; Clark et al. 2019), mean attention distance (Vig & Belinkov 2019),
previous/same/next-token weight and argmax offsets (positional heads), weight on <eos>/<bos>/final punctuation
(sinks), rare-word heads (Voita), agreement and monotonicity of cross-attention argmax alignments, gradient head
importance (Michel et al. 2019), the loss increase when one head is switched off, documented role labels and a
pruning curve (greedy BLEU with the least important heads switched off). Every definition is written into the
report ("definitions"), with the thresholds the roles use.

Sums and counts are accumulated batch by batch; no attention matrix outlives its batch.
Shape letters: see model/__init__.py (b batch, L layers, h heads, i queries, j keys, s source, t target).

Several processes share the work under torchrun, on one machine or several (model/training/distributed.py joins
them: gloo on CPUs, NCCL where there are GPUs; the report itself runs on the CPUs). Each rank measures every
world-th batch and decodes every world-th chunk of the pruning curve (model/analysis/sharded.py); rank 0 writes the
report one process writes, and alone prints:

    torchrun --nproc_per_node 4 -m model.analyze [--src F --ref F --out FILE.json ...]
    torchrun --nnodes 2 --node_rank K --nproc_per_node 4 --rdzv_endpoint HOST:PORT -m model.analyze ...

The second line runs on each machine, K = 0 on the one whose HOST:PORT the others reach, 1 on the other; every
machine must see the checkpoint and the corpus files at the same paths. --threads defaults to a machine's cores
divided among its ranks. NCCL wants a GPU of its own per rank: for more ranks than GPUs, hide them
(CUDA_VISIBLE_DEVICES=) and the ranks join by gloo.
"""
# This module is the driver and the command line (its docstring is --help). The steps live beside it:
# sentences.py (each pair's ids, final punctuation and rarest word), measures.py (HeadStats, role labels),
# importance.py (the gated corpus pass), pruning.py (ablation and the pruning curve), report.py (the schema,
# the definitions, reading and writing), sharded.py (the same on several processes).
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from model.analysis.align import add_alignment
from model.analysis.importance import DEFAULT_BATCH_TOKENS, importance_order, measures_and_importance
from model.analysis.measures import THRESHOLDS, head_roles
from model.analysis.pruning import DEFAULT_PRUNING_LIMIT, ablation_losses, pruning_curve
from model.analysis.report import DEFINITIONS, REPORT_NAME, SCHEMA, corpus_file_name, rounded, write_report
from model.analysis.sentences import Example, prepare
from model.analysis.sharded import ShardedTranslator, sharded_ablation_losses, sharded_measures_and_importance
from model.io.cli import Refused, add_common_options, load_translator, run, set_threads
from model.records import KINDS
from model.training.distributed import Ranks


class _Progress:
    """Maps each stage's own progress onto 0..1 for the caller's progress(fraction, message)."""

    def __init__(self, callback, weights: dict[str, float]):
        self.callback, self.done = callback, 0.0
        total = sum(weights.values()) or 1.0
        self.weights = {k: w / total for k, w in weights.items()}
        self.stage, self.base = None, 0.0

    def start(self, stage: str) -> None:
        if self.stage is not None:
            self.base += self.weights.get(self.stage, 0.0)
        self.stage = stage
        self.update(0.0, stage)

    def update(self, within: float, message: str) -> None:
        if self.callback is not None:
            self.callback(min(1.0, self.base + self.weights.get(self.stage, 0.0) * min(max(within, 0.0), 1.0)), message)


def analyze(
    translator,
    src_texts: Sequence[str],
    ref_texts: Sequence[str],
    *,
    ablation: bool = True,
    pruning: bool = True,
    progress: Callable[[float, str], object] | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ablation_limit: int | None = None,
    pruning_limit: int | None = DEFAULT_PRUNING_LIMIT,
    name: str = "",
    src_path: str | None = None,
    ref_path: str | None = None,
    ranks: Ranks | None = None,
) -> dict:
    """The head report (a dict in the schema SCHEMA) of `translator` on the sentence pairs.

    `progress(fraction, message)` is called as the work goes on (fraction 0..1). `ablation_limit` /
    `pruning_limit` use only the first N sentences for those steps (None or 0: all). Uses the torch
    threads the caller set. Floats keep DIGITS significant figures. With `ranks` of several processes
    (distributed.setup()), every rank must call this: each works on its share and all return the same report.
    """
    ranks = ranks or Ranks()
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    t0 = time.perf_counter()
    examples, skipped = prepare(translator, src_texts, ref_texts)
    if not examples:
        raise ValueError("no sentence pair with words on both sides to analyse")
    timings["prepare"] = time.perf_counter() - t0
    n_tgt_tok = sum(len(e.tgt_ids) + 1 for e in examples)  # predicted tokens: the reference and <eos>
    abl_n = len(examples) if not ablation_limit else min(ablation_limit, len(examples))
    pr_n = len(src_texts) if not pruning_limit else min(pruning_limit, len(src_texts))
    # Relative costs for the progress fraction, in seconds per sentence measured on the shipped model.
    prog = _Progress(progress, {"measures": 0.005 * len(examples), "ablation": 0.05 * abl_n if ablation else 0.0,
                                # with the ablation, the pruning curve is decoded in a second order too
                                "pruning": 0.25 * pr_n * (2 if ablation else 1) if pruning else 0.0})

    # --- 1. one traced, gated forward + backward per batch: every attention measure and the gate gradients
    results, importance_raw, importance, total_nll = _measures(translator, examples, len(src_texts), n_tgt_tok,
                                                               batch_tokens, prog, timings, ranks)
    # --- 2. ablation: one plain forward per head switched off, batched sentences; decoder heads reuse the memory
    ablation_section = None
    if ablation:
        ablation_section = _ablation(translator, examples[:abl_n], batch_tokens, results, prog, timings, ranks)
    # --- word alignment on the annotated pairs (German-English models): cross heads' AER, which names the aligners
    t0 = time.perf_counter()
    alignment = add_alignment(results, translator)
    timings["alignment"] = time.perf_counter() - t0
    _add_roles(results, translator.cfg)  # they need no pruning
    # --- 3. pruning curve: greedy BLEU with the least important heads off
    pruning_section = _pruning(translator, src_texts[:pr_n], ref_texts[:pr_n], importance, ablation_section,
                               pruning_limit, prog, timings, ranks) if pruning else None
    timings["total"] = time.perf_counter() - t_all
    prog.update(1.0, "done")
    report = {
        "schema": SCHEMA,
        "checkpoint": name,
        "config": translator.cfg.to_dict(),
        "corpus": _corpus_section(src_texts, ref_texts, src_path, ref_path, examples, skipped, total_nll, results),
        "settings": {"batch_tokens": batch_tokens, "ablation": ablation, "pruning": pruning,
                     "ablation_limit": ablation_limit or None, "pruning_limit": pruning_limit or None,
                     "torch_threads": torch.get_num_threads(), "ranks": ranks.world, "torch": torch.__version__},
        "definitions": DEFINITIONS,
        "thresholds": THRESHOLDS,
        "kinds": {k: {"layers": translator.cfg.kind_layers[k], "heads": translator.cfg.n_heads, **results[k]}
                  for k in KINDS},
        "importance": _importance_section(importance_raw, importance, n_tgt_tok),
        "ablation": ablation_section,
        "pruning": pruning_section,
        "alignment": alignment,
        "timings": timings,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return rounded(report)


def _pruning(translator, src_texts: Sequence[str], ref_texts: Sequence[str], importance, ablation_section,
             pruning_limit: int | None, prog: _Progress, timings: dict[str, float], ranks: Ranks) -> dict:
    """The pruning curve on these pairs (the first `pruning_limit`), ordered by the ablation where there is one."""
    prog.start("pruning")
    t0 = time.perf_counter()
    decoder = ShardedTranslator(translator, ranks) if ranks.world > 1 else translator
    section = pruning_curve(decoder, list(src_texts), list(ref_texts), importance, lambda f, msg: prog.update(f, msg),
                            loss_increase=ablation_section["loss_increase"] if ablation_section else None)
    section["limit"] = pruning_limit or None
    timings["pruning"] = time.perf_counter() - t0
    return section


def _measures(translator, examples: list[Example], n_lines: int, n_tgt_tok: int, batch_tokens: int, prog: _Progress,
              timings: dict[str, float], ranks: Ranks) -> tuple:
    """The corpus pass of measures_and_importance, on this rank's share when there are several."""
    prog.start("measures")
    t0 = time.perf_counter()
    if ranks.world > 1:
        out = sharded_measures_and_importance(translator, examples, n_lines, n_tgt_tok, batch_tokens, ranks,
                                              prog.update)
    else:
        out = measures_and_importance(translator, examples, n_lines, n_tgt_tok, batch_tokens, prog.update)
    timings["measures_importance"] = time.perf_counter() - t0
    return out


def _ablation(translator, examples: list[Example], batch_tokens: int, results: dict, prog: _Progress,
              timings: dict[str, float], ranks: Ranks) -> dict:
    """Every head switched off alone: its loss increase joins results[kind]["measures"]; the report's section."""
    prog.start("ablation")
    t0 = time.perf_counter()
    cfg = translator.cfg
    n_layers = cfg.kind_layers
    all_heads = [(k, l, hh) for k in KINDS for l in range(n_layers[k]) for hh in range(cfg.n_heads)]
    step = lambda f: prog.update(f, f"ablation: {len(all_heads)} heads, one at a time")  # noqa: E731
    if ranks.world > 1:
        base, off = sharded_ablation_losses(translator, examples, all_heads, batch_tokens, ranks, step)
    else:
        base, off = ablation_losses(translator, examples, all_heads, batch_tokens, step)
    tokens = sum(len(e.tgt_ids) + 1 for e in examples)
    delta = {k: np.zeros((n_layers[k], cfg.n_heads)) for k in KINDS}
    for (kind, l, hh), v in off.items():
        delta[kind][l, hh] = (v - base) / tokens
    for k in KINDS:
        results[k]["measures"]["ablation_loss_increase"] = delta[k]
    timings["ablation"] = time.perf_counter() - t0
    return {"sentences": len(examples), "tokens": tokens, "baseline_loss": base / tokens, "loss_increase": delta}


def _add_roles(results: dict, cfg) -> None:
    """results[kind]["roles"]: per layer and head, the role labels of its measures (head_roles)."""
    n_layers = cfg.kind_layers
    for k in KINDS:
        m = results[k]["measures"]
        chance = results[k].get("chance", {}).get("rare_share")
        results[k]["roles"] = [[head_roles({name: float(v[l, hh]) for name, v in m.items()}, k, None, chance)
                                for hh in range(cfg.n_heads)] for l in range(n_layers[k])]


def _corpus_section(src_texts: Sequence[str], ref_texts: Sequence[str], src_path: str | None, ref_path: str | None,
                    examples: list[Example], skipped: list[int], total_nll: float, results: dict) -> dict:
    """The report's "corpus": the files (folder and name only), counts, and the top sentences' text."""
    n_src_tok = sum(len(e.src_ids) for e in examples)
    n_tgt_tok = sum(len(e.tgt_ids) + 1 for e in examples)
    # The top sentences' text goes into the report, so that a reader (the app's Heads page) needs no data folder.
    top_ids = sorted({i for k in KINDS for layer in results[k].get("top_sentences", {}).get("ids", [])
                      for head in layer for i in head})
    texts = {str(i): {"src": src_texts[i], "ref": ref_texts[i]} for i in top_ids}
    return {"src": corpus_file_name(src_path), "ref": corpus_file_name(ref_path),
            "sentences": len(examples), "lines": len(src_texts), "skipped": skipped,
            "tokens": {"src": n_src_tok, "tgt": n_tgt_tok, "src_words": n_src_tok - len(examples)},
            "src_final_punct": sum(e.punct >= 0 for e in examples),
            "rare_word_sentences": sum(e.rare_ok for e in examples),
            "mean_token_nll": total_nll / n_tgt_tok,
            "texts": texts}


def _importance_section(importance_raw: dict, importance: dict, n_tgt_tok: int) -> dict:
    """The report's "importance": both scores, the divisor, and the order the pruning curve switches heads off."""
    return {"raw": importance_raw, "normalised": importance, "tokens": n_tgt_tok,
            "order": [list(h_) for h_ in importance_order(importance)],
            "note": "raw: |dL(x)/dxi| per sentence x (one gate per sentence and head), summed over "
                    "sentences, / target tokens; normalised: per-layer L2, then global min-max (as "
                    "bertology's compute_heads_importance)"}


# ============================================================================ the command line

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(ap, threads=0, threads_help="torch threads (0 = all cores)")
    ap.add_argument("--src", help="source sentences, one per line (plain or .gz); default: Multi30k val.de")
    ap.add_argument("--ref", help="reference translations, one per line (plain or .gz); default: Multi30k val.en")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N sentence pairs (0 = all)")
    ap.add_argument("--out", help=f"report file (default: CHECKPOINT/{REPORT_NAME}, or the cache folder when the "
                                  f"checkpoint folder is not writable)")
    ap.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS,
                    help="padded positions per batch (default %(default)s)")
    ap.add_argument("--ablation-limit", type=int, default=0, help="sentences for the ablation losses (0 = all)")
    ap.add_argument("--pruning-limit", type=int, default=DEFAULT_PRUNING_LIMIT,
                    help="sentences decoded for the pruning curve (0 = all; default %(default)s)")
    ap.add_argument("--no-ablation", action="store_true", help="skip the per-head ablation losses")
    ap.add_argument("--no-pruning", action="store_true", help="skip the pruning curve")
    ap.add_argument("--alignment-only", action="store_true",
                    help="add the cross heads' AER on the annotated pairs to the existing report (--out or the "
                         "checkpoint's) and name the aligners by it; the rest of the report stays as it was")
    return ap


def _corpus_paths(args: argparse.Namespace) -> tuple[str, str]:
    """(source file, reference file): as given, or the Multi30k validation split; raises Refused (or DataError)
    saying why not."""
    from model.analysis.experiments import find_data_dir
    from model.training.data import find_file

    if (args.src is None) != (args.ref is None):
        raise Refused("give both --src and --ref, or neither (then the Multi30k validation split is used)")
    if args.src is not None:
        return args.src, args.ref
    folder, looked = find_data_dir("val")
    if folder is None:
        raise Refused("the Multi30k validation split (val.de[.gz], val.en[.gz]) was not found; looked in: "
                      + ", ".join(str(p) for p in looked) + " (set ATLAS_DATA_DIR or pass --src and --ref)")
    return str(find_file(folder, "val", "de")), str(find_file(folder, "val", "en"))


def _analyze_with_bar(translator, src: list[str], ref: list[str], args: argparse.Namespace, src_path: str,
                      ref_path: str, ranks: Ranks) -> dict:
    """analyze() with a progress bar on stderr (per mille, so that the bar moves within a long stage); rank 0's."""
    from tqdm import tqdm

    with tqdm(total=1000, desc="analysing", unit="‰", file=sys.stderr, disable=None if ranks.main else True,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]") as bar:
        def progress(fraction: float, message: str) -> None:
            bar.set_description_str(message, refresh=False)
            bar.update(int(fraction * 1000) - bar.n)

        return analyze(translator, src, ref, ablation=not args.no_ablation, pruning=not args.no_pruning,
                       progress=progress, batch_tokens=args.batch_tokens, ablation_limit=args.ablation_limit,
                       pruning_limit=args.pruning_limit, name=Path(args.checkpoint).resolve().name,
                       src_path=src_path, ref_path=ref_path, ranks=ranks)


def main(argv: list[str] | None = None) -> int:
    from model.training.data import DataError
    from model.training.distributed import setup, teardown

    args = _parser().parse_args(argv)
    ranks = setup()  # one rank unless torchrun started several
    # Every rank meets the same files and corpus, so all stop here together; rank 0 alone says why.
    code = run(lambda: _run(args, ranks), DataError, ValueError, quiet=not ranks.main)
    # An exception other than these leaves without the barrier: torchrun then stops the other ranks, which a rank
    # waiting here while they wait in a gather would not let it do.
    teardown(ranks)
    return code


def _run(args: argparse.Namespace, ranks: Ranks) -> None:
    """Read, analyse, and (rank 0) write the report and say where; raises Refused, DataError or ValueError."""
    from model.training.data import read_parallel

    if args.alignment_only:
        return _alignment_only(args, ranks)
    src_path, ref_path = _corpus_paths(args)
    translator = load_translator(args.checkpoint)
    src, ref = read_parallel(src_path, ref_path)
    if args.limit > 0:
        src, ref = src[: args.limit], ref[: args.limit]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    set_threads(args.threads, otherwise=cores // ranks.local_world)
    report = _analyze_with_bar(translator, src, ref, args, src_path, ref_path, ranks)
    if not ranks.main:
        return
    try:
        path = write_report(report, args.out, Path(args.checkpoint))
    except OSError as e:
        raise Refused(f"cannot write the report ({e})") from e
    t = report["timings"]
    print(f"wrote {path}  ({report['corpus']['sentences']} sentences; "
          + ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) + ")")


def _alignment_only(args: argparse.Namespace, ranks: Ranks) -> None:
    """--alignment-only: the existing report with the alignment section, the cross heads' AER and their roles."""
    from model.analysis.measures import THRESHOLDS, head_roles
    from model.analysis.report import load_report

    path = Path(args.out) if args.out else Path(args.checkpoint) / REPORT_NAME
    report, translator = load_report(path), load_translator(args.checkpoint)  # ReportError: a ValueError
    cross = report["kinds"]["cross"]
    results = {"cross": {"measures": {}}}
    t0 = time.perf_counter()
    report["alignment"] = add_alignment(results, translator)
    if report["alignment"] is None:
        raise Refused("the annotated pairs are German-English; this model translates other languages")
    cross["measures"].update(results["cross"]["measures"])
    measures = {name: np.asarray(v, dtype=float) for name, v in cross["measures"].items()
                if v is not None and np.asarray(v, dtype=object).ndim == 2}
    chance = cross.get("chance", {}).get("rare_share")
    cross["roles"] = [[head_roles({n: float(v[l, h]) for n, v in measures.items()}, "cross", None, chance)
                       for h in range(cross["heads"])] for l in range(cross["layers"])]
    report.update(definitions=DEFINITIONS, thresholds=THRESHOLDS)
    report["timings"]["alignment"] = time.perf_counter() - t0
    if ranks.main:
        print(f"wrote {write_report(rounded(report), path, Path(args.checkpoint))}")


if __name__ == "__main__":
    sys.exit(main())
