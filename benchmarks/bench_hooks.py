"""Named hook points against the old forward arguments: the same analyses, interleaved, on one machine.

    python benchmarks/bench_hooks.py --before /tmp/before [--variants before=/tmp/before after=. again=.]
                                     [--repeats 5] [--inner 5] [--sentences-k 64] [--pruning-limit 16]
                                     [--ops translate trace ...] [--checkpoint DIR] [--data-dir DIR] [--out FILE]
    python benchmarks/bench_hooks.py --lines --before /tmp/before    # lines of model/nn and model/analysis

A variant is NAME=DIR, the checkout DIR (e.g. the commit before the change in a git worktree); the default is
before=<--before> after=. . Every repeat runs one worker process per variant, the variants' order reversed every
other repeat, with DIR as its working folder and first import path, so it imports DIR's own `model` package. A
worker loads the checkpoint once (Translator.from_checkpoint(draft=False): no int8 draft in the trace), runs each
operation once to warm up, then times it --inner times (time.perf_counter, one torch thread). A variant named twice
(`after=. again=.`) is the control: what two copies of the same code differ by is the noise a difference must beat.

Operations, on one caption sentence teacher-forced on its own greedy translation (with <eos> when it finished):
  translate    Translator.translate(sentence), greedy, no hooks                   (limit: 1.05x before)
  trace        Translator.trace(sentence): greedy decoding with every step recorded (limit: 1.10x before)
  knockout     model.analysis.patch.knockout: every head switched off, one at a time
  patching     model.analysis.patch.patching: clean -> corrupted (same token count), every head and residual
  lens         model.analysis.lens.logit_lens at the middle step
  attribution  model.analysis.attribution.attribute with its default methods
  head_report  model.analysis.analyze.analyze on the first --sentences-k pairs of Multi30k val, --pruning-limit
               sentences for the pruning curve; its own stages (head_report:measures_importance, :ablation,
               :pruning) are rows too. Its warm-up runs on two pairs only.
Prints a markdown table of the medians over all repeats (op | NAME ms ... | NAME/first) and writes
benchmarks/results/hooks.json (--out FILE).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ["translate", "trace", "knockout", "patching", "lens", "attribution", "head_report"]
LIMITS = {"translate": 1.05, "trace": 1.10}
STAGES = ["measures_importance", "ablation", "pruning"]
SENTENCE = "Ein Mann mit einem roten Hut spielt Gitarre im Park."
# Patching needs as many source tokens on both sides: the first of these that has them is the corrupted run.
CORRUPT = ["Eine Frau mit einem blauen Hut spielt Gitarre im Park.",
           "Ein Mann mit einem blauen Hut spielt Gitarre im Park.",
           "Ein Kind mit einem roten Hut spielt Gitarre im Park.",
           "Ein Mann mit einem roten Hut spielt Gitarre im Haus.",
           "Der Hund mit einem roten Ball spielt Gitarre im Park."]
LINE_FOLDERS = ("model/nn", "model/analysis")


def read_pairs(data_dir: Path, k: int) -> tuple[list[str], list[str]]:
    """The first k (German, English) lines of Multi30k val."""
    sides = []
    for name in ("val.de.gz", "val.en.gz"):
        with gzip.open(data_dir / name, "rt", encoding="utf-8") as f:
            sides.append([line.rstrip("\n") for _, line in zip(range(k), f)])
    return sides[0], sides[1]


# ---------------------------------------------------------------- worker: one variant, one process


def worker_ops(tr, args) -> dict:
    """op name -> a callable of no arguments that runs it once (and returns the head report's timings)."""
    from model.analysis import lens, patch
    from model.analysis.analyze import analyze
    from model.analysis.attribution import attribute

    done = tr.translate(SENTENCE)
    tgt = done.raw_tokens + ([tr.tgt_vocab.token("eos")] if done.finished else [])
    n = len(tr.prepare(SENTENCE).ids)
    corrupt = next((c for c in CORRUPT if len(tr.prepare(c).ids) == n), None)
    ops = {"translate": lambda: tr.translate(SENTENCE), "trace": lambda: tr.trace(SENTENCE),
           "knockout": lambda: patch.knockout(tr, SENTENCE, tgt),
           "lens": lambda: lens.logit_lens(tr, SENTENCE, tgt, len(tgt) // 2),
           "attribution": lambda: attribute(tr, SENTENCE, tgt)}
    if corrupt is not None:
        ops["patching"] = lambda: patch.patching(tr, SENTENCE, corrupt, tgt)
    if "head_report" in args.ops:
        src, ref = read_pairs(Path(args.data_dir), args.sentences_k)
        kw = {"batch_tokens": args.batch_tokens} if args.batch_tokens else {}
        ops["head_report"] = lambda s=src, r=ref, lim=args.pruning_limit: analyze(
            tr, s, r, pruning_limit=lim, **kw)["timings"]
        ops["head_report:warm"] = lambda: analyze(tr, src[:2], ref[:2], pruning_limit=1, **kw)
    return ops


def worker(args) -> int:
    """Time every op of args.ops in this process (the variant's own `model` package); print JSON on the last line."""
    root = Path(args.variant_root).resolve()
    sys.path[0:1] = [str(root)]  # the variant's `model`, not the one next to this script
    import torch

    from model.inference.translator import Translator

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tr = Translator.from_checkpoint(args.checkpoint, draft=False)
    ops = worker_ops(tr, args)
    out: dict = {"model_package": str(Path(sys.modules["model"].__file__).resolve().parent), "seconds": {},
                 "stages": {}}
    for op in args.ops:
        if op not in ops:
            out.setdefault("skipped", []).append(op)
            continue
        ops.get(f"{op}:warm", ops[op])()
        times, stages = [], {s: [] for s in STAGES}
        for _ in range(args.inner):
            t0 = time.perf_counter()
            got = ops[op]()
            times.append(time.perf_counter() - t0)
            if op == "head_report":
                for s in STAGES:
                    stages[s].append(got.get(s, float("nan")))
        out["seconds"][op] = times
        if op == "head_report":
            out["stages"] = stages
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------- parent: interleaved workers, table, JSON


def parse_variants(args) -> dict[str, Path]:
    specs = args.variants or ([f"before={args.before}"] if args.before else []) + ["after=."]
    variants = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variants takes NAME=DIR pairs, got {spec!r}")
        if name in variants:
            raise SystemExit(f"variant name {name!r} given twice: name a control differently (again=.)")
        variants[name] = (ROOT / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    return variants


def count_lines(root: Path) -> dict[str, int]:
    """Lines (as wc -l counts them) of the .py files of each of LINE_FOLDERS, and their total."""
    counts = {}
    for folder in LINE_FOLDERS:
        counts[folder] = sum(p.read_bytes().count(b"\n") for p in sorted((root / folder).glob("*.py")))
    counts["total"] = sum(counts.values())
    return counts


def run_worker(root: Path, args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--variant-root", str(root),
           "--checkpoint", str(Path(args.checkpoint).resolve()), "--data-dir", str(Path(args.data_dir).resolve()),
           "--inner", str(args.inner), "--sentences-k", str(args.sentences_k),
           "--pruning-limit", str(args.pruning_limit), "--batch-tokens", str(args.batch_tokens or 0),
           "--ops", *args.ops]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the variant's own folder
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit(f"worker for {root} failed (exit {run.returncode})")
    return json.loads(run.stdout.strip().splitlines()[-1])


def collect(variants: dict[str, Path], args) -> tuple[dict, dict]:
    """({variant: {row: [seconds, ...]}} over all repeats, {variant: model package folder})."""
    samples: dict = {name: {} for name in variants}
    packages = {}
    names = list(variants)
    for r in range(args.repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            got = run_worker(variants[name], args)
            packages[name] = got["model_package"]
            for op, times in got["seconds"].items():
                samples[name].setdefault(op, []).extend(times)
            for stage, times in got.get("stages", {}).items():
                samples[name].setdefault(f"head_report:{stage}", []).extend(times)
            print(f"repeat {r + 1}/{args.repeats} {name}: done", file=sys.stderr, flush=True)
    return samples, packages


def markdown(medians: dict, names: list[str]) -> str:
    first = names[0]
    header = ["op"] + [f"{n} ms" for n in names] + [f"{n}/{first}" for n in names[1:]] + ["limit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = [r for r in OPS + [f"head_report:{s}" for s in STAGES] if all(r in medians[n] for n in names)]
    for row in rows:
        ms = [medians[n][row] for n in names]
        ratios = [f"{m / ms[0]:.3f}" if ms[0] else "-" for m in ms[1:]]
        limit = f"{LIMITS[row]:.2f}" if row in LIMITS else ""
        lines.append("| " + " | ".join([row] + [f"{m:.1f}" for m in ms] + ratios + [limit]) + " |")
    return "\n".join(lines)


def parent(args) -> int:
    variants = parse_variants(args)
    for name, root in variants.items():
        if not (root / "model" / "nn").is_dir():
            print(f"variant {name}: no model/nn in {root}", file=sys.stderr)
            return 2
    lines = {name: count_lines(root) for name, root in variants.items()}
    if args.lines:
        for name, counts in lines.items():
            print(f"{name} ({root_shown(variants[name])}): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        return 0
    if not (Path(args.checkpoint) / "model.safetensors").is_file():
        print(f"No checkpoint at {Path(args.checkpoint).resolve()} (model.safetensors missing).", file=sys.stderr)
        return 2
    data = Path(args.data_dir).resolve()
    if "head_report" in args.ops and not all((data / f).is_file() for f in ("val.de.gz", "val.en.gz")):
        print(f"No Multi30k val at {data} (looked for val.de.gz and val.en.gz); pass --data-dir, or leave "
              f"head_report out of --ops.", file=sys.stderr)
        return 2
    samples, packages = collect(variants, args)
    names = list(variants)
    medians = {n: {row: statistics.median(v) * 1000 for row, v in samples[n].items()} for n in names}
    print(markdown(medians, names))
    try:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from common import machine
        info = machine()
    except ImportError:
        info = {}
    first = names[0]
    result = {
        "command": "python benchmarks/bench_hooks.py " + " ".join(sys.argv[1:]),
        "machine": info,
        "settings": {k: getattr(args, k) for k in ("repeats", "inner", "sentences_k", "pruning_limit",
                                                     "batch_tokens", "ops")}
        | {"checkpoint": root_shown(Path(args.checkpoint)), "torch_threads": 1},
        "variants": {n: {"root": root_shown(variants[n]), "model_package": root_shown(Path(packages[n])),
                         "lines": lines[n]} for n in names},
        "median_ms": medians,
        f"ratio_to_{first}": {n: {row: medians[n][row] / medians[first][row] for row in medians[n]
                                  if medians[first].get(row)} for n in names[1:]},
        "limits": LIMITS,
        "samples_ms": {n: {row: [x * 1000 for x in v] for row, v in samples[n].items()} for n in names},
    }
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "hooks.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {root_shown(out)}")
    return 0


def root_shown(path: Path) -> str:
    """A path as the result names it: relative to this checkout when inside it (a result names no machine's
    folder), else as given."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="checkout of the code before the change (variant `before`)")
    ap.add_argument("--variants", nargs="+", help="NAME=DIR pairs (default before=<--before> after=.)")
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--data-dir", default=str((ROOT / ".." / "shared" / "data" / "multi30k").resolve()),
                    help="folder of val.de.gz and val.en.gz (default ../shared/data/multi30k from the repo root)")
    ap.add_argument("--repeats", type=int, default=5, help="worker processes per variant (default 5)")
    ap.add_argument("--inner", type=int, default=5, help="timed runs of each op per worker (default 5)")
    ap.add_argument("--sentences-k", type=int, default=64, help="sentence pairs of the head report (default 64)")
    ap.add_argument("--pruning-limit", type=int, default=16, help="sentences of the pruning curve (default 16)")
    ap.add_argument("--batch-tokens", type=int, default=0, help="the head report's batch_tokens (0: its default)")
    ap.add_argument("--ops", nargs="+", choices=OPS, default=OPS)
    ap.add_argument("--out", help="result JSON (default benchmarks/results/hooks.json)")
    ap.add_argument("--lines", action="store_true", help="only print the lines of model/nn and model/analysis")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant-root", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return worker(args) if args.worker else parent(args)


if __name__ == "__main__":
    sys.exit(main())
