"""Translate German to English from the command line.

    python -m model.translate "Ein Mann fährt Fahrrad." [--checkpoint DIR] [--beam N] [--max-len N] [--unk keep]
    python -m model.translate --file sentences.de [--beam N] [--max-len N]    # one sentence per line

For example, five-beam translations of at most 30 tokens, one line out per line in:

    python -m model.translate --file sentences.de --checkpoint checkpoints/multi30k-de-en --beam 5 --max-len 30
"""
from __future__ import annotations

import argparse
import sys

from model.io.cli import Refused, add_common_options, command, load_translator
from model.training.data import DataError, read_lines


@command(DataError)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("text", nargs="*", help="German sentence (quote it)")
    ap.add_argument("--file", help="translate each line of this file (plain or .gz) to standard output")
    add_common_options(ap)
    ap.add_argument("--beam", type=int, default=1, help="beam size; 1 = greedy (default)")
    ap.add_argument("--max-len", type=int, default=None,
                    help="at most this many output tokens per sentence (default: twice the source's tokens + 10)")
    ap.add_argument("--unk", choices=("copy", "keep"), default="copy",
                    help="copy: fill each output <unk> with an unreadable source word (unknown or a number), each at "
                         "most once (default); keep: leave <unk> in the output")
    ap.add_argument("--no-unk-replace", dest="unk", action="store_const", const="keep", help="the same as --unk keep")
    args = ap.parse_args(argv)
    if bool(args.text) == bool(args.file):
        ap.error("give either a sentence or --file")
    if args.beam < 1:
        ap.error("--beam must be at least 1")
    if args.max_len is not None and args.max_len < 1:
        ap.error("--max-len must be at least 1")
    translator = load_translator(args.checkpoint)
    lines = read_lines(args.file) if args.file else [" ".join(args.text)]
    if args.file:
        for line in translator.translate_batch(lines, beam=args.beam, replace_unk=args.unk == "copy",
                                             max_len=args.max_len):
            print(line)
        return 0
    result = translator.translate(lines[0], beam=args.beam, max_len=args.max_len, replace_unk=args.unk == "copy")
    if not result.source.tokens:
        raise Refused("the sentence is empty")
    if result.source.truncated:
        print(f"note: input cut to {len(result.source.tokens)} tokens", file=sys.stderr)
    print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
