"""python -m model.patch: head knockout, activation patching and the logit lens, as JSON (docs/patch-format.md).

    python -m model.patch --checkpoint DIR --clean "…" --corrupt "…" [--out FILE.json] [--step N]

The measures live in model/analysis/patch.py and lens.py; this module reads the command line and writes their
results, so neither analysis module imports the other's caller.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from model.analysis.lens import logit_lens_ids
from model.analysis.patch import knockout, patching
from model.io.cli import add_common_options, command, load_translator, set_threads, write_out

SCHEMA = "attention-atlas-patch/1"


def _num(x, digits: int = 6):
    """Nested lists of floats rounded to `digits`; NaN becomes null (JSON has no NaN)."""
    a = np.round(np.asarray(x, dtype=np.float64), digits)
    return np.where(np.isnan(a), None, a.astype(object)).tolist()


def report(translator, clean: str, corrupt: str, step: int | None = None, name: str = "", k: int = 5) -> dict:
    """The command line's JSON (docs/patch-format.md): knockout on the clean sentence, patching clean -> corrupt
    and the logit lens, all teacher-forced on the clean sentence's greedy translation (with its end token when it
    finished), at every step or at 1-based `step`. ValueError for an empty sentence, a length mismatch or a step
    out of range."""
    out = translator.translate(clean)
    if not out.source.tokens:
        raise ValueError("the clean sentence has no tokens the model reads")
    tv = translator.tgt_vocab
    tgt = out.raw_tokens + ([tv.token("eos")] if out.finished else [])
    if step is not None and not 1 <= step <= len(tgt):
        raise ValueError(f"--step must be 1..{len(tgt)} for this translation ({' '.join(tgt)})")
    positions = None if step is None else [step - 1]
    t0 = time.perf_counter()
    ko = knockout(translator, clean, tgt, positions)
    t1 = time.perf_counter()
    pa = patching(translator, clean, corrupt, tgt, positions)
    t2 = time.perf_counter()
    lens = logit_lens_ids(translator.model, out.source.ids, tv.encode(tgt), tv.bos_idx, ko.positions, k)
    t3 = time.perf_counter()
    cfg = translator.cfg
    return {
        "schema": SCHEMA,
        "model": {"name": name, "d_model": cfg.d_model, "n_heads": cfg.n_heads,
                  "n_encoder_layers": cfg.n_encoder_layers, "n_decoder_layers": cfg.n_decoder_layers},
        "clean": {"text": clean, "src_tokens": pa.src_tokens},
        "corrupt": {"text": corrupt, "src_tokens": pa.corrupt_tokens},
        "translation": out.text,
        "tgt_tokens": tgt,
        "decoder_input": [tv.token("bos")] + tgt[:-1],
        "steps": [p + 1 for p in ko.positions],
        "knockout": {"log_probs": _num(ko.log_probs), "delta": {kind: _num(v) for kind, v in ko.delta.items()}},
        "patching": {"clean_log_probs": _num(pa.clean_log_probs), "corrupt_log_probs": _num(pa.corrupt_log_probs),
                     "min_gap": pa.min_gap, "effect": {c: _num(v) for c, v in pa.effect.items()},
                     "log_probs": {c: _num(v) for c, v in pa.log_probs.items()}},
        "logit_lens": [
            {"step": p + 1, "chosen": tgt[p], "layers": [
                {"layer": l + 1, "chosen_prob": _num(lens["chosen_probs"][n, l]),
                 "chosen_rank": int(lens["chosen_ranks"][n, l]),
                 "top": [{"token": tv.itos[int(i)], "id": int(i), "prob": _num(q)}
                         for i, q in zip(lens["top_ids"][n, l], lens["top_probs"][n, l])]}
                for l in range(cfg.n_decoder_layers)]}
            for n, p in enumerate(ko.positions)],
        "seconds": {"knockout": round(t1 - t0, 4), "patching": round(t2 - t1, 4), "logit_lens": round(t3 - t2, 4)},
    }


@command(ValueError)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m model.patch", description=__doc__.split("\n\n")[0])
    add_common_options(ap, threads=1)
    ap.add_argument("--clean", required=True, help="the clean source sentence (its translation is scored)")
    ap.add_argument("--corrupt", required=True, help="the corrupted source sentence, as many tokens as --clean")
    ap.add_argument("--out", help="write the JSON here (default: standard output)")
    ap.add_argument("--step", type=int, help="report only this output step (1-based; default: every step)")
    ap.add_argument("--top-k", type=int, default=5, help="logit-lens candidates per layer (default 5)")
    args = ap.parse_args(argv)
    if args.top_k < 1:
        ap.error("--top-k must be at least 1")
    set_threads(args.threads)
    translator = load_translator(args.checkpoint)
    result = report(translator, args.clean, args.corrupt, args.step, Path(args.checkpoint).name, args.top_k)
    text = json.dumps(result, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
    write_out(text, args.out, say=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
