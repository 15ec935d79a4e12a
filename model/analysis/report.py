"""The head report's file: its schema, the definitions written into it, and where it is read and written.

A report (schema SCHEMA) is plain JSON, or .gz JSON; floats keep DIGITS significant figures. It goes to
CHECKPOINT/head_report.json, or, when the checkpoint folder is not writable, to
$XDG_CACHE_HOME/attention-atlas/<checkpoint name>/head_report.json (XDG_CACHE_HOME defaults to ~/.cache).
No machine's path goes into a report: corpus files are named by their folder and their own name.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np

from model.analysis.measures import HeadStats
from model.records import KINDS

SCHEMA = "attention-atlas-head-report/1"
REPORT_NAME = "head_report.json"
CACHE_ENV = "XDG_CACHE_HOME"  # the cache folder's parent (default ~/.cache), for read-only checkpoint folders
DIGITS = 6  # significant figures of every float in the report (a raw importance can be 1e-7)

DEFINITIONS = {
    "queries": "Every real (non-pad) query position of the corpus counts once: all source positions including "
               "<eos> for enc_self; every decoder input position (<bos> y1 .. yn) for dec_self and cross. The model "
               "is teacher-forced on the tokenized references (truncated to the model's max_len), in eval mode.",
    "confidence": "Mean over queries of the largest attention weight of the row (Voita et al. 2019).",
    "entropy": "Mean over queries of -sum_j p_ij log p_ij, in nats (Clark et al. 2019).",
    "entropy_fraction": "Mean over queries of the row's entropy divided by log(#keys the query may attend to): all "
                        "real source positions for enc_self and cross, positions <= i for the causal dec_self. "
                        "1 = uniform. A query with a single allowed key (the <bos> query of dec_self) counts as 0, "
                        "so a uniform dec_self head scores (t-1)/t on a sentence, not 1.",
    "mean_distance": "Self-attention only (Vig & Belinkov 2019): mean over queries of sum_j p_ij |i-j| / sum_j p_ij.",
    "prev_share": "Self-attention only: mean weight on key j = i-1, over the queries that have an allowed key there "
                  "(query 0 has none and is left out).",
    "same_share": "Self-attention only: mean weight on key j = i (the query's own position).",
    "next_share": "enc_self only (the causal mask hides i+1 from dec_self): mean weight on key j = i+1, over the "
                  "queries that have a real key there.",
    "argmax_offsets": "Self-attention only: for each offset k in -3..+3, the share of queries whose strongest key is "
                      "at j = i+k, among the queries for which i+k is an allowed key (0 when there is none, e.g. "
                      "k > 0 for dec_self). best_offset is the offset with the largest share, best_offset_share that "
                      "share; a head is positional when it is >= thresholds.positional (Voita et al. 2019).",
    "eos_share": "enc_self and cross: mean weight on the source <eos> (0 where the source has none: T5Gemma).",
    "punct_share": "enc_self and cross: mean weight on the source sentence's final punctuation mark, i.e. the "
                   "last token before <eos> when it is one of . ! ? ; : (a piece read without its word-start mark; "
                   "0 for sentences without one; corpus.src_final_punct says how many have one).",
    "bos_share": "dec_self only: mean weight on <bos>, the decoder input's first position (it has no <eos>).",
    "sink_share": "Weight on the no-op tokens (Clark et al. 2019): eos_share + punct_share for enc_self and cross, "
                  "bos_share for dec_self. A head with sink_share >= thresholds.sink is a sink.",
    "rare_share": "enc_self and cross (Voita et al. 2019): share of queries whose strongest key is the least frequent "
                  "source token of the sentence. Word vocabularies keep no counts, but Vocab.build orders itos most "
                  "frequent first, so the vocabulary rank (id) is the frequency order and an <unk> is rarer than any "
                  "vocabulary token; for a SentencePiece model the order is the piece's score in source.spm (its "
                  "log-probability in a unigram model, minus its merge rank in BPE), so a piece is rare or not, not "
                  "a whole word. Several <unk>s, or a repeated rarest token, all count as the rarest. Specials, "
                  "punctuation-only tokens and a bare word-start mark are not candidates; sentences with fewer than "
                  "2 candidates are skipped. "
                  "kinds[kind].chance.rare_share is the share a head attending uniformly at random would get "
                  "(#rarest positions / #keys, averaged over the same queries).",
    "monotonicity": "cross only: per sentence, the Spearman rank correlation between the target position i and the "
                    "argmax source position of the head's row i (0 when the argmax never moves), averaged over "
                    "sentences with >= 2 target positions. layer_monotonicity is the same for each decoder layer's "
                    "head-averaged cross-attention; best_layer is the layer with the largest layer_monotonicity "
                    "(a constant path, e.g. resting on <eos>, scores 0, unlike a share of non-backward moves).",
    "forward_share": "cross only: share of consecutive target positions (i, i+1) whose argmax source position does "
                     "not move backwards.",
    "aer": "cross only: the alignment error rate (%, Och & Ney 2003) of the head's weights on the 100 annotated "
           "Multi30k pairs (model/data/multi30k-align), each target piece linked to the source piece its predicting "
           "row weights most, words aligned when any of their pieces are (docs/contributions.md); lower aligns better. "
           "Only for German-English models.",
    "aer_value_norm": "cross only: as aer, from the head's value norms ||alpha f_h(x_j)|| instead of its weights.",
    "agreement": "cross only: share of target queries whose argmax source position equals the argmax of the best "
                 "layer's head-averaged cross-attention. A head of the best layer is compared with the mean of that "
                 "layer's other heads (leave-one-out): a mean it is part of would lean towards it. Multi30k has no "
                 "gold alignments to compute AER against.",
    "importance": "Michel et al. 2019, I_h = E_x |dL(x)/dxi_h|: every head's output is multiplied by a gate xi = 1 "
                  "(head_mask), one gate per sentence and head, so that one backward pass per batch gives each "
                  "sentence's own gradient; L(x) is the summed token NLL of sentence x's reference (its tokens and "
                  "<eos>). importance_raw = the sum over sentences of |dL(x)/dxi_h|, divided by the number of target "
                  "tokens of the corpus (corpus.tokens.tgt): per target token, and the same however the sentences are "
                  "batched (signs cancel within no batch). importance: each layer's scores divided by their L2 norm "
                  "(per kind and layer), then min-max scaled over all heads of all kinds (as Hugging Face bertology's "
                  "compute_heads_importance); the ranking does not depend on the per-token divisor.",
    "ablation_loss_increase": "Mean token NLL of the references with that head alone switched off (head_mask 0) minus "
                              "the mean token NLL with every head on, over ablation.sentences sentences.",
    "offset_pattern": "Mean weight at offsets -8..+8 from a reference key, over the queries for which that key is "
                      "allowed. Self-attention: the reference is the query's own position i (so -1, 0, +1 are "
                      "prev/same/next_share). cross: the proportional diagonal d_i = round(i*S/T), S = real source "
                      "positions (with <eos>), T = real decoder positions (with <bos>), rounding halves up.",
    "top_sentences": "Per head, the corpus indices (0-based line numbers of the input files) of the 5 sentences where "
                     "the head is most confident (mean over that sentence's queries of the max weight), best first; "
                     "corpus.texts holds those sentences (source and reference) by index.",
    "roles": "Labels from thresholds (first = main label; order: positional, previous-token, next-token, aligner, "
             "rare-word, sink, diffuse): 'positional -1' / 'positional 0' / 'positional +1' (self-attention, "
             "best_offset_share >= positional at that offset), 'previous-token' / 'next-token' (self-attention, "
             "prev_share / next_share >= previous_next, Clark et al. 2019), 'aligner' (cross: aer <= aligner_aer "
             "where the report has the annotated pairs' AER, else agreement >= aligner_agreement and monotonicity >= "
             "aligner_monotonicity), "
             "'rare-word' (enc_self/cross, rare_share >= rare_word and >= rare_word_over_chance x chance), 'sink' "
             "(sink_share >= sink), 'diffuse' (entropy_fraction >= diffuse); 'mixed' when none applies.",
    "pruning": "Michel et al. 2019, Fig. 3: heads switched off in ascending order of (normalised) importance, "
               "round(f x N) of them for f = 0, 0.1, .., 1 (halves up), N = the heads of that kind, or all heads; "
               "greedy decoding (Translator.translate_batch with off_heads, <unk> copying on) of the first "
               "pruning.sentences sentences, scored with sacreBLEU (model.evaluate.bleu_scores). Where a curve "
               "first falls >= thresholds.bleu_drop below the baseline, the head counts between that point and the "
               "one before are decoded too (pruning.refined), so pruning.heads_off_before_bleu_drop is exact to one "
               "head (on these sentences). When the report has the ablation, pruning.by_loss_increase holds the same "
               "curves, refinement and counts with the heads switched off in ascending order of their measured "
               "ablation_loss_increase instead (the heads whose removal alone costs the least loss first).",
}


def corpus_file_name(path: str | Path | None) -> str | None:
    """A corpus file as the report names it: its folder's name and its own ("multi30k/val.de.gz").

    No machine's path goes into a report that may be shipped; older reports hold absolute paths, which this
    shortens the same way for display.
    """
    if path is None:
        return None
    parts = Path(os.path.abspath(path)).parts[1:]  # without the root; symbolic links are not followed
    return "/".join(parts[-2:]) or None


def rounded(x):
    """NumPy to lists, floats rounded to DIGITS significant figures, recursively."""
    if isinstance(x, dict):
        return {str(k): rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v) for v in x]
    if isinstance(x, np.ndarray):
        return rounded(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(f"{float(x):.{DIGITS}g}")
    return x


class ReportError(ValueError):
    """A head report that is missing, unreadable or not in the schema; the message names the file."""


def load_report(path: str | Path) -> dict:
    """The report at `path` (plain or .gz JSON), checked against the schema; raises ReportError."""
    path = Path(path)
    if not path.is_file():
        raise ReportError(f"{path}: no head report there (make one with `python -m model.analyze`)")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError) as e:
        raise ReportError(f"{path}: not a readable JSON file ({e})") from e
    bad = lambda why: ReportError(f"{path}: not a head report in schema {SCHEMA}: {why}")  # noqa: E731
    if not isinstance(d, dict):
        raise bad("the top level is not an object")
    if d.get("schema") != SCHEMA:
        raise bad(f"schema is {d.get('schema')!r}")
    for key in ("checkpoint", "config", "corpus", "definitions", "thresholds", "kinds", "importance", "timings",
                "created"):
        if key not in d:
            raise bad(f"'{key}' is missing")
    for kind in KINDS:
        k = d["kinds"].get(kind) if isinstance(d["kinds"], dict) else None
        if not isinstance(k, dict):
            raise bad(f"kinds.{kind} is missing")
        L, h = k.get("layers"), k.get("heads")
        if not isinstance(L, int) or not isinstance(h, int) or L < 1 or h < 1:
            raise bad(f"kinds.{kind} has no valid layers/heads")
        for name, grid in {**k.get("measures", {}), "roles": k.get("roles")}.items():
            if not (isinstance(grid, list) and len(grid) == L
                    and all(isinstance(r, list) and len(r) == h for r in grid)):
                raise bad(f"kinds.{kind}.{'measures.' if name != 'roles' else ''}{name} is not a {L} x {h} grid")
        for name in HeadStats.measure_names(kind):
            if name not in k["measures"]:
                raise bad(f"kinds.{kind}.measures.{name} is missing")
    return d


def cache_dir(checkpoint_name: str) -> Path:
    """$XDG_CACHE_HOME (default ~/.cache)/attention-atlas/<checkpoint name>."""
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base).expanduser() / "attention-atlas" / checkpoint_name


def folder_writable(folder: Path) -> bool:
    """Can a file be created in `folder`? (tried, since os.access says yes to root on a read-only mount)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def write_report(report: dict, out: str | Path | None, checkpoint: Path) -> Path:
    """Write to `out`, or to checkpoint/head_report.json, or (read-only checkpoint) to the cache folder."""
    text = json.dumps(report, ensure_ascii=False, indent=1) + "\n"
    if out is not None:
        path = Path(out)
    else:
        path = checkpoint / REPORT_NAME
        if not folder_writable(checkpoint):
            path = cache_dir(checkpoint.resolve().name) / REPORT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
