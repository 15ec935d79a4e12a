"""python -m model.contributions: what attention carries in one sentence (value norms and ALTI+), as JSON.

    python -m model.contributions "SENTENCE" [--checkpoint DIR] [--target TEXT] [--out FILE.json]

Teacher-forced on the model's own greedy translation (its end token included when it finished), or on `--target`
(a translation in the target language, tokenised as the model reads it, the end token added). The measures and the
record's shapes: model/analysis/contributions.py.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from model.analysis.contributions import contributions

SCHEMA = "attention-atlas-contributions/1"


def report(translator, text: str, target: str | None = None) -> dict:
    """The command line's JSON. ValueError for a sentence without tokens or an empty target."""
    tokens = None
    if target is not None:
        tokens = translator.target_tokens(target)
        if not tokens:
            raise ValueError("--target has no tokens the model reads")
        tokens = tokens + [translator.tgt_vocab.token("eos")]
    record = contributions(translator, text, tokens)
    return {"schema": SCHEMA, "text": text, **record.to_json()}


def main(argv: list[str] | None = None) -> int:
    from model.inference.translator import Translator
    from model.io.checkpoint import DEFAULT_CHECKPOINT, CheckpointError

    ap = argparse.ArgumentParser(prog="python -m model.contributions", description=__doc__.split("\n\n")[0])
    ap.add_argument("text", help="the source sentence")
    ap.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="checkpoint folder (default: %(default)s)")
    ap.add_argument("--target", help="teacher-force this translation (default: the model's own, greedy)")
    ap.add_argument("--out", help="write the JSON here (default: standard output)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    try:
        translator = Translator.from_checkpoint(args.checkpoint)
        result = report(translator, args.text, args.target)
    except (CheckpointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(result, ensure_ascii=False, allow_nan=False) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
