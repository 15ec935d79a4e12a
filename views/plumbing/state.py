"""Shared app state: cached model loading, cached traces and the URL schema.

The model is loaded once per checkpoint and each sentence is traced once, so changing a layer, head or view
never runs the model again. Traces are kept with st.cache_resource, not st.cache_data: cache_data would hand
every run a pickled copy (about 0.6 MB per trace, several per run); the pages only read them. Pages get NumPy
arrays and strings from here; they never see a tensor or a module.
"""
from __future__ import annotations

import functools
import inspect
import os
import re
import secrets
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from model import records
from model.records import CheckpointError, ModelConfig, Translation
from views.plumbing import urlstate
from viz.kinds import LANGUAGE_NAMES, kind_labels  # noqa: F401  (pages import kind_labels from here)

if TYPE_CHECKING:
    from model import service

from views.plumbing.languages import (  # noqa: F401  (pages import them from here)
    NO_LANGUAGES,
    ModelKey,
    config_languages,
    language_codes,
    language_labels,
)
from views.plumbing.paths import ROOT, checkpoint_dir, public_message  # noqa: F401  (pages import them from here)


@functools.cache
def _service():
    """model.service, imported on first use: it imports torch (a second or more), and a session's first run draws
    the sidebar before that, so that the browser draws it while the server imports (app.py)."""
    from model import service
    service.use_threads(int(os.environ.get("ATLAS_TORCH_THREADS", "1")))  # one per request: model/inference/runtime.py
    return service


def default_model() -> str:
    """The model a new session opens (ATLAS_DEFAULT_MODEL)."""
    return os.environ.get("ATLAS_DEFAULT_MODEL", "multi30k-de-en")


EXAMPLES = records.APP_EXAMPLES  # from Multi30k's validation set; the trainer's film uses the same ones as probes

VIEWS = list(records.VIEWS)
KINDS = records.KINDS  # their names with the model's languages: kind_labels()
# Side by side: off, two sentences on one model, or one sentence on two models; drawn on these pages.
COMPARE = {"off": "off", "sentence": "two sentences, one model", "model": "one sentence, two models"}
COMPARE_VIEWS = ("Attention", "Decoding")
ROLE_SWAP = ("Der Hund beißt den Mann.", "Den Mann beißt der Hund.")  # the same words, subject and object swapped
MAX_DECODE_STEPS = 100  # upper bound of the max-length control, protects a shared server

PARAMS = urlstate.params(EXAMPLES[0], VIEWS, KINDS, MAX_DECODE_STEPS, COMPARE, ROLE_SWAP[1])


def _fixups(values: dict) -> None:
    if values["ckpt"] is None:
        values["ckpt"] = default_model()
    if values["ckpt2"] is None:  # side by side's default second model: the first one's untrained twin
        values["ckpt2"] = str(ModelKey.parse(values["ckpt"]).other_twin())


def init_state() -> bool:
    """Take the state from the URL on a session's first run and on Back/Forward; True when it did."""
    return urlstate.adopt_url_if_needed(PARAMS, _fixups)


def sync_url() -> None:
    """Write the current state into the URL's query parameters."""
    urlstate.write_url(PARAMS)


def _offered_folders() -> list[str]:
    """Names of the model folders the server offers: the folders directly under the checkpoint folder (a link
    pointing outside it, a hidden folder or a name that is not a plain folder name is not offered)."""
    root = checkpoint_dir()
    if not root.is_dir():
        return []
    top = root.resolve()
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.resolve().parent == top)


def checkpoint_choices() -> list[str]:
    """The sidebar's models, as the URL names them: every folder under checkpoints/, plus the default's untrained
    twin."""
    default = ModelKey(default_model())
    return [str(default), str(default.other_twin())] + [name for name in _offered_folders() if name != default.name]


def offered(key: ModelKey) -> bool:
    """Does the server offer this model? Its folders and their untrained twins (toys are checked on loading), read
    between any two of its languages."""
    name = key.name
    return not key.toy and (name in _offered_folders() or (
        name == default_model() and "/" not in name and name not in ("", ".", "..")))


