"""spaCy rule-based tokenizers (no model download) and a Moses detokenizer for English output.

spaCy and sacremoses are imported when a word model first needs them: a SentencePiece model (the shipped one,
an imported Marian) never does, and the two imports are a large part of the app's cold start
(measured by `python benchmarks/bench_pages.py --baseline floor --cold-only`).
"""
from __future__ import annotations

import functools
import re
import threading
import unicodedata

_CONTROL = re.compile(r"[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_lock = threading.Lock()


def clean_text(text: str) -> str:
    """NFC-normalise, drop control and bidi-override characters, collapse whitespace."""
    text = unicodedata.normalize("NFC", text)
    text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


@functools.cache
def _tokenizer(lang: str):
    with _lock:  # spacy.blank is not meant to be built concurrently
        import spacy

        try:
            return spacy.blank(lang).tokenizer
        except ImportError:  # a language spaCy has no rules for (an imported model's "tgt"): its generic rules
            return spacy.blank("xx").tokenizer


def tokenize(text: str, lang: str) -> list[str]:
    """Case-kept spaCy tokens of cleaned text; `lang` is 'de' or 'en'."""
    return [t.text for t in _tokenizer(lang)(clean_text(text)) if not t.is_space]


@functools.cache
def _detokenizer(lang: str):
    with _lock:
        from sacremoses import MosesDetokenizer

        return MosesDetokenizer(lang=lang)


def detokenize(tokens: list[str], lang: str = "en") -> str:
    """Join tokens into normal text ("a dog ." -> "a dog.")."""
    text = _detokenizer(lang).detokenize(tokens)
    return re.sub(r"(\w) n't\b", r"\1n't", text) if lang == "en" else text  # spaCy splits "is|n't"
