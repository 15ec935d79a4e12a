"""python -m model.contributions: what attention carries in one sentence (value norms and ALTI+), as JSON.

    python -m model.contributions "SENTENCE" [--checkpoint DIR] [--target TEXT] [--out FILE.json]
    python -m model.contributions --calibrate [--checkpoint DIR]

Teacher-forced on the model's own greedy translation (its end token included when it finished), or on `--target`
(a translation in the target language, tokenised as the model reads it, the end token added). The measures and the
record's shapes: model/analysis/contributions.py.

`--calibrate` measures what a low source share is for this model: the source shares of every token of its greedy
translations of the 100 annotated Multi30k sentences (model/data/multi30k-align/dev.de), their percentiles written
to the checkpoint's `source_share.json` (or `--out`). The Decoding page flags a token below the 5th percentile.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from model.analysis.contributions import contributions
from model.io.cli import add_common_options, command, load_translator, set_threads, write_out

SCHEMA = "attention-atlas-contributions/1"
CALIBRATION = "source_share.json"
SENTENCES = Path(__file__).resolve().parent / "data" / "multi30k-align" / "dev.de"
PERCENTILES = (5, 10, 25, 50)


def calibrate(translator) -> dict:
    """The percentiles of the source share of every output token of the model's greedy translations of the
    annotated sentences (their end tokens included)."""
    from tqdm import tqdm

    shares = []
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    for line in tqdm(lines, desc="calibrating", unit="sentence", file=sys.stderr):
        shares += contributions(translator, line).alti["source_share"].tolist()
    values = np.percentile(shares, PERCENTILES)
    return {"schema": "attention-atlas-source-share/1", "sentences": len(lines), "tokens": len(shares),
            "from": "model/data/multi30k-align/dev.de: 100 Multi30k test_2016_flickr sentences, greedy decoding",
            "percentiles": {str(p): round(float(v), 4) for p, v in zip(PERCENTILES, values)}}


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


@command(ValueError)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m model.contributions", description=__doc__.split("\n\n")[0])
    ap.add_argument("text", nargs="?", help="the source sentence")
    ap.add_argument("--calibrate", action="store_true", help=f"write the model's {CALIBRATION} (see above)")
    add_common_options(ap, threads=1)
    ap.add_argument("--target", help="teacher-force this translation (default: the model's own, greedy)")
    ap.add_argument("--out", help="write the JSON here (default: standard output)")
    args = ap.parse_args(argv)
    set_threads(args.threads)
    if args.text is None and not args.calibrate:
        ap.error("give a SENTENCE, or --calibrate")
    translator = load_translator(args.checkpoint)
    result = calibrate(translator) if args.calibrate else report(translator, args.text, args.target)
    if args.calibrate and not args.out:
        args.out = str(Path(args.checkpoint) / CALIBRATION)
    text = json.dumps(result, ensure_ascii=False, allow_nan=False) + "\n"
    write_out(text, args.out, say=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
