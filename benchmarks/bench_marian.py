"""How fast is a fully traced translation with a model of opus-mt size?

    python benchmarks/bench_marian.py [--repeats 10] [--threads 1]

Builds, with random weights, a model shaped like Helsinki-NLP/opus-mt-de-en in our checkpoint format: 6+6 layers,
8 heads, d_model 512, d_ff 2048, one shared vocabulary of 58,000 pieces, tied generator, Marian's config
(post-norm, swish, sines-then-cosines positions, start from <pad>, logits bias), SentencePiece models trained
here on caption sentences (the vocabulary is filled up to 58,000 entries). It is saved to a temporary folder
and loaded back as the app loads it, then it times, on one torch thread as the app uses per request:
  traced     Translator.trace(text): tokenize, encode, greedy decoding with every step recorded, the full trace;
             the int8 draft (model/inference/draft.py) guesses the tokens, the model's traced pass checks them
  unaided    the same without the draft: float32 greedy steps, then the traced pass
  +numpy     the same call again: the trace comes back as NumPy (what the app caches), so it equals traced
  untraced   Translator.translate(text): greedy, fused attention, no trace
  generator  one decoding step's largest read: a (1, 512) input times the (58000, 512) generator weight, in
             float32 and in bfloat16 (fastest and median of 40): the memory-bandwidth floor of a step, and the
             draft's int8 generator
for a source of 20 pieces and an output of 20 tokens (random weights never say </s>; max_len fixes the length a
real translation of that sentence would have). Target: traced ≤ 300 ms. Writes benchmarks/results/marian.json.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import distinct_sentences, machine, summary, table, verdict, write_results

SIZE = dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, max_len=512)
VOCAB = 58_000
SRC_PIECES = OUT_TOKENS = 20
TARGETS = {"traced_median_ms": 300.0}


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
    filler = [f"▁filler{i}" for i in range(VOCAB - len(pieces) - 3)]
    itos = ["</s>", "<unk>"] + pieces + filler + ["<pad>"]  # Marian's layout: </s> 0, <unk> 1, <pad> last
    vocab = Vocab(itos, {"unk": "<unk>", "pad": "<pad>", "bos": "<pad>", "eos": "</s>"})
    pad = len(itos) - 1
    cfg = ModelConfig(VOCAB, VOCAB, **SIZE, dropout=0.1, attn_dropout=0.0, norm_first=False, tie_weights=True,
                      pad_idx=pad, activation="swish", pe_layout="sin_then_cos", scale_embedding=True,
                      share_embeddings=True, final_logits_bias=True, decoder_start_idx=pad, eos_idx=0,
                      src_lang="de", tgt_lang="en", tokenizer="sentencepiece")
    torch.manual_seed(0)
    save_checkpoint(folder, EncoderDecoder(cfg), vocab, vocab, {"note": "random weights, opus-mt size (benchmark)"})


def sentence_of_pieces(n: int, pieces) -> str:
    """A caption-like German sentence of exactly n source pieces (without </s>)."""
    words = " ".join(distinct_sentences(40)).split()
    text = ""
    for w in words:
        longer = (text + " " + w).strip()
        if len(pieces(longer)) <= n:
            text = longer
        if len(pieces(text)) == n:
            return text
    raise RuntimeError(f"no sentence of exactly {n} pieces found")


def count_checking_passes(tr, texts) -> list[int]:
    """Per sentence, how many traced teacher-forced passes a drafted trace ran (1: the draft guessed every token)."""
    from model.inference import decode

    real, count = decode._teacher_forced, []

    def counting(*a):
        count.append(1)
        return real(*a)

    out = []
    decode._teacher_forced = counting
    try:
        for text in texts:
            count.clear()
            tr.trace(text, max_len=OUT_TOKENS)
            out.append(len(count))
    finally:
        decode._teacher_forced = real
    return out


def timed(fn, repeats: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1 per request)")
    args = ap.parse_args(argv)
    import torch

    from model.inference.translator import Translator

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench-marian-"))
    try:
        t0 = time.perf_counter()
        build_folder(tmp / "opus-mt-size")
        build_s = time.perf_counter() - t0
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
    assert tr.draft is not None, "no int8 draft on this machine"
    unaided = Translator(tr.model, tr.src_vocab, tr.tgt_vocab, tr.metrics, pieces=tr.pieces, draft=False)
    params = sum(tr.parameter_counts().values())
    text = sentence_of_pieces(SRC_PIECES, tr.source_tokens)
    check = tr.trace(text, max_len=OUT_TOKENS)
    assert len(check.source.tokens) == SRC_PIECES and len(check.raw_tokens) == OUT_TOKENS, (check.source.tokens,
                                                                                            check.raw_tokens)
    passes = count_checking_passes(tr, [text] + distinct_sentences(20)[:10])
    same = all(tr.trace(s, max_len=OUT_TOKENS).raw_tokens == unaided.trace(s, max_len=OUT_TOKENS).raw_tokens
               for s in [text] + distinct_sentences(20)[:10])
    assert same, "the drafted trace differs from the unaided one"
    rows = {
        "traced": summary(timed(lambda: tr.trace(text, max_len=OUT_TOKENS), args.repeats)),
        "traced unaided": summary(timed(lambda: unaided.trace(text, max_len=OUT_TOKENS), args.repeats)),
        "traced+numpy": summary(timed(lambda: tr.trace(text, max_len=OUT_TOKENS), args.repeats)),
        "untraced": summary(timed(lambda: tr.translate(text, max_len=OUT_TOKENS), args.repeats)),
    }
    w = tr.model.generator.proj.weight.detach()  # (V, d): what every decoding step reads whole
    x = torch.randn(1, w.shape[1])
    wb, xb = w.to(torch.bfloat16), x.to(torch.bfloat16)
    with torch.inference_mode():
        gen = {"float32": summary(timed(lambda: torch.nn.functional.linear(x, w), 40, warmup=3)),
               "bfloat16": summary(timed(lambda: torch.nn.functional.linear(xb, wb), 40, warmup=3)),
               "int8_draft": summary(timed(lambda: tr.draft.generator.proj(x), 40, warmup=3))}
    gen["float32_GB_per_s_at_min"] = round(w.numel() * 4 / (gen["float32"]["min_ms"] / 1000) / 1e9, 1)
    result = {
        "what": "opus-mt-size model (random weights) in our format: one 20-piece sentence, 20 output tokens",
        "command": "python benchmarks/bench_marian.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "model": {**SIZE, "vocabulary": VOCAB, "parameters": params}, "threads": args.threads,
        "sentence": text, "source_pieces": check.source.tokens,
        "timings": rows, "generator_row_product": gen, "load_s": summary(loads),
        "load_until_draft_ready_s": summary(drafts),
        "checking_passes_per_trace": passes, "drafted_equals_unaided_on": 11, "build_s": round(build_s, 1),
        "targets": TARGETS,
        "verdict": {"traced_median_ms": verdict(rows["traced"]["median_ms"], TARGETS["traced_median_ms"])},
        "machine": machine(),
    }
    path = write_results("marian", result)
    print(f"{params:,} parameters; source: {' '.join(check.source.tokens)}")
    print(table([[k, v["median_ms"], v["p10_ms"], v["p90_ms"]] for k, v in rows.items()],
                ["", "median ms", "p10", "p90"]))
    print(f"generator row product: float32 min {gen['float32']['min_ms']:.1f} ms "
          f"({gen['float32_GB_per_s_at_min']} GB/s), bfloat16 min {gen['bfloat16']['min_ms']:.1f} ms, "
          f"int8 (draft) min {gen['int8_draft']['min_ms']:.1f} ms")
    print(f"checking passes per trace (1 = every guess right): {passes}; drafted = unaided on 11 sentences")
    print(f"load (from_checkpoint) median {result['load_s']['median_ms'] / 1000:.2f} s, "
          f"{result['load_until_draft_ready_s']['median_ms'] / 1000:.2f} s until the draft is ready; "
          f"traced {result['verdict']['traced_median_ms']} (target ≤ {TARGETS['traced_median_ms']:.0f} ms); "
          f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
