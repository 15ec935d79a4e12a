"""How fast is the model: one translation traced and not, the analyses, an opus-mt-size model?

    python benchmarks/bench_model.py [--checkpoint DIR] [--repeats 30] [--load-repeats 10]        (model.json)
    python benchmarks/bench_model.py --ops all|translate trace knockout patching lens attribution head_report
        [--variants NAME=COMMIT|DIR ...] [--repeats 5] [--inner 5] [--sentences-k 64] [--pruning-limit 16]  (ops.json)
    python benchmarks/bench_model.py --opus-size [--repeats 10]                                   (marian.json)

Default: for sources of 5-80 tokens, Translator.trace (greedy, every step recorded, with the int8 draft where the
model gets one), the same again (NumPy), the trace without the draft, Translator.translate, and torch.nn.Transformer
of the same size (random weights) decoding as many steps without a key/value cache; the checkpoint's load; the model
built with and without its random initialisation, interleaved. --ops: each op on one caption sentence, in a worker
process per variant (NAME=DIR, or NAME=COMMIT in a temporary worktree; default this=.) and repeat, the order
reversed every other repeat; a worker imports its checkout's own `model`. A variant named twice (`after=. again=.`)
is the control. head_report runs on the first --sentences-k Multi30k val pairs; its stages are rows too. Limits
against the first variant: translate 1.05x, the rest 1.10x. --opus-size: a model shaped like opus-mt-de-en (6+6
layers, d_model 512, 58,000 pieces, Marian's config) with random weights, loaded as the app does: load, the draft's
build, the trace with and without the draft, untraced greedy (20 pieces in, 20 tokens out), one generator row
product in float32, bfloat16 and int8; target traced <= 300 ms. One torch thread (--threads), as the app.
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from common import ROOT, distinct_sentences, open_translator, shown_path, summary, table, verdict, write_results

LENGTHS = [5, 10, 20, 40, 80]
TARGETS = {"traced_20_tokens_median_ms": 30.0, "traced_over_untraced": 1.5, "load_median_s": 0.5,
           "opus_traced_median_ms": 300.0}
OPS = ["translate", "trace", "knockout", "patching", "lens", "attribution", "head_report"]
LIMITS = {"translate": 1.05, **{op: 1.10 for op in OPS[1:5] + ["head_report"]}}
STAGES = ["measures_importance", "ablation", "pruning"]
SENTENCE = "Ein Mann mit einem roten Hut spielt Gitarre im Park."
CORRUPT = ["Eine Frau mit einem blauen Hut spielt Gitarre im Park.", "Ein Mann mit einem blauen Hut spielt Gitarre im "
           "Park.", "Ein Kind mit einem roten Hut spielt Gitarre im Park.", "Ein Mann mit einem roten Hut spielt "
           "Gitarre im Haus."]  # the first with as many source tokens as SENTENCE is the corrupted run
OPUS = dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, max_len=512)
OPUS_VOCAB, OPUS_TOKENS = 58_000, 20


def timed(fn, repeats: int, warmup: int = 3) -> list[float]:
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

    warnings.filterwarnings("ignore", message="enable_nested_tensor is True")  # pre-norm has no nested-tensor path

    class Reference(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.src_embed, self.tgt_embed = nn.Embedding(cfg.src_vocab_size, d), nn.Embedding(cfg.tgt_vocab_size, d)
            pos, div = torch.arange(cfg.max_len)[:, None], torch.exp(torch.arange(0, d, 2) * (-math.log(1e4) / d))
            pe = torch.zeros(cfg.max_len, d)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            self.register_buffer("pe", pe)  # (max_len, d)
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
    out = tr.translate(text)
    steps = len(out.raw_tokens) + (1 if out.finished else 0)  # decoder passes, the <eos> step included
    src = torch.tensor([tr.prepare(text).ids])
    row = {"source_tokens": n, "text": text, "decoder_steps": steps,
           "traced": summary(timed(lambda: tr.trace(text), repeats)),
           "traced_numpy": summary(timed(lambda: tr.trace(text), repeats)),
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
        "traced", "traced_numpy", "traced_unaided", "untraced", "reference_nn_transformer")]
        + [f"{r['traced_over_untraced']:.2f}x"] for r in rows],
        ["src tok", "steps", "traced ms", "+numpy", "no draft", "untraced", "nn.Transformer", "traced/untr"]))
    at20 = next(r for r in rows if r["source_tokens"] == 20)
    worst = max(r["traced_over_untraced"] for r in rows)
    checks = [("20-token traced, median", f"{at20['traced']['median_ms']:.1f} ms", "<= 30 ms",
               verdict(at20["traced"]["median_ms"], TARGETS["traced_20_tokens_median_ms"])),
              ("traced / untraced, worst length", f"{worst:.2f}x", "<= 1.5x", verdict(worst, 1.5)),
              ("checkpoint load, median", f"{load['median_ms'] / 1000:.3f} s", "<= 0.5 s",
               verdict(load["median_ms"] / 1000, TARGETS["load_median_s"]))]
    checks.append(("model built with / without its initialisation", f"{build['init']['median_ms']:.0f} / "
                   f"{build['no_init']['median_ms']:.0f} ms", "", ""))
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    write_results("model", {
        "benchmark": "model", "checkpoint": shown_path(args.checkpoint), "config": tr.cfg.to_dict(),
        "torch_threads": args.threads, "repeats": args.repeats, "warmup": 3, "lengths": rows,
        "load": load, "build": build, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks]})
    return 0


def worker_ops(tr, args) -> dict:
    """op name -> a callable of no arguments that runs it once (the head report's returns its stages' seconds)."""
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
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the variant's own folder
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit(f"the worker for {root} failed (exit {run.returncode})")
    return json.loads(run.stdout.strip().splitlines()[-1])


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
                 + [f"{LIMITS[row]:.2f}" if row in LIMITS else ""] for row in rows],
                ["op"] + [f"{n} ms" for n in names] + [f"{n}/{first}" for n in names[1:]] + ["limit"]))
    write_results(args.results, {
        "command": "python benchmarks/bench_model.py " + " ".join(sys.argv[1:]),
        "settings": {k: getattr(args, k) for k in ("repeats", "inner", "sentences_k", "pruning_limit", "ops",
                                                     "threads")} | {"checkpoint": shown_path(args.checkpoint)},
        "variants": shown, "median_ms": medians, "limits": LIMITS, f"ratio_to_{first}": ratios,
        "samples_ms": {n: {row: [x * 1000 for x in v] for row, v in samples[n].items()} for n in names}})
    return 0


def build_folder(folder: Path) -> None:
    """An opus-mt-size checkpoint folder with random weights and SentencePiece models trained on captions."""
    import sentencepiece as spm
    import torch

    from model.io.checkpoint import SRC_SPM, TGT_SPM, save_checkpoint
    from model.nn.config import ModelConfig
    from model.nn.transformer import EncoderDecoder
    from model.text.vocab import Vocab

    folder.mkdir(parents=True, exist_ok=True)
    for name in (SRC_SPM, TGT_SPM):  # German both sides: only the shapes and the work matter here
        prefix = folder / name.removesuffix(".spm")
        spm.SentencePieceTrainer.train(sentence_iterator=iter(distinct_sentences(3000)), model_prefix=str(prefix),
                                       vocab_size=2000, hard_vocab_limit=False, minloglevel=2)
        prefix.with_suffix(".model").rename(folder / name)
        prefix.with_suffix(".vocab").unlink()
    sp = spm.SentencePieceProcessor(model_file=str(folder / SRC_SPM))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    itos = ["</s>", "<unk>"] + pieces + [f"▁filler{i}" for i in range(OPUS_VOCAB - len(pieces) - 3)] + ["<pad>"]
    vocab = Vocab(itos, {"unk": "<unk>", "pad": "<pad>", "bos": "<pad>", "eos": "</s>"})  # Marian's layout
    pad = len(itos) - 1
    cfg = ModelConfig(OPUS_VOCAB, OPUS_VOCAB, **OPUS, dropout=0.1, attn_dropout=0.0, norm_first=False,
                      tie_weights=True, pad_idx=pad, activation="swish", pe_layout="sin_then_cos",
                      scale_embedding=True, share_embeddings=True, final_logits_bias=True, decoder_start_idx=pad,
                      eos_idx=0, src_lang="de", tgt_lang="en", tokenizer="sentencepiece")
    torch.manual_seed(0)
    save_checkpoint(folder, EncoderDecoder(cfg), vocab, vocab, {"note": "random weights, opus-mt size (benchmark)"})


def opus_main(args) -> int:
    import torch

    from model.inference.translator import Translator

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench-opus-"))
    try:
        build_folder(tmp / "opus-mt-size")
        loads, drafts = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            tr = Translator.from_checkpoint(tmp / "opus-mt-size")  # as the app loads it
            loads.append(time.perf_counter() - t0)
            tr._trace_draft()  # what the app's first trace does: start building the draft in the background
            while tr.draft is None and time.perf_counter() - t0 < 60:
                time.sleep(0.01)
            drafts.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tr.draft is None:
        print("this torch has no int8 engine: no draft", file=sys.stderr)
        return 1
    unaided = Translator(tr.model, tr.src_vocab, tr.tgt_vocab, tr.metrics, pieces=tr.pieces, draft=False)
    text = ""  # a caption-like source of exactly OPUS_TOKENS pieces: words added while they fit
    for word in " ".join(distinct_sentences(40)).split():
        if len(tr.source_tokens(longer := f"{text} {word}".strip())) <= OPUS_TOKENS:
            text = longer
        if len(tr.source_tokens(text)) == OPUS_TOKENS:
            break
    for s in [text] + distinct_sentences(10):  # the draft only guesses: the tokens must not change
        assert tr.trace(s, max_len=OPUS_TOKENS).raw_tokens == unaided.trace(s, max_len=OPUS_TOKENS).raw_tokens, s
    rows = {"traced": timed(lambda: tr.trace(text, max_len=OPUS_TOKENS), args.repeats, 2),
            "traced unaided": timed(lambda: unaided.trace(text, max_len=OPUS_TOKENS), args.repeats, 2),
            "traced+numpy": timed(lambda: tr.trace(text, max_len=OPUS_TOKENS), args.repeats, 2),
            "untraced": timed(lambda: tr.translate(text, max_len=OPUS_TOKENS), args.repeats, 2)}
    w = tr.model.generator.proj.weight.detach()  # (V, d): what every decoding step reads whole
    x = torch.randn(1, w.shape[1])
    wb, xb, linear = w.bfloat16(), x.bfloat16(), torch.nn.functional.linear
    with torch.inference_mode():
        gen = {"float32": lambda: linear(x, w), "bfloat16": lambda: linear(xb, wb),
               "int8_draft": lambda: tr.draft.generator.proj(x)}
        gen = {k: summary(timed(f, 40)) for k, f in gen.items()}
    rows = {k: summary(v) for k, v in rows.items()}
    print(table([[k, v["median_ms"], v["p10_ms"], v["p90_ms"]] for k, v in (rows | gen).items()],
                ["(generator: one row product)", "median ms", "p10", "p90"]))
    write_results("marian", {
        "what": "opus-mt-size model (random weights) in our format: one 20-piece sentence, 20 output tokens",
        "command": "python benchmarks/bench_model.py " + " ".join(sys.argv[1:]), "threads": args.threads,
        "model": {**OPUS, "vocabulary": OPUS_VOCAB, "parameters": sum(tr.parameter_counts().values())},
        "sentence": text, "timings": rows, "generator_row_product": gen, "load_s": summary(loads),
        "load_until_draft_ready_s": summary(drafts), "drafted_equals_unaided_on": 11,
        "verdict": {"traced_median_ms": verdict(rows["traced"]["median_ms"], TARGETS["opus_traced_median_ms"])}})
    print(f"load {summary(loads)['median_ms'] / 1000:.2f} s, draft ready {summary(drafts)['median_ms'] / 1000:.2f} s; "
          f"traced {rows['traced']['median_ms']:.0f} ms (target <= 300 ms)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the app runs 1 per request)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per length (default 30); worker processes per variant (5); opus runs (10)")
    ap.add_argument("--load-repeats", type=int, default=10)
    ap.add_argument("--ops", nargs="+", choices=OPS + ["all"], help="time these analyses (see above)")
    ap.add_argument("--variants", nargs="+", help="NAME=DIR or NAME=COMMIT (default this=.); implies --ops all")
    ap.add_argument("--inner", type=int, default=5, help="timed runs of each op per worker")
    ap.add_argument("--sentences-k", type=int, default=64, help="val pairs of the head report")
    ap.add_argument("--pruning-limit", type=int, default=16, help="sentences of the head report's pruning curve")
    ap.add_argument("--data-dir", default=str((ROOT / ".." / "shared" / "data" / "multi30k").resolve()),
                    help="folder of Multi30k's val.de.gz and val.en.gz (for head_report)")
    ap.add_argument("--results", default="ops", help="result file name of --ops")
    ap.add_argument("--opus-size", action="store_true", help="an opus-mt-size model with random weights")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant-root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if (args.ops and "all" in args.ops) or (args.variants and not args.ops):
        args.ops = OPS
    args.variants = args.variants or ["this=."]
    args.repeats = args.repeats or (10 if args.opus_size else 5 if args.ops else 30)
    return (worker if args.worker else opus_main if args.opus_size else ops_main if args.ops else lengths_main)(args)


if __name__ == "__main__":
    sys.exit(main())
