"""BLEU of a checkpoint on a test set.

    python -m model.evaluate --checkpoint DIR --src F.de --ref F.en [--beam N] [--unk {copy,keep}]

Prints sacreBLEU (cased, detokenized, 13a) with its signature, and the tutorials' metric:
lowercased BLEU on spaCy tokens (sacreBLEU with tokenize='none' on space-joined tokens).
"""
from __future__ import annotations

import argparse
import json
import sys

import sacrebleu

from model.io.cli import Refused, add_common_options, command, load_translator
from model.text.tokenize import tokenize
from model.training.data import DataError, read_lines


def bleu_scores(hyps: list[str], refs: list[str], lang: str = "en") -> dict:
    """sacreBLEU on detokenized text, and lowercased BLEU on spaCy tokens."""
    bleu = sacrebleu.metrics.BLEU()
    cased = bleu.corpus_score(hyps, [refs])
    tok = lambda xs: [" ".join(tokenize(x, lang)).lower() for x in xs]  # noqa: E731
    tut = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    lower = tut.corpus_score(tok(hyps), [tok(refs)])
    return {
        "sacrebleu": round(cased.score, 2),
        "signature": str(bleu.get_signature()),
        "bleu_lower_spacy_tokens": round(lower.score, 2),
    }


@command(DataError)
def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(ap)
    ap.add_argument("--src", required=True, help="source sentences, one per line (plain or .gz)")
    ap.add_argument("--ref", required=True, help="reference translations, one per line (plain or .gz)")
    ap.add_argument("--beam", type=int, default=1, help="beam size; 1 = greedy")
    ap.add_argument("--unk", choices=("copy", "keep"), default="copy",
                    help="copy: fill each output <unk> with an unreadable source word (unknown or a number), each at "
                         "most once (default); keep: leave <unk> in the output")
    ap.add_argument("--no-unk-replace", dest="unk", action="store_const", const="keep", help="the same as --unk keep")
    ap.add_argument("--out", help="also write the translations to this file")
    ap.add_argument("--json", action="store_true", help="print the scores as JSON")
    args = ap.parse_args(argv)
    translator = load_translator(args.checkpoint)
    src, ref = read_lines(args.src), read_lines(args.ref)
    if len(src) != len(ref):
        raise Refused(f"{args.src} has {len(src)} lines but {args.ref} has {len(ref)}")
    with tqdm(total=len(src), desc="translating", unit="sent", disable=None, file=sys.stderr) as bar:
        hyps = translator.translate_batch(src, beam=args.beam, replace_unk=args.unk == "copy", progress=bar.update)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(hyps) + "\n")
    scores = bleu_scores(hyps, ref)
    if args.json:
        print(json.dumps(scores))
    else:
        print(f"BLEU = {scores['sacrebleu']:.2f}  ({scores['signature']})")
        print(f"BLEU lowercased on spaCy tokens = {scores['bleu_lower_spacy_tokens']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
