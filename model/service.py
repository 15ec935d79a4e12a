"""The one door through which the app's pages ask a model for anything.

A page holds a `Model` (an opaque handle) and asks this module: load a checkpoint, trace or translate a sentence,
the tokens of a reference, the config facts it shows, a teacher-forced pass, an attribution, the masks'
experiments, the head-report job, a toy run, an ablation. Every answer is a record of model/records.py, a string,
a number, a dict or a NumPy array: no tensor, module or vocabulary passes this door. Pages import this module,
model.records and model's rooms of plain NumPy functions (analysis.agreement, experiments, pairs, links, text.reading,
io.export, training.data, training.film_file): the door passes on no name of those, nor any other it does not define
(tests/views/test_service_door.py imports every page with this module stubbed and finds no torch loaded).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from model.analysis import align as _align
from model.analysis import analyze as _analyze
from model.analysis import attribution as _attribution
from model.analysis import contributions as _contrib
from model.analysis import experiments as _experiments
from model.analysis import lens as _lens
from model.analysis import patch as _patch
from model.analysis import report as _report
from model.analysis.links import Pair, words
from model.inference import runtime
from model.inference.translator import Translator
from model.io import export as _export
from model.io import lesson as _lesson
from model.records import Attribution, Contrast, Knockout, LogitLens, ModelConfig, Patching, SentenceTrace, Translation
from model.training import toy as _toy
from model.training.data import read_split

OffHeads = tuple  # ((kind, 0-based layer, 0-based head), ...) of heads switched off


@dataclass(frozen=True, eq=False)
class Model:
    """A loaded model, opaque to pages: hand it back to this module's functions. Safe to share between threads
    (the translator keeps no per-request state)."""

    _translator: Translator

    @property
    def cfg(self) -> ModelConfig:
        return self._translator.cfg


def use_threads(n: int) -> None:
    """Torch's and the BLAS libraries' threads for every request of this process (model/inference/runtime.py)."""
    runtime.use_threads(n)


def load(folder: str) -> Model:
    """A checkpoint folder's model (raises CheckpointError with a message saying what is wrong)."""
    return Model(Translator.from_checkpoint(folder))


def with_languages(model: Model, src_lang: str, tgt_lang: str) -> Model:
    """A many-to-many model between two other of its languages: the same weights, read and decoding otherwise
    (ValueError for a code the model does not have)."""
    return Model(model._translator.with_languages(src_lang, tgt_lang))


def untrained_twin(model: Model, seed: int = 0) -> Model:
    """The same architecture and vocabularies with random weights."""
    return Model(model._translator.untrained_twin(seed=seed))


# ----------------------------------------------------------------------------- one sentence

def trace(model: Model, text: str, max_len: int | None = 0, prefix: Sequence[str] | None = ()) -> Translation:
    """Greedy decoding (after a forced prefix, if given) with every step and the full trace, as NumPy; `max_len`
    steps at most (0 or None: the automatic limit). A prefix ending in the end token is a whole output (a beam
    hypothesis traced along its tokens)."""
    return model._translator.trace(text, max_len=max_len or None, prefix=list(prefix or ()) or None)


def translate(model: Model, text: str, beam: int = 1, max_len: int | None = 0,
              off_heads: OffHeads | None = None) -> Translation:
    """Greedy (beam 1) or beam search, untraced; `off_heads` switches heads off."""
    return model._translator.translate(text, beam=beam, max_len=max_len or None, off_heads=off_heads or None)


def translate_batch(model: Model, texts: list[str], off_heads: OffHeads | None = None) -> list[str]:
    return model._translator.translate_batch(texts, off_heads=off_heads or None)


def score(model: Model, text: str, tgt_tokens: list[str], off_heads: OffHeads | None = None) -> float:
    """log p(tgt_tokens + end | text), teacher-forced."""
    return model._translator.score(text, tgt_tokens, off_heads=off_heads)


def teacher_forced(model: Model, text: str, tgt_tokens: list[str], causal: bool = True) -> SentenceTrace:
    """The trace of a teacher-forced pass over the start token + tgt_tokens (causal mask on or off)."""
    return model._translator.teacher_forced(text, tgt_tokens, use_causal_mask=causal)