MAX_TOYS = 32  # toy models kept by the server (about 0.4 MB each), oldest dropped first
_toys: dict[ModelKey, service.Model] = {}
_toys_lock = threading.Lock()


def keep_toy(task: str, model: service.Model) -> ModelKey:
    """Keep a toy model trained live (in this server process only) and return its key."""
    key = ModelKey(task, run=secrets.token_hex(4))
    with _toys_lock:
        _toys[key] = model
        while len(_toys) > MAX_TOYS:
            _toys.pop(next(iter(_toys)))
    return key


def checkpoint_label(key: ModelKey | str) -> str:
    """Short enough for the sidebar's select box (which holds the URL's text); the help text says the rest. It names
    the model: its languages are the sidebar's, beside it."""
    key = ModelKey.parse(key) if isinstance(key, str) else key
    if key.toy:
        return f"toy: {key.name} (trained live)"
    if key.twin:
        return f"{key.name} (untrained)"
    return f"{key.name} (trained)" if key.name == default_model() else key.name


@st.cache_resource(show_spinner="Loading the model…")
def _load(folder: str) -> service.Model:
    return _service().load(folder)


@st.cache_resource(show_spinner=False)
def _twin(folder: str) -> service.Model:
    return _service().untrained_twin(_load(folder), seed=0)


@st.cache_resource(show_spinner=False)
def _paired(key: ModelKey, src: str, tgt: str) -> service.Model:
    """A many-to-many model read between src and tgt: a view of the loaded model, no copy of its weights."""
    model, error = load_model(key)
    if model is None:
        raise CheckpointError(error)
    return _service().with_languages(model, src, tgt)


def load_model(key: ModelKey) -> tuple[service.Model | None, str | None]:
    """(model, None) or (None, a message saying what is wrong and how to fix it)."""
    if key.pair is not None:
        try:
            return _paired(key.base, *key.pair), None
        except CheckpointError as e:
            return None, str(e)
        except ValueError:
            return None, (f"The model {key.name} has no language {key.pair[0]!r} or {key.pair[1]!r}: choose "
                          "its languages in the sidebar.")
    if key.toy:
        with _toys_lock:
            toy = _toys.get(key)
        return (toy, None) if toy is not None else (None, (
            f"The toy model {key} is not on this server any more: toy models trained live are kept only while "
            "the server runs (and the last 32 of them). Train it again on the Training page."))
    if not offered(key):
        asked = f"“{key}”" if re.fullmatch(r"[\w-][\w.-]*", key.name) else "the link names"
        return None, (f"This server does not offer the model {asked}. A link may name only a model in the "
                      "sidebar's Model list (the folders of the server's checkpoint folder, their untrained twins, "
                      "and toy models trained on the Training page). Choose one there.")
    folder = key.folder()
    try:
        return (_twin(str(folder)) if key.twin else _load(str(folder))), None
    except CheckpointError as e:
        return None, public_message(str(e))
    except Exception as e:  # anything else still must not reach the user as a trace
        return None, public_message(f"{folder}: could not be loaded ({type(e).__name__}: {e}). "
                                    "Choose another checkpoint.")


def _model(key: ModelKey) -> service.Model:
    model, error = load_model(key)
    if model is None:
        raise CheckpointError(error)
    return model


# The requests a page makes that the server keeps, one line each: the name pages call, the model.service function
# that answers, how many answers are kept, and whether every session shares one answer (st.cache_resource: records
# pages only read) or gets a copy (st.cache_data: small values), and what the page says while it waits (False:
# nothing, the page's own placeholder shows). A page calls `name(key, ...)` with the answer's own
# arguments after its model, in its order (tuples, which a cache can hash, are handed on as lists); a call that
# leaves an argument to its default is kept as the call that names it.
@dataclass(frozen=True)
class Kept:
    answer: str  # the model.service function
    entries: int
    shared: bool = True
    spinner: str | bool = False


