"""The faithfulness check of the attribution methods, and its command line (python -m model.attribution).

For each output token, remove the source words that a method ranks highest and measure how much the chosen
token's probability falls, against removing random words. "Remove" = make the position padding: its id becomes
<pad>, so the source mask hides it as a key in every encoder self-attention and every cross-attention, while
every other word keeps its position (dropping the word would shift the positional encodings of the words after
it; <unk> would still be a token the model reads). This batches: one row per removal set. The source <eos> is
never removed (it is no word) and <eos> rows are not scored (the stop decision is no word's translation).
Probabilities are the raw generator's softmax (Translator.score's), not decoding's renormalised one without
<bos>/<pad>. The methods themselves: model/analysis/attribution.py. Shape letters: see model/__init__.py.

The result file goes to --out (default: faithfulness.json in the current folder; a benchmark that keeps it
passes --out benchmarks/results/faithfulness.json). The files it names are written relative to the repository,
so that no machine's absolute path goes into a result that may be committed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from model.analysis.attribution import DEFINITIONS, METHODS, RELEVANCE_SCORES, attribute_ids
from model.io.cli import Refused, add_common_options, command, load_translator, set_threads
from model.nn.transformer import EncoderDecoder

SCHEMA = "attention-atlas-faithfulness/1"
DEFAULT_OUT = "faithfulness.json"  # in the current folder: library code writes nothing into benchmarks/results
ROOT = Path(__file__).resolve().parents[2]  # the repository, which the written paths are relative to


@torch.inference_mode()
def removal_log_probs(model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], bos: int,
                      removals: list[tuple[int, ...]], chunk: int = 64) -> np.ndarray:
    """(len(removals), t): log p(y_i) at every position with the source positions of each removal hidden.

    A removed position's id becomes <pad>, so the source mask hides it as a key in every encoder and
    cross-attention; the others keep their positions. The empty tuple is the unchanged sentence.
    """
    pad = model.cfg.pad_idx
    device = next(model.parameters()).device
    tgt_in = torch.tensor([bos] + list(tgt_ids[:-1]), dtype=torch.long, device=device)
    y = torch.tensor(list(tgt_ids), dtype=torch.long, device=device)
    out = []
    for start in range(0, len(removals), chunk):
        part = removals[start : start + chunk]
        src = torch.tensor([list(src_ids)] * len(part), dtype=torch.long, device=device)  # (m, s)
        for r, positions in enumerate(part):
            if positions:
                src[r, list(positions)] = pad
        log_probs = model(src, tgt_in.expand(len(part), -1))  # (m, t, V), fused attention
        out.append(log_probs.gather(-1, y.view(1, -1, 1).expand(len(part), -1, 1))[..., 0].double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, len(tgt_ids)))


def faithfulness(translator, texts: list[str], targets: list[list[str]] | None = None,
                 methods: Sequence[str] = METHODS, ks: Sequence[int] = (1, 2, 3), seed: int = 0,
                 relevance_score: str = "logit", progress=None) -> dict:
    """Removal test of each method against random removal, over sentences `texts` (see the module docstring).

    Each sentence is teacher-forced on its greedy translation (or on `targets[n]`, tokens). For every output
    token and k in `ks`, the k source words ranked highest by a method are removed (ties: the earlier word) and
    so are k words drawn at random (numpy default_rng(seed), the same draw for every method); the drop
    p(y_i) − p(y_i | removed) is averaged over tokens. A token counts for k when its sentence has at least k
    words. For k = 1 every single-word removal is computed, which also gives the expected drop of a uniformly
    random word and the best possible single removal (oracle).
    """
    tv = translator.tgt_vocab
    rng = np.random.default_rng(seed)
    sources = [translator.prepare(t) for t in texts]
    ids_list = ([tv.encode(list(tok)) for tok in targets] if targets is not None
                else [d.ids if d else [] for d in translator.decode_batch(sources)])
    drops = {m: {k: [] for k in ks} for m in list(methods) + ["random"]}
    expected1, oracle1, p_chosen = [], [], []
    n_sent = 0
    for source, tgt_ids in zip(sources, ids_list):
        if progress is not None:
            progress(1)
        if len(source.tokens) == 0 or not tgt_ids:
            continue
        n_sent += 1
        p0, d1 = _sentence_drops(translator.model, source, tgt_ids, tv.bos_idx, methods, ks, rng, relevance_score,
                                 drops)
        p_chosen.extend(p0.tolist())
        expected1.extend(d1.mean(0).tolist())
        oracle1.extend(d1.max(0).tolist())
    return _summary(drops, methods, ks, n_sent, p_chosen, expected1, oracle1)


def _sentence_drops(model: EncoderDecoder, source, tgt_ids: list[int], bos: int, methods: Sequence[str],
                    ks: Sequence[int], rng: np.random.Generator, relevance_score: str,
                    drops: dict) -> tuple[np.ndarray, np.ndarray]:
    """One sentence: each (method, k)'s drops appended to drops[method][k]; returns (p(y_i) (t,), the drop
    of every single-word removal (words, t))."""
    n_words, t = len(source.tokens), len(tgt_ids)
    att = attribute_ids(model, source.ids, tgt_ids, bos, tuple(methods), relevance_score=relevance_score)
    singles = [(j,) for j in range(n_words)]
    plans: dict[tuple[str, int], list[tuple[int, ...]]] = {}  # (method, k) -> one removal per token
    for k in ks:
        if k > n_words:
            continue
        for m in methods:
            order = np.argsort(-att["matrices"][m][:, :n_words], axis=1, kind="stable")  # <eos> never removed
            plans[(m, k)] = [tuple(sorted(order[i, :k].tolist())) for i in range(t)]
        draws = [rng.choice(n_words, size=k, replace=False) for _ in range(t)]
        plans[("random", k)] = [tuple(sorted(d.tolist())) for d in draws]
    removals = [()] + singles + sorted({r for plan in plans.values() for r in plan} - set(singles))
    where = {r: n for n, r in enumerate(removals)}
    probs = np.exp(removal_log_probs(model, source.ids, tgt_ids, bos, removals))  # (R, t)
    p0 = probs[0]  # (t,)
    for (m, k), plan in plans.items():
        drops[m][k].extend(float(p0[i] - probs[where[r], i]) for i, r in enumerate(plan))
    return p0, p0[None, :] - probs[1 : 1 + n_words]  # (t,), (words, t)


def _summary(drops: dict, methods: Sequence[str], ks: Sequence[int], n_sent: int, p_chosen: list[float],
             expected1: list[float], oracle1: list[float]) -> dict:
    """The result: per method and k the mean drop against random removal's, AOPC, and the single-word bounds."""
    result = {"n_sentences": n_sent, "n_tokens": len(p_chosen),
              "mean_p_chosen": float(np.mean(p_chosen)) if p_chosen else None, "methods": {}}
    rand = {k: np.asarray(drops["random"][k]) for k in ks}
    for m in list(methods) + ["random"]:
        per_k = {}
        for k in ks:
            d = np.asarray(drops[m][k])
            entry = {"n_tokens": int(d.size), "mean_drop": float(d.mean()) if d.size else None}
            if m != "random":
                r = rand[k]
                entry["mean_drop_random"] = float(r.mean()) if r.size else None
                entry["share_beats_random"] = float((d > r).mean()) if d.size else None
                entry["share_ties_random"] = float((d == r).mean()) if d.size else None  # the same words removed
            per_k[str(k)] = entry
        means = [e["mean_drop"] for e in per_k.values() if e["mean_drop"] is not None]
        result["methods"][m] = {"definition": DEFINITIONS.get(m, "k source words drawn uniformly at random "
                                                                "(seeded), <eos> excluded"),
                                "k": per_k, "aopc": float(np.mean(means)) if means else None}
    result["single_removal"] = {
        "expected_random_mean_drop": float(np.mean(expected1)) if expected1 else None,
        "oracle_mean_drop": float(np.mean(oracle1)) if oracle1 else None,
    }
    return result


