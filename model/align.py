"""python -m model.align: word alignments from cross-attention, its value norms or ALTI+, and their AER.

    python -m model.align --src FILE --tgt FILE [--checkpoint DIR] [--method alti] [--layer N|mean] [--head N|mean]
                          [--shift] [--gold FILE.talp] [--out FILE] [--sweep]

`--src` and `--tgt` hold one pre-tokenised sentence per line (the words, separated by spaces); the target side is
teacher-forced. `--out` (default: standard output): one line per pair, 0-based Pharaoh `i-j` (source word i, target
word j). With `--gold` (talp: `i-j` sure, `ipj` possible, 1-based) the corpus's AER in percent is the last line on
standard error; `--sweep` prints instead the AER of every method × layer (and their mean) × reading, as a Markdown
table (docs/contributions.md). The defaults are the best of that table on the shipped model's annotated pairs
(model/data/multi30k-align/, the project's own 100 pairs of test_2016_flickr). A progress bar goes to stderr.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from model.analysis.align import encode_pair
from model.analysis.links import METHODS, aer, links, matrix, pharaoh, read_talp
from model.io.cli import add_common_options, command, load_translator, set_threads, write_out

ANNOTATED = Path(__file__).resolve().parent / "data" / "multi30k-align"  # dev.de, dev.en, dev.talp, dev.lines
# docs/contributions.md's best on the shipped model: ALTI+, decoder layer 2 of 3 (two thirds of the depth: "auto")
DEFAULT = {"method": "alti", "layer": "auto", "head": "mean"}


def _lines(path: str, what: str) -> list[str]:
    """A file's lines, UTF-8, or Latin-1 where it is not (the German side of the Europarl gold set is)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {what} {Path(path).name}: {e.__class__.__name__}") from None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        print(f"note: {what} {Path(path).name} is not UTF-8: read as Latin-1", file=sys.stderr)
        lines = data.decode("latin-1").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            raise ValueError(f"{what} line {n} is empty")
    return lines


def _index(value: str, n: int, what: str) -> int | None:
    """1-based `value` ("mean": None; "auto": two thirds of n, rounded) as a 0-based index below n."""
    if value == "mean":
        return None
    if value == "auto":
        return max(1, round(2 * n / 3)) - 1
    if not value.isdigit() or not 1 <= int(value) <= n:
        raise ValueError(f"--{what} must be mean or 1..{n}, not {value!r}")
    return int(value) - 1


def align(translator, src: list[str], tgt: list[str], gold: list[str] | None, method: str, layer: str, head: str,
          shift: bool, sweep: bool) -> tuple[list[str], list[str]]:
    """(Pharaoh lines, report lines: the AER, or the sweep's table). ValueError on bad input, naming the line."""
    if len(src) != len(tgt) or (gold is not None and len(gold) != len(src)):
        counts = f"{len(src)} source, {len(tgt)} target" + (f", {len(gold)} gold" if gold is not None else "")
        raise ValueError(f"the files have different line counts: {counts}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}")
    cfg = translator.model.cfg
    li, hi = _index(layer, cfg.n_decoder_layers, "layer"), _index(head, cfg.n_heads, "head")
    sure, possible = [], []
    for n, (s, t, g) in enumerate(zip(src, tgt, gold or []), 1):  # every gold line read before the model runs
        a, b = read_talp(g, len(s.split()), len(t.split()), f"gold line {n}")
        sure.append(a)
        possible.append(b)
    pairs = []
    for n, (s, t) in enumerate(tqdm(list(zip(src, tgt)), desc="aligning", unit="pair", file=sys.stderr), 1):
        try:
            pairs.append(encode_pair(translator, s.split(), t.split()))
        except ValueError as e:
            raise ValueError(f"line {n}: {e}") from None
    found = [links(p, matrix(p, method, li, hi), shift) for p in pairs]
    out = [pharaoh(f) for f in found]
    if gold is None:
        return out, []
    if not sweep:
        return out, [f"AER {aer(found, sure, possible):.1f} %"]
    return out, sweep_table(pairs, sure, possible, cfg.n_decoder_layers)


def sweep_table(pairs, sure, possible, n_layers: int) -> list[str]:
    """Every method × layer (1-based, then the mean) × reading, heads together: AER in percent, a Markdown table."""
    layers = list(range(n_layers)) + [None]
    head = ["method", "reading"] + [f"layer {i + 1}" for i in range(n_layers)] + ["mean of layers"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in METHODS:
        for shift in (False, True):
            cells = [f"{aer([links(p, matrix(p, method, l, None), shift) for p in pairs], sure, possible):.1f}"
                     for l in layers]
            rows.append(f"| {method} | {'shifted' if shift else 'predicting'} | " + " | ".join(cells) + " |")
    return rows


@command(ValueError, OSError)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m model.align", description=__doc__.split("\n\n")[0])
    add_common_options(ap, threads=1)
    ap.add_argument("--src", default=str(ANNOTATED / "dev.de"), help="source sentences, one per line, tokenised")
    ap.add_argument("--tgt", default=str(ANNOTATED / "dev.en"), help="target sentences, one per line, tokenised")
    ap.add_argument("--gold", help="gold links (talp), one line per pair: prints the AER")
    ap.add_argument("--method", default=DEFAULT["method"], help=f"{', '.join(METHODS)} (default %(default)s)")
    ap.add_argument("--layer", default=DEFAULT["layer"],
                    help="decoder layer, 1-based, mean, or auto: two thirds of the depth (default %(default)s)")
    ap.add_argument("--head", default=DEFAULT["head"], help="head, 1-based, or mean (default %(default)s)")
    ap.add_argument("--shift", action="store_true", help="read the row whose input is the target piece")
    ap.add_argument("--sweep", action="store_true", help="with --gold: the AER of every method, layer and reading")
    ap.add_argument("--out", help="write the links here (default: standard output)")
    args = ap.parse_args(argv)
    set_threads(args.threads)
    src, tgt = _lines(args.src, "--src"), _lines(args.tgt, "--tgt")
    gold = Path(args.gold).read_text(encoding="utf-8").splitlines() if args.gold else None
    if args.sweep and gold is None:
        raise ValueError("--sweep needs --gold")
    translator = load_translator(args.checkpoint)
    out, report = align(translator, src, tgt, gold, args.method, args.layer, args.head, args.shift, args.sweep)
    if args.out or not args.sweep:
        write_out("\n".join(out) + "\n", args.out)
    if report:
        print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