KEPT = {
    # a sentence: greedy decoding (after a forced prefix) with the full trace, as NumPy (~0.6 MB with the shipped
    # model); beam search's output, untraced; the model's plain facts
    "trace_sentence": Kept("trace", 64),
    "beam_translation": Kept("translate", 128),
    "facts": Kept("facts", 8),
    "wrong_language": Kept("looks_like_target_language", 128, shared=False),
    # teacher-forced passes over the decoding's own tokens (or a reference): one attribution row per step shown (a
    # row costs the gradient methods a batch row of its own), the Masks page's causal experiment and its reference
    "teacher_forced": Kept("teacher_forced", 64),
    "attribution": Kept("attribution", 64),
    "reference_tokens": Kept("causal_reference", 64),
    "causal_experiment": Kept("causal_experiment", 64),
    "vocab_embeddings": Kept("embedding_matrix", 8),
    # the what-if lab (the What if page, the Decoding page's lens and contrast, the Attention page's knockout)
    "knockout": Kept("knockout", 32),
    "patching": Kept("patching", 32),
    "logit_lens": Kept("logit_lens", 64),
    "contributions": Kept("contributions", 32),
    "contrast": Kept("contrast", 64),
    "ablated": Kept("ablation", 64, shared=False),
    "val_translations": Kept("val_translations", 32, shared=False),
    # word alignment: the sidebar's sentence and a translation word by word, and the 100 annotated pairs
    "aligned_sentence": Kept("align_sentence", 32),
    "annotated_pairs": Kept("annotated_pairs", 4, spinner="Reading the 100 annotated pairs through the model…"),
}


def _kept(name: str, kept: Kept):
    """The function pages call as `name` (see KEPT), with the answer's signature and words."""
    def ask(key: ModelKey, *args):
        return getattr(_service(), kept.answer)(_model(key), *(list(a) if isinstance(a, tuple) else a for a in args))

    # Streamlit keys a function's cache on its module, qualified name and source: one name per request, one cache
    ask.__name__ = ask.__qualname__ = name
    cached = (st.cache_resource if kept.shared else st.cache_data)(max_entries=kept.entries,
                                                                     show_spinner=kept.spinner)(ask)
    signature = None  # the answer's, read on the first call (the service is imported then, not before)

    def call(key: ModelKey, *args, **kwargs):
        nonlocal signature
        signature = signature or inspect.signature(getattr(_service(), kept.answer))
        bound = signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return cached(key, *list(bound.arguments.values())[1:])

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"model.service.{kept.answer} of `key`'s model, kept ({kept.entries} answers, "  \
                   f"{'shared by every session' if kept.shared else 'a copy per run'})."
    call.clear = cached.clear
    return call


(trace_sentence, beam_translation, facts, wrong_language, teacher_forced, attribution, reference_tokens,
 causal_experiment, vocab_embeddings, knockout, patching, logit_lens, contributions, contrast, ablated,
 val_translations, aligned_sentence, annotated_pairs) = (
    _kept(name, kept) for name, kept in KEPT.items())  # KEPT's names, in its order (a test checks)


# Two answers are made from a kept trace: the export's JSON of the trace the figures show, and the sentence padded
# in a batch beside its greedy decoding alone (kept, so usually no search at all).
@st.cache_data(max_entries=32, show_spinner=False)
def trace_json(key: ModelKey, text: str, max_len: int, prefix: tuple[str, ...], decoding: str) -> str:
    """The trace the figures show, in `python -m model.export`'s JSON schema."""
    return _service().trace_json(_model(key), trace_sentence(key, text, max_len, prefix), str(key), decoding or None)


