"""Shared app state: cached model loading, cached traces and the URL schema.

The model is loaded once per checkpoint and each sentence is traced once, so changing a layer, head or view
never runs the model again. Traces are kept with st.cache_resource, not st.cache_data: cache_data would hand
every run a pickled copy (about 0.6 MB per trace, several per run); the pages only read them. Pages get NumPy
arrays and strings from here; they never see a tensor or a module.
"""
from __future__ import annotations

import functools
import os
import re
import secrets
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from model import records
from model.records import Attribution, CheckpointError, ModelConfig, Translation
from model.training.data import read_split
from views.plumbing import urlstate
from viz.kinds import LANGUAGE_NAMES, kind_labels  # noqa: F401  (pages import kind_labels from here)

if TYPE_CHECKING:
    from model import service

from views.plumbing.languages import (  # noqa: F401  (pages import them from here)
    NO_LANGUAGES,
    config_languages,
    language_codes,
    language_labels,
    pair_key,
    split_pair,
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


TWIN = ":untrained"  # suffix of a checkpoint key: same architecture, random weights

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
        values["ckpt2"] = values["ckpt"].removesuffix(TWIN) + TWIN if not values["ckpt"].endswith(TWIN) else \
            values["ckpt"].removesuffix(TWIN)


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
    """Checkpoint keys: every folder under checkpoints/, plus the untrained twin of the default."""
    default = default_model()
    return [default, default + TWIN] + [name for name in _offered_folders() if name != default]


def offered(key: str) -> bool:
    """Does the server offer this model? Its folders and their untrained twins (toys are checked on loading), read
    between any two of its languages."""
    name = split_pair(key)[0].removesuffix(TWIN)
    return name in _offered_folders() or (name == default_model() and "/" not in name and name not in ("", ".", ".."))


TOY = "toy:"  # prefix of a toy model trained live on the Training page: toy:<task>:<run id>
MAX_TOYS = 32  # toy models kept by the server (about 0.4 MB each), oldest dropped first
_toys: dict[str, service.Model] = {}
_toys_lock = threading.Lock()


def is_toy(key: str) -> bool:
    return key.startswith(TOY)


def keep_toy(task: str, model: service.Model) -> str:
    """Keep a toy model trained live (in this server process only) and return its checkpoint key."""
    key = f"{TOY}{task}:{secrets.token_hex(4)}"
    with _toys_lock:
        _toys[key] = model
        while len(_toys) > MAX_TOYS:
            _toys.pop(next(iter(_toys)))
    return key


def checkpoint_label(key: str) -> str:
    """Short enough for the sidebar's select box; the help text says the rest."""
    if is_toy(key):
        return f"toy: {key.split(':')[1]} (trained live)"
    if key.endswith(TWIN):
        return f"{key[: -len(TWIN)]} (untrained)"
    return f"{key} (trained)" if key == default_model() else key


def is_twin(key: str) -> bool:
    return key.endswith(TWIN)


@st.cache_resource(show_spinner="Loading the model…")
def _load(folder: str) -> service.Model:
    return _service().load(folder)


@st.cache_resource(show_spinner=False)
def _twin(folder: str) -> service.Model:
    return _service().untrained_twin(_load(folder), seed=0)


@st.cache_resource(show_spinner=False)
def _paired(key: str, src: str, tgt: str) -> service.Model:
    """A many-to-many model read between src and tgt: a view of the loaded model, no copy of its weights."""
    model, error = load_model(key)
    if model is None:
        raise CheckpointError(error)
    return _service().with_languages(model, src, tgt)


def load_model(key: str) -> tuple[service.Model | None, str | None]:
    """(model, None) or (None, a message saying what is wrong and how to fix it)."""
    base, pair = split_pair(key)
    if pair is not None:
        try:
            return _paired(base, *pair), None
        except CheckpointError as e:
            return None, str(e)
        except ValueError:
            return None, (f"The model {base.removesuffix(TWIN)} has no language {pair[0]!r} or {pair[1]!r}: choose "
                          "its languages in the sidebar.")
    if is_toy(key):
        with _toys_lock:
            toy = _toys.get(key)
        return (toy, None) if toy is not None else (None, (
            f"The toy model {key} is not on this server any more: toy models trained live are kept only while "
            "the server runs (and the last 32 of them). Train it again on the Training page."))
    if not offered(key):
        asked = f"“{key}”" if re.fullmatch(r"[\w-][\w.-]*(:untrained)?", key) else "the link names"
        return None, (f"This server does not offer the model {asked}. A link may name only a model in the "
                      "sidebar's Model list (the folders of the server's checkpoint folder, their untrained twins, "
                      "and toy models trained on the Training page). Choose one there.")
    name = key[: -len(TWIN)] if key.endswith(TWIN) else key
    folder = checkpoint_dir() / name
    try:
        return (_twin(str(folder)) if key.endswith(TWIN) else _load(str(folder))), None
    except CheckpointError as e:
        return None, public_message(str(e))
    except Exception as e:  # anything else still must not reach the user as a trace
        return None, public_message(f"{folder}: could not be loaded ({type(e).__name__}: {e}). "
                                    "Choose another checkpoint.")


def _model(key: str) -> service.Model:
    model, error = load_model(key)
    if model is None:
        raise CheckpointError(error)
    return model


@st.cache_resource(max_entries=64, show_spinner=False)  # ~0.6 MB each with the shipped model
def trace_sentence(key: str, text: str, max_len: int, prefix: tuple[str, ...] = ()) -> Translation:
    """Greedy decoding with the full trace, as NumPy (cached per checkpoint, sentence and prefix).

    A prefix ending in <eos> is a whole output (a beam hypothesis traced along its tokens).
    """
    return _service().trace(_model(key), text, max_len=max_len or None, prefix=list(prefix) or None)


@st.cache_data(max_entries=32, show_spinner=False)
def trace_json(key: str, text: str, max_len: int, prefix: tuple[str, ...], decoding: str) -> str:
    """The trace the figures show, in `python -m model.export`'s JSON schema."""
    return _service().trace_json(_model(key), trace_sentence(key, text, max_len, prefix), key, decoding or None)


# The requests a page makes that the server keeps, one line each: the name pages call, the model.service function
# that answers (the model first, then the page's arguments in the page's order; tuples, which a cache can hash, are
# handed on as lists), how many answers are kept, and whether every session shares one answer (st.cache_resource:
# records pages only read) or gets a copy (st.cache_data: small values).
@dataclass(frozen=True)
class Kept:
    answer: str  # the model.service function
    entries: int
    shared: bool = True
    doc: str = ""


KEPT = {
    "wrong_language": Kept("looks_like_target_language", 128, shared=False,
                           doc="Does the text look like the model's target language (a hint for a user who typed it)?"),
    "teacher_forced": Kept("teacher_forced", 64, doc="SentenceTrace of a teacher-forced pass over <bos> + tgt_tokens "
                                                     "(key, text, tgt_tokens, causal: the causal mask on or off)."),
    # The what-if lab (the What if page, the Decoding page's lens and contrast): teacher-forced on the given tokens.
    "knockout": Kept("knockout", 32, doc="Each head alone switched off: the change of every token's log-probability "
                                         "(key, text, tgt_tokens)."),
    "patching": Kept("patching", 32, doc="Activation patching clean -> corrupted, the same number of source tokens "
                                         "(key, clean, corrupt, tgt_tokens)."),
    "logit_lens": Kept("logit_lens", 64, doc="Each decoder layer's output through the final norm and the generator "
                                             "(key, text, tgt_tokens, 0-based step, k)."),
    "contributions": Kept("contributions", 32, doc="Value norms and ALTI+ teacher-forced on the decoding's own tokens, "
                                                   "its end token included (key, text, tgt_tokens)."),
    "contrast": Kept("contrast", 64, doc="Why target and not foil: source attribution of the difference, and head "
                                         "knockout (key, text, tgt_tokens, 0-based step, target, foil)."),
    "causal_experiment": Kept("causal_experiment", 64, doc="(trace with the causal mask, trace without it, the "
                                                           "comparison) (key, text, tokens, reference, ended)."),
    "vocab_embeddings": Kept("embedding_matrix", 8, doc="(V, d) learned embedding matrix of 'src' or 'tgt', and its "
                                                        "tokens (key, side)."),
}


def _kept(name: str, kept: Kept):
    """The cached function pages call as `name` (see KEPT)."""
    def ask(key: str, *args):
        return getattr(_service(), kept.answer)(_model(key), *(list(a) if isinstance(a, tuple) else a for a in args))

    # Streamlit keys a function's cache on its module, qualified name and source: one name per request, one cache
    ask.__name__ = ask.__qualname__ = name
    ask.__doc__ = kept.doc
    cache = st.cache_resource if kept.shared else st.cache_data
    return cache(max_entries=kept.entries, show_spinner=False)(ask)


(wrong_language, teacher_forced, knockout, patching, logit_lens, contributions, contrast, causal_experiment,
 vocab_embeddings) = (_kept(name, kept) for name, kept in KEPT.items())  # KEPT's names, in its order (a test checks)


@st.cache_resource(max_entries=128, show_spinner=False)
def beam_translation(key: str, text: str, beam: int, max_len: int) -> Translation:
    return _service().translate(_model(key), text, beam=beam, max_len=max_len or None)


@st.cache_resource(max_entries=64, show_spinner=False)
def attribution(key: str, text: str, tgt_tokens: tuple[str, ...], row: int) -> Attribution:
    """The attribution of token `row` (0-based) of a decoding to the source (columns), NumPy only.

    Teacher-forced along the decoding's own tokens: the decoder reads exactly the prefixes it read while
    decoding, so it explains the choice made at step row + 1. One token, not the whole decoding: the page shows
    one step, and each explained token costs the gradient methods a batch row of its own (the whole matrix
    was most of a first visit's server CPU)."""
    return _service().attribution(_model(key), text, list(tgt_tokens), rows=[row])


@st.cache_resource(max_entries=64, show_spinner=False)
def padded_batch(key: str, text: str, use_mask: bool, max_len: int = 0) -> dict:
    """The sentence padded in a batch with a longer partner (the model picks it), both searched with the session's
    length limit `max_len` (0: automatic).

    Its greedy translation alone is the header's (`trace_sentence` with the same limit: kept, so usually no
    search at all); a decoding the translator does not accept as that is redone there."""
    model, alone = _model(key), trace_sentence(key, text, max_len)
    try:
        return _service().padded_batch(model, text, use_mask, alone, max_len or None)
    except ValueError:  # refused (a vocabulary naming a token twice cannot encode it back): decoded there instead
        return _service().padded_batch(model, text, use_mask, max_len=max_len or None)


@st.cache_resource(max_entries=64, show_spinner=False)
def reference_tokens(key: str, text: str, fallback: tuple[str, ...],
                     finished: bool = True) -> tuple[tuple[str, ...], bool, str]:
    """(tokens to teacher-force, whether they ended at <eos>, what they are): see service.causal_reference;
    `fallback` is the model's own output, `finished` whether it ended at <eos>."""
    tokens, ended, what = _service().causal_reference(_model(key), text, list(fallback), finished)
    return tuple(tokens), ended, what


def languages_of(key: str) -> dict:
    """language_labels of `key`'s model (its language pair, else its config's), read without loading the model (a
    session's first run draws the sidebar before torch is imported); NO_LANGUAGES where the folder or its config
    cannot be read. The same labels as model_facts(key)["langs"]."""
    if is_toy(key):
        return language_labels(key, "", "")
    langs = config_languages(key) if offered(key) else None
    return NO_LANGUAGES if langs is None else language_labels(key, *langs)


@st.cache_resource(max_entries=8, show_spinner=False)  # shared and read-only: no copy per run
def model_facts(key: str) -> dict:
    """Plain facts about the loaded model: parameter counts, metrics, specials, target vocabulary."""
    facts = _service().facts(_model(key))
    return facts | {"langs": language_labels(key, facts["src_lang"], facts["tgt_lang"])}


@st.cache_data(max_entries=64, show_spinner=False)
def ablated(key: str, text: str, tokens: tuple[str, ...], off: tuple, max_len: int) -> tuple[str, float, float]:
    """(greedy translation with the heads off, log-prob of `tokens` with all heads, and with the heads off)."""
    model = _model(key)
    new = _service().translate(model, text, max_len=max_len or None, off_heads=off)
    return new.text, _service().score(model, text, list(tokens)), _service().score(model, text, list(tokens), off)


@st.cache_data(max_entries=32, show_spinner=False)
def val_translations(key: str, folder: str, off: tuple, n: int) -> tuple[list[str], list[str]]:
    """(greedy translations of the first n validation sentences with the heads off, their references)."""
    src, ref = read_split(folder, "val")
    return _service().translate_batch(_model(key), src[:n], off_heads=off or None), ref[:n]


@dataclass(frozen=True)
class Traced:
    """The decoding the figures show for one sentence on one model, and how to say which it is."""

    result: Translation  # its trace
    greedy: Translation  # plain greedy decoding (the same as result when mode == "greedy")
    beam: Translation | None  # beam search's output, when beam decoding was chosen
    mode: str  # "greedy", "beam" (traced along its output) or "forced" (the user's prefix)
    shows: str  # the same, in words, for captions
    forced: tuple[str, ...]  # the tokens the decoder was run along (empty for greedy)


def traced_decoding(key: str, text: str, decoding: str, beam_size: int, max_len: int,
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

    key: str
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