def target_tokens(model: Model, text: str) -> list[str]:
    """A target-language text (a reference) in the model's target tokens."""
    return model._translator.target_tokens(text)


def looks_like_target_language(model: Model, text: str) -> bool:
    """Does the text look like the model's target language (a hint for a user who typed English)?"""
    return model._translator.looks_like_target_language(text)


def attribution(model: Model, text: str, tgt_tokens: list[str], rows: list[int]) -> Attribution:
    """The Attribution (model/records.py) of the given rows of a decoding to the source, NumPy only."""
    return _attribution.attribute(model._translator, text, tgt_tokens, rows=rows)


def padded_batch(model: Model, text: str, use_mask: bool, alone: Translation | None = None,
                 max_len: int | None = None) -> dict:
    """The sentence padded in a batch with a longer partner, with the padding mask on or off; `max_len` steps at
    most (None: the automatic limit)."""
    return model._translator.padded_batch(text, use_padding_mask=use_mask, alone=alone, max_len=max_len)


def causal_experiment(model: Model, text: str, tokens: list[str], reference: str, ended: bool = True):
    """(trace with the causal mask, trace without it, the comparison) along tokens (+ end if ended)."""
    return _experiments.run_causal_experiment(model._translator, text, tokens, reference, ended)


def causal_reference(model: Model, text: str, fallback: list[str], finished: bool) -> tuple[list[str], bool, str]:
    """(tokens to teacher-force, whether they ended, what they are): a known reference, else the model's own."""
    return _experiments.causal_reference(model._translator, text, fallback, finished)


def embedding_matrix(model: Model, side: str) -> tuple[np.ndarray, list[str]]:
    """(V, d) learned embedding matrix of 'src' or 'tgt', and its tokens."""
    return model._translator.embedding_matrix(side)


def trace_json(model: Model, translation: Translation, name: str, decoding: str | None) -> str:
    """A traced translation in `python -m model.export`'s JSON schema."""
    return _export.to_json(_export.trace_dict(model._translator, translation, name, decoding))


def lesson_data(model: Model, translations: list[tuple[Translation, str | None]], name: str) -> dict:
    """The lesson file's data for (traced translation, decoding) pairs: NumPy and strings that
    viz.lesson.lesson_html draws (model/io/lesson.py)."""
    return _lesson.lesson_data(model._translator, translations, name)


def facts(model: Model) -> dict:
    """Plain facts about the model: parameter counts, metrics, languages, specials, target vocabulary."""
    tr = model._translator
    return {"parameters": tr.parameter_counts(), "metrics": dict(tr.metrics), "tgt_itos": list(tr.tgt_vocab.itos),
            "src_lang": tr.src_lang, "tgt_lang": tr.tgt_lang, "src_specials": tuple(tr.special_ids("src")),
            "tgt_specials": tuple(tr.special_ids("tgt")),
            # the specials by name, in id order: a vocabulary's size counts them (a word vocabulary's four, Marian's
            # three), and a page that states the size says which they are
            "special_tokens": {side: tuple((tr.src_vocab if side == "src" else tr.tgt_vocab).itos[i]
                                           for i in tr.special_ids(side)) for side in ("src", "tgt")},
            # the target tokens that start and end a translation (Marian: <pad> and </s>)
            "start_token": tr.tgt_vocab.itos[tr.cfg.decoder_start_idx], "end_token": tr.tgt_vocab.itos[tr.cfg.eos_idx],
            # a many-to-many model's codes (code -> token) and the T5 family's prompt, "" where none
            "languages": dict(tr.languages), "prompt": tr.cfg.src_prefix,
            "family": tr.metrics["imported"].get("family", "marian") if "imported" in tr.metrics else "atlas"}


# ----------------------------------------------------------------------------- what-if experiments

def ablation(model: Model, text: str, tgt_tokens: list[str], off_heads: OffHeads, max_len: int | None = 0
             ) -> tuple[str, float, float]:
    """(greedy translation with the heads off, log p of tgt_tokens with every head, and with the heads off)."""
    new = translate(model, text, max_len=max_len, off_heads=off_heads)
    return new.text, score(model, text, tgt_tokens), score(model, text, tgt_tokens, off_heads)