def format_table(result: dict, ks: Sequence[int]) -> str:
    """A small fixed-width table of the faithfulness result."""
    header = ["method"] + [h for k in ks for h in (f"drop@{k}", f"rand@{k}", f"beats@{k}")] + ["AOPC"]
    rows = []
    for m, r in result["methods"].items():
        row = [m]
        for k in ks:
            e = r["k"][str(k)]
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            row += [fmt(e["mean_drop"]), fmt(e.get("mean_drop_random", e["mean_drop"])),
                    "-" if e.get("share_beats_random") is None else f"{e['share_beats_random']:.0%}"]
        row.append("-" if r["aopc"] is None else f"{r['aopc']:.3f}")
        rows.append(row)
    widths = [max(len(str(x[i])) for x in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)




# ----------------------------------------------------------------------------- the command line

def repo_relative(path: str | Path) -> str:
    """`path` as a result file names it: relative to the repository (one base for every path in the file, and no
    machine's absolute path), or as given where no relative path exists (another drive)."""
    try:
        return os.path.relpath(os.path.abspath(path), ROOT)
    except ValueError:
        return str(path)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m model.attribution", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Faithfulness of the attribution methods: remove the top-attributed source words of each\n"
                    "output token (masked as padding) and measure the drop of its probability, against random\n"
                    "words. Default data: the Multi30k validation split (never the test split).\n\n"
                    "    python -m model.attribution --checkpoint checkpoints/multi30k-de-en --src sentences.de \\\n"
                    "        --limit 50 --ks 1 2 3 --seed 0 --out faithfulness.json")
    add_common_options(ap, threads=1)
    ap.add_argument("--src", help="source sentences, one per line (plain or .gz); default: val.de of Multi30k")
    ap.add_argument("--ref", help="reference translations, line by line; needed only with --target reference")
    ap.add_argument("--target", choices=("greedy", "reference"), default="greedy",
                    help="teacher-force on the model's greedy translation (default) or on the reference")
    ap.add_argument("--limit", type=int, default=300, help="the first N sentences (default 300; 0 = all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random removals")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3], help="how many words to remove (default 1 2 3)")
    ap.add_argument("--relevance-score", choices=RELEVANCE_SCORES, default="logit",
                    help="what the relevance gradients are taken of (default: the chosen token's logit)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the JSON report to write (default: %(default)s)")
    return ap


