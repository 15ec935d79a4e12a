"""Attention kinds (``enc_self``, ``dec_self``, ``cross``): their names, and the sides and languages their axes
are titled with.

The language labels (short codes such as "DE") are set per thread, like the theme (:mod:`viz.theme`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from viz.text import escape_token
from viz.theme import theme

# Which side each attention kind reads from: (query side, key side), filled in
# with the source / target language names.
KIND_SIDES = {
    "enc_self": ("{src}, source", "{src}, source"),
    "dec_self": ("{tgt}, decoder input", "{tgt}, decoder input"),
    "cross": ("{tgt}, decoder input", "{src}, source"),
}
KIND_NAMES = {
    "enc_self": "encoder self-attention",
    "dec_self": "decoder self-attention (masked)",
    "cross": "cross-attention (decoder → encoder)",
}


# The languages axis titles name (short codes such as "DE"), per thread like the theme: the app sets the loaded
# model's with using_languages(), so every figure of the page is labelled for that model without each caller
# passing them. An explicit src_lang/tgt_lang argument still wins.
_LANGS: ContextVar[tuple[str, str]] = ContextVar("viz_languages", default=("DE", "EN"))


def languages() -> tuple[str, str]:
    """(source, target) language labels figures are built with now."""
    return _LANGS.get()


@contextmanager
def using_languages(src: str, tgt: str) -> Iterator[tuple[str, str]]:
    """Build the figures inside the block with these language labels."""
    token = _LANGS.set((src, tgt))
    try:
        yield (src, tgt)
    finally:
        _LANGS.reset(token)


def resolve_languages(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """The given labels, or the ones in force (:func:`using_languages`) where None."""
    src, tgt = languages()
    return src_lang or src, tgt_lang or tgt


def kind_sides(kind: str, src_lang: str | None = None, tgt_lang: str | None = None) -> tuple[str, str]:
    """Return ``(query_side, key_side)``, e.g. ``("EN, decoder input", "DE, source")`` for cross."""
    if kind not in KIND_SIDES:
        raise ValueError(f"kind must be one of {sorted(KIND_SIDES)}, got {kind!r}")
    src_lang, tgt_lang = resolve_languages(src_lang, tgt_lang)
    src, tgt = escape_token(src_lang), escape_token(tgt_lang)
    q_side, k_side = KIND_SIDES[kind]
    return q_side.format(src=src, tgt=tgt), k_side.format(src=src, tgt=tgt)


def axis_titles(kind: str, src_lang: str | None = None, tgt_lang: str | None = None) -> tuple[str, str]:
    """Return ``(query_title, key_title)`` for ``kind`` in enc_self/dec_self/cross.

    E.g. cross: ``("query (EN, decoder input) ↓", "key (DE, source) →")``.
    """
    q_side, k_side = kind_sides(kind, src_lang, tgt_lang)
    if theme().short_axis_titles:  # the language only; which input it is, the page's controls say
        q_side, k_side = q_side.split(",")[0], k_side.split(",")[0]
    return f"query ({q_side}) ↓", f"key ({k_side}) →"


# Names of the languages a model's config can give (ISO 639-1 codes); any other code is shown as the code.
LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French", "es": "Spanish", "it": "Italian", "nl": "Dutch",
                  "pt": "Portuguese", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "ar": "Arabic", "cs": "Czech",
                  "pl": "Polish", "sv": "Swedish", "fi": "Finnish", "da": "Danish", "tr": "Turkish", "uk": "Ukrainian",
                  "ro": "Romanian", "hu": "Hungarian", "el": "Greek", "ko": "Korean", "hi": "Hindi"}

# What each kind does, said once for the app's Attention page and the lesson file ({src}, {tgt}: language names).
KIND_EXPLAIN = {
    "enc_self": "Each {src} token (row) mixes in information from every {src} token (column), in both directions.",
    "dec_self": "Each {tgt} position (row) looks only at itself and earlier positions (columns): later ones are "
                "masked, since at generation time they do not exist yet. Row i is the step that predicts output "
                "token i+1.",
    "cross": "Each {tgt} position (row) looks at the {src} source (columns). Row i is the step that predicts "
             "output token i+1.",
}


def kind_labels(langs: dict) -> dict[str, str]:
    """The attention kinds' names with the model's languages (``langs["src"]``, ``langs["tgt"]``: "DE", "EN"),
    as the app's select boxes and the lesson file's offer them."""
    s, t = langs["src"], langs["tgt"]
    return {"enc_self": f"Encoder self-attention ({s} → {s})", "dec_self": f"Decoder masked self-attention ({t} → {t})",
            "cross": f"Cross-attention ({t} queries → {s} keys)"}
