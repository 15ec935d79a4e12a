"""The traced translation of one sentence as a JSON file, for scripts and other tools (BertViz, pandas).

    python -m model.export "Ein Hund läuft im Schnee." [--checkpoint DIR] [--out FILE.json] [--top-k 5] [--max-len N]

Schema "attention-atlas-trace/1" (documented in docs/formats.md): model metadata, the source and target tokens
and ids (the target is the decoder input: the start token, then the output), the attention probabilities
of enc_self, dec_self and cross as [layer][head][query][key], and every decoding step's top-k candidates.
The app's "trace as JSON" download writes the same content for the sentence on screen.

    python -m model.export SENTENCE [SENTENCE ...] --html lesson.html

writes the lesson file instead: one HTML page with the app's figures for every sentence, that opens offline
(docs/lesson.md).

    python -m model.export SENTENCE --cache acts.npz [--names REGEX]

writes the activation cache of the sentence teacher-forced on its greedy translation (its rows score the
translation, then the end token: docs/hooks.md's convention): one array per hook point, keyed by its name, with
`src_tokens`, `tgt_tokens` (the decoder input) and `log_probs` (T, V), for a notebook:
`np.load("acts.npz")["decoder.1.cross_attn.hook_pattern"]`.

The lesson page is drawn by viz/lesson.py, which this room may not import; the command line model/export.py hands
it in as `render_html`.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from model.io.cli import Refused, add_common_options, command, load_translator, write_out

SCHEMA = "attention-atlas-trace/1"
DIGITS = 6  # decimals kept for probabilities: rows still sum to 1 within 1e-5


def _round(x) -> list:
    """Nested lists of floats rounded to DIGITS (NumPy arrays in)."""
    import numpy as np

    return np.round(np.asarray(x, dtype=np.float64), DIGITS).tolist()


def file_stem(name: str, text: str, decoding: str) -> str:
    """A file name that says what it holds: model, the sentence's first words, the decoding."""
    words = re.sub(r"[^\w]+", "-", text, flags=re.UNICODE).strip("-")[:40].strip("-") or "sentence"
    model = re.sub(r"[^\w.-]+", "-", name)
    how = re.sub(r"[^\w]+", "-", decoding).strip("-")
    return f"atlas_{model}_{words}_{how}"


def cache_arrays(translator, text: str, names: str | None = None) -> dict:
    """{hook name: batch row 0 as float32, "src_tokens", "tgt_tokens", "log_probs" (T, V)}: the sentence
    teacher-forced on its greedy translation; `names` a regular expression a kept name must contain."""
    import numpy as np

    keep = None if names is None else re.compile(names).search
    log_probs, cache = translator.run_with_cache(text, names_filter=keep)
    out = {name: a[0].float().numpy() for name, a in cache.items()}
    out["src_tokens"] = np.array(cache.src_tokens)
    out["tgt_tokens"] = np.array(cache.tgt_tokens)
    out["log_probs"] = log_probs[0].float().numpy()
    return out


def trace_dict(translator, translation, name: str, decoding: str | None = None) -> dict:
    """The schema's dict for a traced Translation (from Translator.trace, detached or not).

    `decoding` overrides the translation's own description (the app traces beam search along its tokens).
    """

    st = translation.trace
    if st is None:
        raise ValueError("the translation has no trace: the sentence is empty")
    cfg = translator.cfg
    tv = translator.tgt_vocab
    steps = []
    for i, s in enumerate(translation.steps or [], 1):
        steps.append({
            "step": i,
            "prefix": list(s.prefix_tokens),
            "candidates": [{"token": t, "id": int(j), "prob": round(float(p), DIGITS)}
                           for t, j, p in zip(s.top_tokens, s.top_ids, s.top_probs)],
            "chosen": {"token": s.chosen_token, "id": int(s.chosen), "prob": round(float(s.chosen_prob), DIGITS)},
            "forced": bool(s.forced),
        })
    return {
        "schema": SCHEMA,
        "model": {"name": name, "src_lang": translator.src_lang, "tgt_lang": translator.tgt_lang,
                  "parameters": int(sum(translator.parameter_counts().values())), "d_model": cfg.d_model,
                  "n_heads": cfg.n_heads, "n_encoder_layers": cfg.n_encoder_layers,
                  "n_decoder_layers": cfg.n_decoder_layers, "src_vocab_size": cfg.src_vocab_size,
                  "tgt_vocab_size": cfg.tgt_vocab_size},
        "decoding": decoding or translation.decoding,
        "finished": bool(translation.finished),
        "translation": translation.text,
        "src_tokens": list(st.src_tokens),
        "src_ids": [int(i) for i in translation.source.ids],
        "tgt_tokens": list(st.tgt_tokens),
        "tgt_ids": [int(tv.bos_idx)] + [int(i) for i in tv.encode(translation.raw_tokens)],
        "enc_self": _round(st.probs("enc_self")),
        "dec_self": _round(st.probs("dec_self")),
        "cross": _round(st.probs("cross")),
        "steps": steps,
    }


