"""Shared app state: cached model loading, cached traces, URL query parameters.

The model is loaded once per checkpoint (st.cache_resource) and each sentence is traced once
(st.cache_data), so changing a layer, head or view never runs the model again.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from model.checkpoint import CheckpointError
from model.translator import Translation, Translator

# One sentence is small matrix work: one thread per request is as fast as two, and sessions
# running at once do not fight over the cores.
torch.set_num_threads(int(os.environ.get("ATLAS_TORCH_THREADS", "1")))

ROOT = Path(__file__).resolve().parent.parent


def checkpoint_dir() -> Path:
    """Where checkpoint folders are looked for (ATLAS_CHECKPOINT_DIR, read at each run so tests can point it)."""
    return Path(os.environ.get("ATLAS_CHECKPOINT_DIR", ROOT / "checkpoints"))


def default_model() -> str:
    """The model a new session opens (ATLAS_DEFAULT_MODEL)."""
    return os.environ.get("ATLAS_DEFAULT_MODEL", "multi30k-de-en")

TWIN = ":untrained"  # suffix of a checkpoint key: same architecture, random weights

EXAMPLES = [  # from Multi30k's validation set
    "Ein brauner Hund rennt dem schwarzen Hund hinterher.",
    "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
    "Ein Junge mit Kopfhörern sitzt auf den Schultern einer Frau.",
    "Zwei Hunde spielen im hohen Gras mit einem orangen Spielzeug.",
    "Ein kleines Kind steht allein auf einem zerklüfteten Felsen.",
    "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen",
]
LONGER_EXAMPLE = "Ein älterer Mann geht mit einem braunen Hund an einer roten Leine im Park spazieren."

VIEWS = ["Overview", "Embeddings", "Positional encoding", "Attention", "Inside one head", "Masks", "Decoding"]
KINDS = {"enc_self": "Encoder self-attention (DE → DE)", "dec_self": "Decoder masked self-attention (EN → EN)",
         "cross": "Cross-attention (EN queries → DE keys)"}
MAX_DECODE_STEPS = 100  # upper bound of the max-length control, protects a shared server

# key -> (default, parser); these live in the URL so a link opens exactly one view
PARAMS = {
    "text": (EXAMPLES[0], str),
    "view": ("Overview", str),
    "kind": ("cross", str),
    "layer": (1, int),
    "head": (1, int),
    "ckpt": (None, str),  # None: default_model()
    "decoding": ("greedy", str),
    "beam": (5, int),
    "max_len": (0, int),
}


def init_state() -> None:
    """On a session's first run, take state from the URL; afterwards keep widget values alive."""
    ss = st.session_state
    if "_initialised" not in ss:
        ss["_initialised"] = True
        for key, (default, parse) in PARAMS.items():
            value = default
            if key in st.query_params:
                try:
                    value = parse(st.query_params[key])
                except ValueError:
                    value = default
            ss[key] = value
        if ss["ckpt"] is None:
            ss["ckpt"] = default_model()
        if ss["view"] not in VIEWS:
            ss["view"] = "Overview"
        if ss["kind"] not in KINDS:
            ss["kind"] = "cross"
        if ss["decoding"] not in ("greedy", "beam"):
            ss["decoding"] = "greedy"
        ss["beam"] = min(max(ss["beam"], 2), 10)
        ss["max_len"] = min(max(ss["max_len"], 0), MAX_DECODE_STEPS)
    else:
        # Streamlit forgets a widget's value when a run does not draw it; re-assigning keeps it.
        for key in PARAMS:
            if key in ss:
                ss[key] = ss[key]


def sync_url() -> None:
    """Write the current state into the URL's query parameters."""
    wanted = {k: str(st.session_state[k]) for k in PARAMS if k in st.session_state}
    if {k: st.query_params.get(k) for k in wanted} != wanted:
        st.query_params.from_dict(wanted)


def checkpoint_choices() -> list[str]:
    """Checkpoint keys: every folder under checkpoints/, plus the untrained twin of the default."""
    root, default = checkpoint_dir(), default_model()
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != default) if root.is_dir() else []
    return [default, default + TWIN] + folders


def checkpoint_label(key: str) -> str:
    if key.endswith(TWIN):
        return f"{key[: -len(TWIN)]} · untrained twin (random weights)"
    return f"{key} · trained" if key == default_model() else key


@st.cache_resource(show_spinner="Loading the model…")
def _load(folder: str) -> Translator:
    return Translator.from_checkpoint(folder)


@st.cache_resource(show_spinner=False)
def _twin(folder: str) -> Translator:
    return _load(folder).untrained_twin(seed=0)


def load_translator(key: str) -> tuple[Translator | None, str | None]:
    """(translator, None) or (None, a message saying what is wrong and how to fix it)."""
    name = key[: -len(TWIN)] if key.endswith(TWIN) else key
    folder = checkpoint_dir() / name
    try:
        return (_twin(str(folder)) if key.endswith(TWIN) else _load(str(folder))), None
    except CheckpointError as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - anything else still must not reach the user as a trace
        return None, f"{folder}: could not be loaded ({type(e).__name__}: {e}). Choose another checkpoint."


@st.cache_data(max_entries=64, show_spinner=False)  # ~0.6 MB each with the shipped model
def trace_sentence(key: str, text: str, max_len: int, prefix: tuple[str, ...] = ()) -> Translation:
    """Greedy decoding with the full trace, as NumPy (cached per checkpoint, sentence and prefix)."""
    translator, _ = load_translator(key)
    return translator.trace(text, max_len=max_len or None, prefix=list(prefix) or None).detached()


@st.cache_data(max_entries=128, show_spinner=False)
def beam_translation(key: str, text: str, beam: int, max_len: int) -> Translation:
    translator, _ = load_translator(key)
    return translator.translate(text, beam=beam, max_len=max_len or None)


@st.cache_data(max_entries=64, show_spinner=False)
def teacher_forced(key: str, text: str, tgt_tokens: tuple[str, ...], causal: bool):
    translator, _ = load_translator(key)
    return translator.teacher_forced(text, list(tgt_tokens), use_causal_mask=causal)


@st.cache_data(max_entries=64, show_spinner=False)
def padded_batch(key: str, text: str, longer: str, use_mask: bool) -> dict:
    translator, _ = load_translator(key)
    return translator.padded_batch(text, longer, use_padding_mask=use_mask)


@st.cache_data(max_entries=8, show_spinner="Projecting the vocabulary…")
def vocab_embeddings(key: str, side: str) -> tuple[np.ndarray, list[str]]:
    """(V, d) learned embedding matrix of 'src' or 'tgt', and its tokens."""
    translator, _ = load_translator(key)
    model = translator.model
    lut = (model.src_embed if side == "src" else model.tgt_embed).lut.weight.detach().float().numpy().copy()
    vocab = translator.src_vocab if side == "src" else translator.tgt_vocab
    return lut, list(vocab.itos)


@dataclass
class Context:
    """What every view gets: the loaded model, the traced sentence and the state."""

    key: str
    translator: Translator
    result: Translation  # greedy, with .trace a SentenceTrace
    text: str
    max_len: int

    @property
    def cfg(self):
        return self.translator.cfg
