"""A model's languages as the pages name them, and the language pair of a many-to-many model inside its key.

Every cached answer of views/plumbing/state.py is keyed by a model key. A many-to-many model (NLLB, M2M100, mBART-50)
read between two of its languages is another key: `nllb@deu_Latn>eng_Latn`, so that each pair has its own traces
while the weights are loaded once. An untrained twin keeps its suffix last: `nllb@deu_Latn>eng_Latn:untrained`.
Reads config.json and languages.json only: the sidebar is drawn before the model is loaded.
"""
from __future__ import annotations

import json

from model.records import ModelConfig
from views.plumbing.paths import checkpoint_dir
from viz.kinds import LANGUAGE_NAMES

TWIN = ":untrained"  # suffix of a checkpoint key: same architecture, random weights
PAIR, ARROW = "@", ">"
TOY = "toy:"
NO_LANGUAGES = {"src": "source", "tgt": "target", "src_name": "source", "tgt_name": "target"}
# NLLB's codes are ISO 639-3 with a script (deu_Latn); the names below are those of the codes a page is likely to see.
THREE_LETTER = {"deu": "de", "eng": "en", "fra": "fr", "spa": "es", "ita": "it", "nld": "nl", "por": "pt", "rus": "ru",
                "zho": "zh", "jpn": "ja", "arb": "ar", "ces": "cs", "pol": "pl", "swe": "sv", "fin": "fi", "dan": "da",
                "tur": "tr", "ukr": "uk", "ron": "ro", "hun": "hu", "ell": "el", "kor": "ko", "hin": "hi"}


def split_pair(key: str) -> tuple[str, tuple[str, str] | None]:
    """(the model's key without a language pair, the pair or None)."""
    twin = key.endswith(TWIN)
    body = key.removesuffix(TWIN)
    if key.startswith(TOY) or PAIR not in body:
        return key, None
    base, pair = body.rsplit(PAIR, 1)
    src, _, tgt = pair.partition(ARROW)
    return base + (TWIN if twin else ""), (src, tgt)


def pair_key(key: str, src: str | None, tgt: str | None) -> str:
    """`key` read between src and tgt, when both are chosen (the caller asks only for a model with languages:
    language_codes, read once per run)."""
    if not src or not tgt or key.startswith(TOY):
        return key
    twin = key.endswith(TWIN)
    return f"{key.removesuffix(TWIN)}{PAIR}{src}{ARROW}{tgt}{TWIN if twin else ''}"


def _folder(key: str):
    return checkpoint_dir() / split_pair(key)[0].removesuffix(TWIN)


def language_codes(key: str) -> list[str]:
    """A many-to-many model's language codes (its languages.json), [] for any other model or an unreadable file."""
    if key.startswith(TOY):
        return []
    try:
        codes = json.loads((_folder(key) / "languages.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    return sorted(str(c) for c in codes) if isinstance(codes, dict) else []


def language_name(code: str) -> str:
    """German for de, de_DE and deu_Latn; the code itself where no name is known."""
    head = code.split("_")[0].lower()
    return LANGUAGE_NAMES.get(code.lower()) or LANGUAGE_NAMES.get(THREE_LETTER.get(head, head), code)


def language_labels(key: str, src_lang: str, tgt_lang: str) -> dict:
    """What the pages call the two sides: short codes for axes ("DE") and names for sentences ("German")."""
    if key.startswith(TOY):  # a toy task reads and writes digits
        return {"src": "IN", "tgt": "OUT", "src_name": "input digits", "tgt_name": "output digits"}
    short = lambda code: code.split("_")[0].upper()  # noqa: E731  (deu_Latn: DEU; de_DE: DE)
    return {"src": short(src_lang), "tgt": short(tgt_lang), "src_name": language_name(src_lang),
            "tgt_name": language_name(tgt_lang)}


def config_languages(key: str) -> tuple[str, str] | None:
    """The (source, target) codes the key's model reads: its pair, else its config's; None when unreadable."""
    base, pair = split_pair(key)
    try:
        cfg = ModelConfig.load(_folder(key) / "config.json")
    except (OSError, ValueError, TypeError, UnicodeDecodeError):  # model loading says what is wrong with it
        return None
    return pair or (cfg.src_lang, cfg.tgt_lang)
