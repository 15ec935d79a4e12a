"""How fast is one traced translation, and what does the trace cost?

    python benchmarks/bench_model.py [--checkpoint checkpoints/multi30k-de-en] [--repeats 30]

For source sentences of 5, 10, 20, 40 and 80 tokens it times
  traced     Translator.trace(text): tokenize, encode, greedy decoding with every step recorded, full trace
  +numpy     the same call again: the trace comes back as NumPy (what the app caches), so it equals traced
  untraced   Translator.translate(text): greedy (beam 1), fused attention, no trace
  reference  torch.nn.Transformer of the same size (random weights, embeddings + generator), greedy decoding
             exactly as many steps as the untraced run made, no trace: what plain PyTorch costs (it has no
             key/value cache, so it recomputes the whole prefix at every step)
and the checkpoint load time (Translator.from_checkpoint, median of 10), and building the model with and without its
random initialisation (a load skips it: the weights overwrite it), interleaved. Writes benchmarks/results/model.json.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

from common import (
    ROOT,
    machine,
    open_translator,
    sentence_of_length,
    shown_path,
    summary,
    table,
    verdict,
    write_results,
)

LENGTHS = [5, 10, 20, 40, 80]
THREADS = 1  # as the app: one torch thread per request (views/state.py, ATLAS_TORCH_THREADS)
TARGETS = {"traced_20_tokens_median_ms": 30.0, "traced_over_untraced": 1.5, "load_median_s": 0.5}


def timed(fn, repeats: int, warmup: int = 3) -> tuple[list[float], object]:
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def builds(cfg, repeats: int) -> dict:
    """Building the model with its random initialisation (a fresh or untrained model) and without it (a checkpoint's
    load, whose weights overwrite it), interleaved so that the machine's drift falls on both alike."""
    from model.nn.transformer import EncoderDecoder

    times = {"init": [], "no_init": []}
    for i in range(repeats + 1):
        for init in (True, False) if i % 2 == 0 else (False, True):
            t0 = time.perf_counter()
            EncoderDecoder(cfg, init=init)
            if i:  # the first round warms up
                times["init" if init else "no_init"].append(time.perf_counter() - t0)
    return {k: summary(v) for k, v in times.items()}


