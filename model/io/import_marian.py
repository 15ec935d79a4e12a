"""Import a Marian translation model (the opus-mt family, as ported to `transformers`) into our checkpoint format.

    python -m model.import_marian Helsinki-NLP/opus-mt-de-en --out checkpoints/opus-mt-de-en
    python -m model.import_marian path/to/folder --out checkpoints/NAME [--force]

SRC is a folder written by MarianMTModel.save_pretrained + MarianTokenizer.save_pretrained, or a hub id
(downloaded only when online). The result is an ordinary checkpoint folder (model.safetensors,
config.json, vocab.src.json, vocab.tgt.json, metrics.json) plus source.spm and target.spm, and the app
opens it like any other. Marian is the paper's Transformer with post-norm, sines-then-cosines positions
and a final logits bias; a config this code cannot run exactly (pre-norm, learned positions, another
activation, ...) is refused with one line that names the field. Before writing, the imported model is
run beside the original on one sentence and must agree.

This is `python -m model.import_hf` for Marian models alone (model/io/import_hf.py does the work, with the Marian
family's checks of model/io/hf_families.py); its options are import_hf's, without --prefix (T5's).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.io.cli import command
from model.io.import_hf import ImportRefused, import_hf, summary


def import_marian(src: str, out: str | Path, force: bool = False, src_lang: str | None = None,
                  tgt_lang: str | None = None) -> dict:
    """Import the Marian model SRC into the checkpoint folder `out`; returns the model-card entry written to
    metrics.json. ImportRefused for any other model."""
    return import_hf(src, out, force, src_lang, tgt_lang, family="marian")


@command(ImportRefused)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="folder from save_pretrained, or a hub id such as Helsinki-NLP/opus-mt-de-en")
    ap.add_argument("--out", required=True, help="checkpoint folder to write, e.g. checkpoints/opus-mt-de-en")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--src-lang", help="source language code (default: the tokenizer's, or from the name)")
    ap.add_argument("--tgt-lang", help="target language code (default: the tokenizer's, or from the name)")
    args = ap.parse_args(argv)
    card = import_marian(args.src, args.out, args.force, args.src_lang, args.tgt_lang)
    print(summary(args.out, card, family=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
