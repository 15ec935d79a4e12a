"""How fast is the model: one translation traced and not, the analyses, models of published sizes?

    python benchmarks/bench_model.py [--checkpoint DIR] [--repeats 30] [--load-repeats 10]        (model.json)
    python benchmarks/bench_model.py --ops all|OP ... [--variants NAME=COMMIT|DIR ...] [--repeats 5] [--inner 5]
        [--sentences-k 64] [--pruning-limit 16]                                              (ops.json; OPS below)
    python benchmarks/bench_model.py --families nllb-600m,mbart-large-50,flan-t5-base | --opus-size  (families.json,
        marian.json) [--repeats 3] [--load-repeats 3] [--results NAME]

Default: for sources of 5-80 tokens, Translator.trace (with the int8 draft where the model gets one), without the
draft, Translator.translate, and torch.nn.Transformer of the same size (random weights, no key/value cache); the load;
the model built with and without its initialisation. --ops: each op on one caption sentence, a worker process per
variant (NAME=DIR, or NAME=COMMIT in a temporary worktree) and repeat, the order reversed every other repeat (a
variant named twice, `after=. again=.`, is the control); contributions on a 20-piece sentence. --families (--opus-size:
opus-mt-de-en): published shapes (shapes.py), random weights, loaded in fresh processes: load, resident memory, a
20-piece sentence traced for 20 tokens, value norms and ALTI+ along it (probe). One torch thread, as the app.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import common
import shapes
from common import ROOT, open_translator, shown_path, status_mb, summary, table, verdict, write_results

LENGTHS = [5, 10, 20, 40, 80]
TARGETS = {"traced_20_tokens_median_ms": 30.0, "traced_over_untraced": 1.5, "load_median_s": 0.5}
OPS = "translate trace knockout patching lens attribution contributions align cache cache_patterns head_report".split()
LIMITS = {"translate": 1.05, **{op: 1.10 for op in OPS[1:5] + ["cache", "cache_patterns", "head_report"]}}
TARGETS_MS = {"contributions": 300.0, "align": 30_000.0}  # contributions.md: one sentence; the 100 annotated pairs
STAGES = ["measures_importance", "ablation", "pruning"]
SENTENCE = "Ein Mann mit einem roten Hut spielt Gitarre im Park."
CORRUPT = ["Eine Frau mit einem blauen Hut spielt Gitarre im Park.", "Ein Mann mit einem blauen Hut spielt Gitarre im "
           "Park.", "Ein Kind mit einem roten Hut spielt Gitarre im Park.", "Ein Mann mit einem roten Hut spielt "
           "Gitarre im Haus."]  # the first with as many source tokens as SENTENCE is the corrupted run
TOKENS = 20  # a --families sentence's pieces, and its output tokens
FAMILY_TARGETS = {"load_s": 15.0, "rss_over_weights": 1.5, "trace_s": {
    "opus-mt-de-en": 0.3, "nllb-600m": 4.0, "mbart-large-50": 4.0, "flan-t5-base": 1.5, "fsmt-wmt19-de-en": 2.0,
    "t5gemma-s-s": 4.0, "t5gemma-b-b": 4.0}}


def timed(fn, repeats: int, warmup: int = 3) -> list[float]:
    """Seconds of `repeats` calls of fn, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def reference_model(cfg):
    """torch.nn.Transformer with our dimensions, embeddings (scaled, + sinusoidal positions) and a generator."""
    import warnings

    import torch
    from torch import nn

    from model.nn.layers import sinusoidal_encoding

    warnings.filterwarnings("ignore", message="enable_nested_tensor is True")  # pre-norm has no nested-tensor path

    class Reference(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.src_embed, self.tgt_embed = nn.Embedding(cfg.src_vocab_size, d), nn.Embedding(cfg.tgt_vocab_size, d)
            self.register_buffer("pe", sinusoidal_encoding(cfg.max_len, d))  # (max_len, d), the paper's table
            self.transformer = nn.Transformer(d, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff,
                                              dropout=cfg.dropout, batch_first=True, norm_first=cfg.norm_first)
            self.generator, self.scale = nn.Linear(d, cfg.tgt_vocab_size), math.sqrt(d)

        def embed(self, lut, ids):  # (b, n) -> (b, n, d)
            return lut(ids) * self.scale + self.pe[: ids.shape[1]]

        @torch.inference_mode()
        def greedy(self, src, bos: int, steps: int) -> list[int]:
            """Exactly `steps` decoder passes (no early stop), each over the whole prefix."""
            memory, ys = self.transformer.encoder(self.embed(self.src_embed, src)), torch.tensor([[bos]])
            for _ in range(steps):
                mask = nn.Transformer.generate_square_subsequent_mask(ys.shape[1])
                x = self.transformer.decoder(self.embed(self.tgt_embed, ys), memory, tgt_mask=mask, tgt_is_causal=True)
                nxt = self.generator(x[:, -1]).log_softmax(-1).argmax(-1)  # (1,)
                ys = torch.cat([ys, nxt[:, None]], dim=1)  # (1, t + 1)
            return ys[0, 1:].tolist()

    torch.manual_seed(0)
    return Reference().eval()


def one_length(tr, unaided, ref, n: int, repeats: int) -> dict:
    """Every measure of one source length (median rows of summary())."""
    import torch

    text = common.sentence_of_length(n, lambda s: tr.prepare(s, max_tokens=10**6).tokens)
    steps = len((out := tr.translate(text)).raw_tokens) + out.finished  # decoder passes, the <eos> step included
    src = torch.tensor([tr.prepare(text).ids])
    row = {"source_tokens": n, "text": text, "decoder_steps": steps,
           "traced": summary(timed(lambda: tr.trace(text), repeats)),
           "traced_unaided": summary(timed(lambda: unaided.trace(text), repeats)),
           "untraced": summary(timed(lambda: tr.translate(text), repeats)),
           "reference_nn_transformer": summary(timed(lambda: ref.greedy(src, tr.tgt_vocab.bos_idx, steps), repeats))}
    row["traced_over_untraced"] = row["traced"]["median_ms"] / row["untraced"]["median_ms"]
    return row


def lengths_main(args) -> int:
    from model.inference.translator import Translator
    from model.nn.transformer import EncoderDecoder

    tr = open_translator(args.checkpoint, args.threads)
    if tr is None:
        return 2
    unaided = Translator(tr.model, tr.src_vocab, tr.tgt_vocab, tr.metrics, pieces=tr.pieces, draft=False)
    ref, rows = reference_model(tr.cfg), []
    for n in LENGTHS:
        rows.append(one_length(tr, unaided, ref, n, args.repeats))
        print(f"  {n:>2} tokens done", flush=True)
    load = summary(timed(lambda: Translator.from_checkpoint(args.checkpoint), args.load_repeats, warmup=1))
    build = {"init": [], "no_init": []}
    for i in range(args.load_repeats + 1):  # interleaved, so that the machine's drift falls on both; 0 warms up
        for init in (True, False) if i % 2 == 0 else (False, True):
            t0 = time.perf_counter()
            EncoderDecoder(tr.cfg, init=init)
            if i:
                build["init" if init else "no_init"].append(time.perf_counter() - t0)
    build = {k: summary(v) for k, v in build.items()}
    print(table([[r["source_tokens"], r["decoder_steps"]] + [r[k]["median_ms"] for k in (
        "traced", "traced_unaided", "untraced", "reference_nn_transformer")]
        + [f"{r['traced_over_untraced']:.2f}x"] for r in rows],
        ["src tok", "steps", "traced ms", "no draft", "untraced", "nn.Transformer", "traced/untr"]))
    at20 = next(r for r in rows if r["source_tokens"] == 20)
    worst = max(r["traced_over_untraced"] for r in rows)
    checks = [("20-token traced, median", f"{at20['traced']['median_ms']:.1f} ms", "<= 30 ms",
               verdict(at20["traced"]["median_ms"], TARGETS["traced_20_tokens_median_ms"])),
              ("traced / untraced, worst length", f"{worst:.2f}x", "<= 1.5x", verdict(worst, 1.5)),
              ("checkpoint load, median", f"{load['median_ms'] / 1000:.3f} s", "<= 0.5 s",
               verdict(load["median_ms"] / 1000, TARGETS["load_median_s"]))]
    checks.append(("model built with / without its initialisation", f"{build['init']['median_ms']:.0f} / "
                   f"{build['no_init']['median_ms']:.0f} ms", "", ""))
    write_results("model", {
        "benchmark": "model", "checkpoint": shown_path(args.checkpoint), "config": tr.cfg.to_dict(),
        "torch_threads": args.threads, "repeats": args.repeats, "warmup": 3, "lengths": rows,
        "load": load, "build": build, "targets": TARGETS, "checks": common.print_checks(checks)})
    return 0


def worker_ops(tr, args) -> dict:
    """op name -> a callable of no arguments that runs it once (the head report's returns its stages' seconds)."""
    from model.analysis import lens, patch
    from model.analysis.analyze import analyze
    from model.analysis.attribution import attribute

    tgt = (done := tr.translate(SENTENCE)).raw_tokens + ([tr.tgt_vocab.token("eos")] if done.finished else [])
    corrupt = next((c for c in CORRUPT if len(tr.prepare(c).ids) == len(tr.prepare(SENTENCE).ids)), None)
    text = common.sentence_of_length(TOKENS, tr.pieces.source_pieces)  # the cache's and contributions' sentence
    ops = {"translate": lambda: tr.translate(SENTENCE), "trace": lambda: tr.trace(SENTENCE),
           "knockout": lambda: patch.knockout(tr, SENTENCE, tgt),
           "lens": lambda: lens.logit_lens(tr, SENTENCE, tgt, len(tgt) // 2),
           "attribution": lambda: attribute(tr, SENTENCE, tgt), "cache": lambda: tr.run_with_cache(text),
           "cache_patterns": lambda: tr.run_with_cache(text, names_filter=lambda n: n.endswith("hook_pattern"))}
    with contextlib.suppress(ImportError):  # a variant from before contributions has no such op
        from model.analysis import align, contributions
        t20 = (d := tr.translate(text)).raw_tokens + ([tr.tgt_vocab.token("eos")] if d.finished else [])
        ops |= {"contributions": lambda: contributions.contributions(tr, text, t20),
                "align": lambda: align.annotated_set(tr)}
    if corrupt is not None:
        ops["patching"] = lambda: patch.patching(tr, SENTENCE, corrupt, tgt)
    if "head_report" in args.ops:
        pairs = []
        for side in ("de", "en"):
            with gzip.open(Path(args.data_dir) / f"val.{side}.gz", "rt", encoding="utf-8") as f:
                pairs.append([line.rstrip("\n") for _, line in zip(range(args.sentences_k), f)])
        src, ref = pairs
        ops["head_report"] = lambda: analyze(tr, src, ref, pruning_limit=args.pruning_limit)["timings"]
        ops["head_report:warm"] = lambda: analyze(tr, src[:2], ref[:2], pruning_limit=1)
    return ops


def worker(args) -> int:
    """Time every op in this process, with the variant's own `model` package; print JSON on the last line."""
    root = Path(args.variant_root).resolve()
    sys.path[:] = [str(root)] + [p for p in sys.path if Path(p or ".").resolve() not in (ROOT, ROOT / "tests")]
    import torch

    from model.inference.translator import Translator

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ops = worker_ops(Translator.from_checkpoint(args.checkpoint, draft=False), args)
    out: dict = {"seconds": {}, "skipped": [op for op in args.ops if op not in ops]}
    for op in (op for op in args.ops if op in ops):
        ops.get(f"{op}:warm", ops[op])()
        for _ in range(args.inner):
            t0 = time.perf_counter()
            got = ops[op]()
            out["seconds"].setdefault(op, []).append(time.perf_counter() - t0)
            for stage in STAGES if op == "head_report" else []:
                out["seconds"].setdefault(f"head_report:{stage}", []).append(got.get(stage, float("nan")))
    print(json.dumps(out))
    return 0


def run_worker(root: Path, args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--variant-root", str(root), "--checkpoint",
           str(Path(args.checkpoint).resolve()), "--data-dir", str(Path(args.data_dir).resolve()), "--inner",
           str(args.inner), "--sentences-k", str(args.sentences_k), "--pruning-limit", str(args.pruning_limit),
           "--threads", str(args.threads), "--ops", *args.ops]
    return common.child_json(cmd, root)


def ops_main(args) -> int:
    if not (Path(args.checkpoint) / "model.safetensors").is_file():
        print(f"No checkpoint at {args.checkpoint} (model.safetensors missing).", file=sys.stderr)
        return 2
    if "head_report" in args.ops and not (Path(args.data_dir) / "val.de.gz").is_file():
        print(f"No Multi30k val.de.gz in {args.data_dir}: pass --data-dir, or leave head_report out.", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        folders = common.variants(args.variants, stack)
        names, samples = list(folders), {name: {} for name in folders}
        for r in range(args.repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                for row, times in run_worker(folders[name], args)["seconds"].items():
                    samples[name].setdefault(row, []).extend(times)
                print(f"repeat {r + 1}/{args.repeats} {name}: done", flush=True)
        shown = {name: common.checkout_name(folder) for name, folder in folders.items()}
    medians = {n: {row: statistics.median(v) * 1000 for row, v in samples[n].items()} for n in names}
    rows = [r for r in OPS + [f"head_report:{s}" for s in STAGES] if all(r in medians[n] for n in names)]
    first = names[0]
    ratios = {n: {row: medians[n][row] / medians[first][row] for row in rows} for n in names[1:]}
    print(table([[row] + [f"{medians[n][row]:.1f}" for n in names] + [f"{ratios[n][row]:.3f}" for n in names[1:]]
                 + [f"{LIMITS[row]:.2f}" if row in LIMITS else f"≤ {TARGETS_MS[row]:,.0f} ms" if row in TARGETS_MS
                    else ""] for row in rows],
                ["op"] + [f"{n} ms" for n in names] + [f"{n}/{first}" for n in names[1:]] + ["limit"]))
    write_results(args.results or "ops", {
        "settings": {k: getattr(args, k) for k in ("repeats", "inner", "sentences_k", "pruning_limit", "ops",
                                                     "threads")} | {"checkpoint": shown_path(args.checkpoint)},
        "variants": shown, "median_ms": medians, "limits": LIMITS, "targets_ms": TARGETS_MS,
        f"ratio_to_{first}": ratios,
        "samples_ms": {n: {row: [x * 1000 for x in v] for row, v in samples[n].items()} for n in names}})
    return 0


def probe(folder: Path, tokens: int = 0, repeats: int = 3) -> dict:
    """--probe, a fresh process: load as the app does (one torch and BLAS thread), the resident memory; `tokens`: a
    sentence of as many pieces traced for as many tokens: the first trace (with the draft where the load built one;
    otherwise it starts the draft's build), then, the draft built, by turns
    with the draft, without, the output forced (one traced pass), untraced; traced passes counted; a generator row."""
    import torch

    from model.inference import decode
    from model.inference.runtime import use_threads
    from model.inference.translator import Translator

    use_threads(1)
    mem, passes, checked = lambda key="VmRSS": status_mb(os.getpid(), key, children=False), [0], decode._teacher_forced
    out, t0 = {"rss_mb_before": mem()}, time.perf_counter()
    tr = Translator.from_checkpoint(folder)
    out |= {"load_s": time.perf_counter() - t0, "rss_mb": mem(), "peak_mb": mem("VmHWM")}
    if not tokens:
        return out
    text, n = common.sentence_of_length(tokens, tr.pieces.source_pieces), tokens + len(tr.start_prefix)
    out["draft_at_load"] = tr.draft is not None  # a very large generator's model: built with it
    decode._teacher_forced = lambda *a, **k: (passes.__setitem__(0, passes[0] + 1), checked(*a, **k))[1]
    t1 = time.perf_counter()
    first = tr.trace(text, max_len=n)
    t2 = time.perf_counter()
    out["first_trace_passes"] = passes[0]
    while any(t.name == "atlas-draft" for t in threading.enumerate()):
        time.sleep(0.05)  # (a draft that cannot be built leaves None when its thread ends)
    out["draft_ready_after_first_trace_s"] = time.perf_counter() - t2
    plain = Translator(tr.model, tr.src_vocab, tr.tgt_vocab, pieces=tr.pieces, draft=False, languages=tr.languages)
    runs = {"drafted": lambda: tr.trace(text, max_len=n), "unaided": lambda: plain.trace(text, max_len=n),
            "output_forced": lambda: tr.trace(text, max_len=n, prefix=first.raw_tokens),
            "untraced": lambda: tr.translate(text, max_len=n)}
    times, rounds = {k: [] for k in runs}, {k: [] for k in runs}
    for _ in range(repeats):
        for kind, run in runs.items():
            passes[0], t = 0, time.perf_counter()
            got = run()
            times[kind].append(time.perf_counter() - t)
            rounds[kind].append(passes[0])
            assert got.raw_tokens == first.raw_tokens, "the draft only guesses: the tokens must not change"
    from model.analysis.contributions import contributions  # value norms and ALTI+ along the same translation
    forced = first.raw_tokens + ([tr.tgt_vocab.token("eos")] if first.finished else [])
    times["contributions"] = timed(lambda: contributions(tr, text, forced), repeats, warmup=1)
    w = tr.model.generator.proj.weight.detach()  # (V, d): what every decoding step reads whole
    x, linear = torch.randn(1, w.shape[1]), torch.nn.functional.linear
    xb, wb = x.bfloat16(), w.bfloat16()
    products = {"float32": lambda: linear(x, w), "bfloat16": lambda: linear(xb, wb)} | (
        {"int8": lambda: tr.draft.generator.proj(x)} if tr.draft is not None else {})
    with torch.inference_mode():
        gen = {k: statistics.median(timed(f, 20)) for k, f in products.items()}
    return out | {"sentence": text, "source_ids": len(first.source.ids), "finished": first.finished,
                  "output_tokens": len(first.raw_tokens) - len(tr.start_prefix), "first_trace_s": t2 - t1,
                  "steady_s": times, "traced_passes": rounds, "generator_row_s": gen, "rss_mb_after": mem(),
                  "peak_mb_after": mem("VmHWM")}


def families_main(args) -> int:
    """Each shape built in a temporary folder and loaded --load-repeats times, a fresh process each, the first with
    the folder's files out of the page cache (read from the disk); the last load traces (probe)."""
    names, result = args.families.split(","), "marian" if args.opus_size else args.results or "families"
    base, rows, out, checks, limit = Path(tempfile.mkdtemp()), {}, [], {}, FAMILY_TARGETS
    try:
        for name in names:
            folder, t0, runs = base / name, time.perf_counter(), []
            params, built = shapes.build_shape(folder, name), time.perf_counter() - t0
            for i in range(args.load_repeats):
                os.sync()
                for f in folder.iterdir() if i == 0 else []:
                    with open(f, "rb") as fh:
                        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                runs.append(common.child_json([sys.executable, str(Path(__file__).resolve()), "--probe", str(folder),
                                               "--repeats", str(args.repeats), "--tokens",
                                               str(TOKENS * (i == args.load_repeats - 1))]))
                print(f"{name}: load {i + 1}: {runs[-1]['load_s']:.2f} s", flush=True)
            last, warm = runs[-1], [x["load_s"] for x in runs[1:]] or [math.nan]
            med, rss = {k: statistics.median(v) for k, v in last["steady_s"].items()}, max(x["rss_mb"] for x in runs)
            ratio = {"contributions_x": med["contributions"] / med["drafted"]} if "contributions" in med else {}
            weights = (folder / "model.safetensors").stat().st_size / 2**20
            rows[name] = {"parameters": params, "weights_mb": weights, "built_s": built, "runs": runs, "summary": (
                sm := {"load_cold_s": runs[0]["load_s"], "load_warm_median_s": statistics.median(warm), "rss_mb": rss,
                       "rss_over_weights": rss / weights, "first_trace_s": last["first_trace_s"],
                       "drafted_passes": statistics.median(last["traced_passes"]["drafted"])} | {
                    f"{k}_s": v for k, v in med.items()} | ratio)}
            checks[name] = {"load": verdict(max(sm["load_cold_s"], sm["load_warm_median_s"]), limit["load_s"]),
                            "memory": verdict(sm["rss_over_weights"], limit["rss_over_weights"])} | {
                k: verdict(sm[f"{k}_s"], limit["trace_s"][name]) for k in ("first_trace", "drafted")} | (
                {"contributions": verdict(sm["contributions_x"], 3.0)} if "contributions" in med else {})
            out.append([name, f"{params / 1e6:.0f}M", round(weights), "{load_cold_s:.1f} / {load_warm_median_s:.1f}"
                        .format(**sm), f"{rss:.0f} ({rss / weights:.2f}x)",
                        f"{sm['first_trace_s']:.2f} ({last['first_trace_passes']})",
                        f"{med['drafted']:.2f} ({sm['drafted_passes']:g})", *(f"{med[k]:.2f}" for k in (
                            "unaided", "output_forced", "untraced")), limit["trace_s"][name], last["output_tokens"],
                        " ".join(checks[name].values())])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(table(out, ["shape", "params", "weights MB", "load cold / warm s", "RSS MB (x weights)",
                      "1st trace s (passes)", "drafted s (passes)", "unaided s", "one pass s", "untraced s",
                      "target s", "out", "load memory 1st drafted"]))
    write_results(result, {
        "what": "published shapes, random weights: loads, memory, a 20-piece sentence traced for 20 tokens",
        "threads": 1, "configs": {n: shapes.HF_SHAPES.get(n, shapes.OPUS_SHAPE) for n in rows}, "shapes": rows,
        "targets": FAMILY_TARGETS, "checks": checks})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the app runs 1 per request)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per length (default 30); worker processes per variant (5); traces (3)")
    ap.add_argument("--load-repeats", type=int, default=None, help="loads (default 10; --families: 3)")
    ap.add_argument("--ops", nargs="+", choices=OPS + ["all"], help="time these analyses (see above)")
    ap.add_argument("--variants", nargs="+", help="NAME=DIR or NAME=COMMIT (default this=.); implies --ops all")
    ap.add_argument("--inner", type=int, default=5, help="timed runs of each op per worker")
    ap.add_argument("--sentences-k", type=int, default=64, help="val pairs of the head report")
    ap.add_argument("--pruning-limit", type=int, default=16, help="sentences of the head report's pruning curve")
    ap.add_argument("--data-dir", default=str((ROOT / ".." / "shared" / "data" / "multi30k").resolve()),
                    help="folder of Multi30k's val.de.gz and val.en.gz (for head_report)")
    ap.add_argument("--results", help="result file name (default: ops of --ops, families of --families)")
    ap.add_argument("--opus-size", action="store_true", help="--families opus-mt-de-en, written to marian.json")
    ap.add_argument("--families", help=f"published shapes with random weights, e.g. {','.join(shapes.HF_SHAPES)}")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant-root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if (args.ops and "all" in args.ops) or (args.variants and not args.ops):
        args.ops = OPS
    args.variants = args.variants or ["this=."]
    args.families = "opus-mt-de-en" if args.opus_size else args.families
    if args.families and (unknown := sorted(set(args.families.split(",")) - set(shapes.SHAPES))):
        ap.error(f"unknown shapes {unknown}; known: {', '.join(shapes.SHAPES)}")
    args.repeats = args.repeats or (3 if args.families or args.probe else 5 if args.ops else 30)
    args.load_repeats = args.load_repeats or (3 if args.families else 10)
    if args.probe:
        print(json.dumps(probe(Path(args.probe), args.tokens, args.repeats)))
        return 0
    return (worker if args.worker else families_main if args.families else ops_main if args.ops else lengths_main)(args)


if __name__ == "__main__":
    sys.exit(main())