def reference_model(cfg):
    """torch.nn.Transformer with our dimensions: embeddings (scaled, + sinusoidal positions) and a generator."""
    import warnings

    import torch
    from torch import nn

    warnings.filterwarnings("ignore", message="enable_nested_tensor is True")  # pre-norm has no nested-tensor path

    class Reference(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.src_embed = nn.Embedding(cfg.src_vocab_size, d)
            self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, d)
            pos = torch.arange(cfg.max_len)[:, None]
            div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
            pe = torch.zeros(cfg.max_len, d)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            self.register_buffer("pe", pe)
            self.transformer = nn.Transformer(d, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff,
                                              dropout=cfg.dropout, batch_first=True, norm_first=cfg.norm_first)
            self.generator = nn.Linear(d, cfg.tgt_vocab_size)
            self.scale = math.sqrt(d)

        def embed(self, lut, ids):  # (b, n) -> (b, n, d)
            return lut(ids) * self.scale + self.pe[: ids.shape[1]]

        @torch.inference_mode()
        def greedy(self, src, bos: int, steps: int) -> list[int]:
            """Exactly `steps` decoder passes (no early stop), like an untraced greedy run of that length."""
            memory = self.transformer.encoder(self.embed(self.src_embed, src))  # (1, s, d)
            ys = torch.tensor([[bos]])
            for _ in range(steps):
                mask = nn.Transformer.generate_square_subsequent_mask(ys.shape[1])
                x = self.transformer.decoder(self.embed(self.tgt_embed, ys), memory, tgt_mask=mask, tgt_is_causal=True)
                nxt = self.generator(x[:, -1]).log_softmax(-1).argmax(-1)  # (1,)
                ys = torch.cat([ys, nxt[:, None]], dim=1)
            return ys[0, 1:].tolist()

    torch.manual_seed(0)
    return Reference().eval()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--load-repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, default=THREADS,
                    help="torch.set_num_threads (default 2; on a machine that is busy with something else, 2 threads "
                         "can be many times slower than 1)")
    args = ap.parse_args()

    import torch

    from model.inference.translator import Translator

    translator = open_translator(args.checkpoint, args.threads)
    if translator is None:
        return 2
    cfg = translator.cfg
    ref = reference_model(cfg)
    tok = lambda text: translator.prepare(text, max_tokens=10**6).tokens  # noqa: E731 - the app's own tokenizer
    print(f"checkpoint {args.checkpoint}: d_model {cfg.d_model}, {cfg.n_heads} heads, "
          f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_ff {cfg.d_ff}; "
          f"torch {torch.__version__}, torch.set_num_threads({args.threads}), "
          f"{args.repeats} repeats after 3 warm-up runs")

    rows, results = [], []
    for n in LENGTHS:
        text = sentence_of_length(n, tok)
        traced, tr = timed(lambda: translator.trace(text), args.repeats)
        detached, _ = timed(lambda: translator.trace(text), args.repeats)
        untraced, un = timed(lambda: translator.translate(text), args.repeats)
        steps = len(un.raw_tokens) + (1 if un.finished else 0)  # decoder passes, the <eos> step included
        src = torch.tensor([translator.prepare(text).ids])
        reference, _ = timed(lambda: ref.greedy(src, translator.tgt_vocab.bos_idx, steps), args.repeats)
        s_tr, s_de, s_un, s_ref = summary(traced), summary(detached), summary(untraced), summary(reference)
        ratio = s_tr["median_ms"] / s_un["median_ms"]
        results.append({"source_tokens": n, "text": text, "decoder_steps": steps,
                        "traced_output_tokens": len(tr.raw_tokens), "traced": s_tr, "traced_numpy": s_de,
                        "untraced": s_un, "reference_nn_transformer": s_ref, "traced_over_untraced": ratio,
                        "untraced_over_reference": s_un["median_ms"] / s_ref["median_ms"]})
        rows.append([n, steps, s_tr["median_ms"], s_tr["p10_ms"], s_tr["p90_ms"], s_de["median_ms"], s_un["median_ms"],
                     s_un["p10_ms"], s_un["p90_ms"], f"{ratio:.2f}x", s_ref["median_ms"],
                     f"{s_un['median_ms'] / s_ref['median_ms']:.2f}x"])
        print(f"  {n:>2} tokens done", flush=True)

    loads, _ = timed(lambda: Translator.from_checkpoint(args.checkpoint), args.load_repeats, warmup=1)
    load = summary(loads)
    build = builds(cfg, args.load_repeats)

    print()
    print(table(rows, ["src tok", "steps", "traced ms", "p10", "p90", "+numpy ms", "untraced ms", "p10", "p90",
                       "traced/untr", "nn.Transformer ms", "untr/ref"]))
    at20 = next(r for r in results if r["source_tokens"] == 20)
    ratio_20 = at20["traced_over_untraced"]
    worst_ratio = max(r["traced_over_untraced"] for r in results)
    checks = [
        ("20-token traced, median", f"{at20['traced']['median_ms']:.1f} ms", "<= 30 ms",
         verdict(at20["traced"]["median_ms"], TARGETS["traced_20_tokens_median_ms"])),
        ("traced / untraced at 20 tokens", f"{ratio_20:.2f}x", "<= 1.5x",
         verdict(ratio_20, TARGETS["traced_over_untraced"])),
        ("traced / untraced, worst length", f"{worst_ratio:.2f}x", "<= 1.5x",
         verdict(worst_ratio, TARGETS["traced_over_untraced"])),
        ("checkpoint load, median of %d" % args.load_repeats, f"{load['median_ms'] / 1000:.3f} s", "<= 0.5 s",
         verdict(load["median_ms"] / 1000, TARGETS["load_median_s"])),
    ]
    print()
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    path = write_results("model", {
        "benchmark": "model", "checkpoint": shown_path(args.checkpoint), "config": cfg.to_dict(),
        "torch": torch.__version__, "torch_threads": args.threads, "repeats": args.repeats, "warmup": 3,
        "machine": machine(), "lengths": results, "load": load, "build": build, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks],
        "reference_note": "torch.nn.Transformer, same d_model/heads/layers/d_ff, random weights, embeddings and "
                          "generator, greedy for the untraced run's number of decoder steps; nn.Transformer has "
                          "no key/value cache, so each step recomputes the whole prefix",
    })
    print(f"building the model, median of {args.load_repeats}, interleaved: {build['init']['median_ms']:.0f} ms with "
          f"its random initialisation, {build['no_init']['median_ms']:.0f} ms without (as a checkpoint's load)")
    print(f"\nwrote {path.relative_to(ROOT)}; median load {load['median_ms']:.0f} ms, "
          f"spread p10-p90 of the 20-token traced run {at20['traced']['p10_ms']:.1f}-{at20['traced']['p90_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
