"""Which model a request asks for (a typed key), and a model's languages as the pages name them.

Every cached answer of views/plumbing/state.py is keyed by a ModelKey: the checkpoint folder (or a toy model trained
live), trained or its untrained twin, and for a many-to-many model (NLLB, M2M100, mBART-50) the two languages it is
read between, so that each pair has its own traces while the weights are loaded once. The URL keeps the model as
text (`ckpt=nllb:untrained`, `ckpt=toy:copy:ab12`) and the pair as `src_lang`/`tgt_lang`; `str(key)` writes the whole
key in one line (`nllb@deu_Latn>eng_Latn:untrained`) for file names and messages. Reads config.json and
languages.json only: the sidebar is drawn before the model is loaded.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from model.records import ModelConfig
from views.plumbing.paths import checkpoint_dir
from viz.kinds import LANGUAGE_NAMES

TWIN = ":untrained"  # the URL's suffix of an untrained twin
PAIR, ARROW = "@", ">"
TOY = "toy:"  # the URL's prefix of a toy model trained live on the Training page: toy:<task>:<run id>
NO_LANGUAGES = {"src": "source", "tgt": "target", "src_name": "source", "tgt_name": "target"}
# NLLB's codes are ISO 639-3 with a script (deu_Latn); the names below are those of the codes a page is likely to see.
THREE_LETTER = {"deu": "de", "eng": "en", "fra": "fr", "spa": "es", "ita": "it", "nld": "nl", "por": "pt", "rus": "ru",
                "zho": "zh", "jpn": "ja", "arb": "ar", "ces": "cs", "pol": "pl", "swe": "sv", "fin": "fi", "dan": "da",
                "tur": "tr", "ukr": "uk", "ron": "ro", "hun": "hu", "ell": "el", "kor": "ko", "hin": "hi"}


@dataclass(frozen=True)
class ModelKey:
    """A request's model: hashable, so Streamlit's caches and functools key their answers by it (as its fields)."""

    name: str  # a folder of the checkpoint folder, or a toy's task
    twin: bool = False  # the untrained twin: the same architecture, random weights (seed 0)
    pair: tuple[str, str] | None = None  # (source, target) codes a many-to-many model is read between
    run: str | None = None  # a toy model trained live: its run id (`name` is its task)

    @classmethod
    def parse(cls, text: str) -> ModelKey:
        """The key a URL's or `str(key)`'s text names (any text parses: whether it is offered is checked on loading)."""
        if text.startswith(TOY):
            task, _, run = text.removeprefix(TOY).partition(":")
            return cls(task, run=run)
        twin = text.endswith(TWIN)
        body = text.removesuffix(TWIN)
        if PAIR not in body:
            return cls(body, twin)
        name, pair = body.rsplit(PAIR, 1)
        src, _, tgt = pair.partition(ARROW)
        return cls(name, twin, (src, tgt))

    def __str__(self) -> str:
        if self.toy:
            return f"{TOY}{self.name}:{self.run}"
        pair = f"{PAIR}{self.pair[0]}{ARROW}{self.pair[1]}" if self.pair else ""
        return self.name + pair + (TWIN if self.twin else "")

    @property
    def toy(self) -> bool:
        return self.run is not None

    @property
    def base(self) -> ModelKey:
        """The model without its language pair: the weights every pair reads."""
        return replace(self, pair=None)

    def with_pair(self, src: str | None, tgt: str | None) -> ModelKey:
        """This model read between src and tgt, when both are chosen (a toy has no languages)."""
        return replace(self, pair=(src, tgt)) if src and tgt and not self.toy else self

    def other_twin(self) -> ModelKey:
        """The untrained twin of a trained model, the trained model of a twin (side by side's default model B); a
        toy has no twin."""
        return self if self.toy else replace(self, twin=not self.twin)

    def folder(self) -> Path:
        """The checkpoint folder of its weights (the twin's too: its architecture is read there)."""
        return checkpoint_dir() / self.name


def language_codes(key: ModelKey) -> list[str]:
    """A many-to-many model's language codes (its languages.json), [] for any other model or an unreadable file."""
    if key.toy:
        return []
    try:
        codes = json.loads((key.folder() / "languages.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    return sorted(str(c) for c in codes) if isinstance(codes, dict) else []


def language_name(code: str) -> str:
    """German for de, de_DE and deu_Latn; the code itself where no name is known."""
    head = code.split("_")[0].lower()
    return LANGUAGE_NAMES.get(code.lower()) or LANGUAGE_NAMES.get(THREE_LETTER.get(head, head), code)


def language_labels(key: ModelKey, src_lang: str, tgt_lang: str) -> dict:
    """What the pages call the two sides: short codes for axes ("DE") and names for sentences ("German")."""
    if key.toy:  # a toy task reads and writes digits
        return {"src": "IN", "tgt": "OUT", "src_name": "input digits", "tgt_name": "output digits"}
    short = lambda code: code.split("_")[0].upper()  # noqa: E731  (deu_Latn: DEU; de_DE: DE)
    return {"src": short(src_lang), "tgt": short(tgt_lang), "src_name": language_name(src_lang),
            "tgt_name": language_name(tgt_lang)}


def config_languages(key: ModelKey) -> tuple[str, str] | None:
    """The (source, target) codes the key's model reads: its pair, else its config's; None when unreadable."""
    try:
        cfg = ModelConfig.load(key.folder() / "config.json")
    except (OSError, ValueError, TypeError, UnicodeDecodeError):  # model loading says what is wrong with it
        return None
    return key.pair or (cfg.src_lang, cfg.tgt_lang)