def val_translations(model: Model, folder: str, off_heads: OffHeads, n: int) -> tuple[list[str], list[str]]:
    """(greedy translations of the first n sentences of the validation split in `folder` (a --data-dir) with the
    heads off, their references)."""
    src, ref = read_split(folder, "val")
    return translate_batch(model, src[:n], off_heads), ref[:n]


def knockout(model: Model, text: str, tgt_tokens: list[str]) -> Knockout:
    """Each head alone switched off, teacher-forced on tgt_tokens: the change of every token's log-probability."""
    return _patch.knockout(model._translator, text, tgt_tokens)


def patching(model: Model, clean: str, corrupt: str, tgt_tokens: list[str]) -> Patching:
    """Activation patching clean -> corrupted (same number of source tokens, else ValueError)."""
    return _patch.patching(model._translator, clean, corrupt, tgt_tokens)


def logit_lens(model: Model, text: str, tgt_tokens: list[str], step: int, k: int = 5) -> LogitLens:
    """Each decoder layer's output read through the final norm and the generator, at 0-based `step`."""
    return _lens.logit_lens(model._translator, text, tgt_tokens, step, k)


def contrast(model: Model, text: str, tgt_tokens: list[str], step: int, target: str | None, foil: str) -> Contrast:
    """Why `target` (None: the token chosen) and not `foil` at `step`: source attribution and head knockout."""
    return _lens.contrast(model._translator, text, tgt_tokens, step, foil, target)


def contributions(model: Model, text: str, tgt_tokens: list[str]) -> _contrib.Contributions:
    """Value norms and ALTI+ of every attention block, teacher-forced on tgt_tokens (their end token included)."""
    return _contrib.contributions(model._translator, text, tgt_tokens)


def align_sentence(model: Model, source: str, target: str) -> Pair:
    """A sentence and its translation (the model's own, or a reference) read as words and run through the model
    teacher-forced on the translation (ValueError for a side without words)."""
    return _align.encode_pair(model._translator, words(source), words(target))


def annotated_pairs(model: Model) -> _align.AnnotatedSet:
    """The 100 annotated German–English pairs as this model reads them, with their gold links."""
    return _align.annotated_set(model._translator)


def source_share_marks(folder) -> dict | None:
    """A checkpoint folder's source_share.json (python -m model.contributions --calibrate), or None."""
    import json
    from pathlib import Path

    try:
        marks = json.loads((Path(folder) / "source_share.json").read_text(encoding="utf-8"))
        return marks if isinstance(marks.get("percentiles"), dict) else None
    except (OSError, ValueError, AttributeError):
        return None


# ----------------------------------------------------------------------------- the head report

REPORT_NAME, ReportError = _report.REPORT_NAME, _report.ReportError
report_cache_dir, load_report, write_report = _report.cache_dir, _report.load_report, _report.write_report
corpus_file_name = _report.corpus_file_name


def head_report(model: Model, src: list[str], ref: list[str], **options) -> dict:
    """The head report over a corpus (measures, importance; ablation and pruning when asked): see analyze."""
    return _analyze.analyze(model._translator, src, ref, **options)


# ----------------------------------------------------------------------------- the toy task

TOY_TASKS, TOY_OFFERED, TOY_EXAMPLE = _toy.TASKS, _toy.OFFERED, _toy.EXAMPLE
TOY_MIN_LEN, TOY_MAX_LEN, TOY_BATCH, TOY_STEPS = _toy.MIN_LEN, _toy.MAX_LEN, _toy.BATCH, _toy.DEFAULT_STEPS
toy_config = _toy.toy_config


@dataclass
class ToyResult:
    """A live toy run's model and its numbers."""

    task: str
    model: Model
    steps: int
    seconds: float
    accuracy: float | None
    losses: list[tuple[int, float]] = field(default_factory=list)
    cross: np.ndarray | None = None  # (L, h, t, s) the fixed example's cross-attention after the last step


def train_toy(task: str, callback: Callable[[int, float, np.ndarray], bool | None] | None, every: int,
              target: float | None = 1.0, threads: int = 1) -> ToyResult:
    """Train a fresh toy model on one core; `callback(step, loss, cross)` every `every` steps."""
    run = _toy.train_toy(task, callback=callback, every=every, target=target, threads=threads)
    return ToyResult(task, Model(run.translator), run.steps, run.seconds, run.accuracy, run.losses, _toy.run_cross(run))