@st.cache_resource(max_entries=64, show_spinner=False)
def padded_batch(key: ModelKey, text: str, use_mask: bool, max_len: int = 0) -> dict:
    """The sentence padded in a batch with a longer partner (the model picks it), both searched with the session's
    length limit `max_len` (0: automatic); a decoding the translator does not accept as the one alone is redone."""
    model, alone = _model(key), trace_sentence(key, text, max_len)
    try:
        return _service().padded_batch(model, text, use_mask, alone, max_len or None)
    except ValueError:  # refused (a vocabulary naming a token twice cannot encode it back): decoded there instead
        return _service().padded_batch(model, text, use_mask, max_len=max_len or None)


def languages_of(key: ModelKey) -> dict:
    """language_labels of `key`'s model (its language pair, else its config's), read without loading the model (a
    session's first run draws the sidebar before torch is imported); NO_LANGUAGES where the folder or its config
    cannot be read. The same labels as model_facts(key)["langs"]."""
    if key.toy:
        return language_labels(key, "", "")
    langs = config_languages(key) if offered(key) else None
    return NO_LANGUAGES if langs is None else language_labels(key, *langs)


def model_facts(key: ModelKey) -> dict:
    """Plain facts about the loaded model (parameter counts, metrics, specials, target vocabulary; kept), and its
    languages as the pages name them."""
    kept = facts(key)
    return kept | {"langs": language_labels(key, kept["src_lang"], kept["tgt_lang"])}


@dataclass(frozen=True)
class Traced:
    """The decoding the figures show for one sentence on one model, and how to say which it is."""

    result: Translation  # its trace
    greedy: Translation  # plain greedy decoding (the same as result when mode == "greedy")
    beam: Translation | None  # beam search's output, when beam decoding was chosen
    mode: str  # "greedy", "beam" (traced along its output) or "forced" (the user's prefix)
    shows: str  # the same, in words, for captions
    forced: tuple[str, ...]  # the tokens the decoder was run along (empty for greedy)


def traced_decoding(key: ModelKey, text: str, decoding: str, beam_size: int, max_len: int,
                    prefix: tuple[str, ...] = (), greedy: Translation | None = None) -> Traced:
    """Trace what the figures show: the user's forced prefix, else beam search's output, else greedy (`greedy`:
    the sentence's greedy trace where the caller has it already)."""
    greedy = greedy if greedy is not None else trace_sentence(key, text, max_len)
    beam = beam_translation(key, text, beam_size, max_len) if decoding == "beam" else None
    if prefix:
        mode, forced = "forced", prefix
        shows = f"your forced first {len(prefix)} token(s), then greedy decoding"
    elif beam is not None and beam.raw_tokens:
        # Forcing the decoder along the beam's tokens (and its end token, Marian's </s>) records exactly what it
        # computed for them.
        end = model_facts(key)["end_token"]
        mode, forced = "beam", tuple(beam.raw_tokens) + ((end,) if beam.finished else ())
        shows = f"beam search (beam {beam_size}), traced along its output"
    else:
        mode, forced = "greedy", ()
        shows = "greedy decoding" + (" (beam search gave an empty output)" if beam is not None else "")
    result = trace_sentence(key, text, max_len, forced) if forced else greedy
    return Traced(result, greedy, beam, mode, shows, forced)


@dataclass
class Context:
    """What every view gets: the traced sentence, the state, and which decoding the figures show."""

    key: ModelKey
    cfg: ModelConfig
    result: Translation  # the traced decoding every figure shows (.trace a SentenceTrace)
    text: str
    max_len: int
    mode: str  # the decoding traced: "greedy", "beam" (traced along its output) or "forced" (the user's prefix)
    shows: str  # the same, in words, for captions
    facts: dict
    present: bool = False  # presenter mode: one section of the page at a time, large type
    other: Context | None = None  # side by side: the second sentence or model (Attention and Decoding)
    label: str = ""  # side by side: "A · …" / "B · …", what this side is

    @property
    def langs(self) -> dict:
        """{"src": "DE", "tgt": "EN", "src_name": "German", "tgt_name": "English"} of the loaded model."""
        return self.facts["langs"]