def to_json(d: dict) -> str:
    return json.dumps(d, ensure_ascii=False, indent=1) + "\n"


@command()
def main(argv: list[str] | None = None, render_html=None) -> int:
    """The command line; `render_html(lesson, made_by) -> str` draws the lesson file (viz.lesson.lesson_html)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sentence", nargs="+", help="the source sentence (several with --html)")
    add_common_options(ap)
    ap.add_argument("--out", help="write the JSON here (default: standard output)")
    ap.add_argument("--html", metavar="FILE", help="write the lesson file (one offline HTML page) for the sentences")
    ap.add_argument("--top-k", type=int, default=5, help="candidates kept per decoding step (default 5)")
    ap.add_argument("--max-len", type=int, default=0, help="maximum output length (0 = automatic)")
    ap.add_argument("--cache", metavar="FILE.npz", help="write the sentence's activations by hook name (docs/hooks.md)")
    ap.add_argument("--names", metavar="REGEX", help="with --cache: keep only the hook names this expression finds")
    args = ap.parse_args(argv)
    if args.top_k < 1:
        ap.error("--top-k must be at least 1")
    if args.max_len < 0:
        ap.error("--max-len must be 0 (automatic) or more")
    if len(args.sentence) > 1 and not args.html:
        ap.error(f"{len(args.sentence)} sentences given: the JSON holds one sentence; "
                 "write several into a lesson file with --html FILE")
    if sum(bool(x) for x in (args.html, args.out, args.cache)) > 1:
        ap.error("--out writes the JSON, --html the lesson file and --cache the activations: give one of them")
    if args.names is not None:
        if not args.cache:
            ap.error("--names chooses what --cache keeps: give --cache FILE.npz too")
        try:
            re.compile(args.names)
        except re.error as e:
            ap.error(f"--names {args.names!r} is not a regular expression ({e})")
    if args.cache and len(args.sentence) > 1:
        ap.error("--cache holds one sentence's activations: give one sentence")
    if args.html and render_html is None:
        ap.error("--html needs the figures of viz/: run it as python -m model.export")
    if args.html and not Path(args.html).resolve().parent.is_dir():
        ap.error(f"--html {args.html}: the folder {Path(args.html).resolve().parent} does not exist")
    translator = load_translator(args.checkpoint)
    if args.cache:
        return _write_cache(translator, args.sentence[0], args.cache, args.names)
    translations = [translator.trace(s, max_len=args.max_len or None, top_k=args.top_k) for s in args.sentence]
    empty = [n for n, t in enumerate(translations, 1) if not t.source.tokens]
    if empty:
        which = "the sentence has" if len(translations) == 1 else f"sentence {empty[0]} has"
        raise Refused(f"{which} no words the tokenizer can read")
    name = Path(args.checkpoint).name
    if args.html:
        from model.io.lesson import lesson_data

        page = render_html(lesson_data(translator, [(t, None) for t in translations], name),
                           "with python -m model.export")
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {args.html}: {len(translations)} sentence{'s' if len(translations) != 1 else ''}, "
              f"{len(page.encode('utf-8')):,} bytes", file=sys.stderr)
        return 0
    write_out(to_json(trace_dict(translator, translations[0], name)), args.out)
    return 0


def _write_cache(translator, text: str, path: str, names: str | None) -> int:
    import numpy as np

    try:
        arrays = cache_arrays(translator, text, names)
    except ValueError as e:
        keeps_none = "keeps no hook point" in str(e)
        raise Refused(f"--names {names!r} keeps no hook point (docs/hooks.md lists them)" if keeps_none
                      else str(e)) from None
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}: {len(arrays) - 3} hook points, {len(arrays['tgt_tokens'])} target positions",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