def _read_corpus(args: argparse.Namespace):
    """(src_path, ref_path, split, source lines, reference lines or None); Refused saying why not."""
    from model.analysis.experiments import find_data_dir
    from model.training.data import DataError, find_file, read_lines

    try:
        if args.src:
            src_path, ref_path = Path(args.src), (Path(args.ref) if args.ref else None)
            src_lines = read_lines(src_path)
            split = None
        else:
            folder, looked = find_data_dir("val")
            if folder is None:
                raise Refused(f"no Multi30k validation split (val.de[.gz]) in {', '.join(map(str, looked))}; "
                              f"pass --src/--ref or set ATLAS_DATA_DIR")
            src_path, ref_path, split = find_file(folder, "val", "de"), find_file(folder, "val", "en"), "val"
            src_lines = read_lines(src_path)
        ref_lines = read_lines(ref_path) if (ref_path is not None and args.target == "reference") else None
    except DataError as e:
        raise Refused(str(e)) from e
    if args.target == "reference" and ref_lines is None:
        raise Refused("--target reference needs --ref")
    if ref_lines is not None and len(ref_lines) != len(src_lines):
        raise Refused(f"{src_path} has {len(src_lines)} lines but {ref_path} has {len(ref_lines)}")
    return src_path, ref_path, split, src_lines, ref_lines


def _result_file(args: argparse.Namespace, src_path, ref_path, split, n: int, ks: list[int], result: dict,
                 seconds: float, with_ref: bool) -> dict:
    """What --out holds: the settings that produced the result, the result, and the machine's versions."""
    return {
        "schema": SCHEMA,
        "checkpoint": repo_relative(args.checkpoint),
        "data": {"src": repo_relative(src_path), "ref": repo_relative(ref_path) if with_ref else None,
                 "split": split, "sentences": f"the first {n} lines"},
        "settings": {
            "target": args.target, "limit": args.limit, "seed": args.seed, "ks": ks,
            "relevance_score": args.relevance_score, "threads": args.threads,
            "removal": "source position made padding (id <pad>): hidden as a key in every encoder and cross-attention, "
                       "positions of the other words kept; the source <eos> is never removed",
            "rows": "every output token of the teacher-forced target; the <eos> decision is not scored",
            "probability": "raw generator softmax p(y_i | removed source, y_<i)",
            "drop": "p(y_i) - p(y_i | k words removed), averaged over tokens; random: k words drawn uniformly "
                    "(numpy default_rng(seed)), the same draw compared with every method",
            "share_beats_random": "share of tokens whose drop exceeds the random removal's (ties: the same words)",
            "aopc": "mean of the mean drops over k",
        },
        **result,
        "seconds": round(seconds, 2),
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "time": time.strftime("%Y-%m-%d %H:%M:%S")},
    }


@command()
def main(argv: list[str] | None = None) -> int:
    """python -m model.attribution --checkpoint DIR [--src F --ref F] [--limit N] [--out FILE.json] [--seed S]"""
    args = _parser().parse_args(argv)
    set_threads(args.threads)
    src_path, ref_path, split, src_lines, ref_lines = _read_corpus(args)
    translator = load_translator(args.checkpoint)
    n = len(src_lines) if args.limit <= 0 else min(args.limit, len(src_lines))
    texts = src_lines[:n]
    targets = [translator.target_tokens(r) for r in ref_lines[:n]] if ref_lines is not None else None
    ks = sorted(set(k for k in args.ks if k > 0))
    t0 = time.perf_counter()
    result = faithfulness(translator, texts, targets, METHODS, ks, args.seed, args.relevance_score)
    seconds = time.perf_counter() - t0
    out = _result_file(args, src_path, ref_path, split, n, ks, result, seconds, ref_lines is not None)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"{result['n_sentences']} sentences, {result['n_tokens']} output tokens "
          f"(mean p(chosen) {result['mean_p_chosen'] or 0:.3f}), {seconds:.1f} s")
    print(format_table(result, ks))
    sr = result["single_removal"]
    if sr["expected_random_mean_drop"] is not None:
        print(f"single word: expected drop of a uniformly random word {sr['expected_random_mean_drop']:.3f}, "
              f"best possible (oracle) {sr['oracle_mean_drop']:.3f}")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
