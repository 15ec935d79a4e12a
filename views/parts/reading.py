"""How the model read the sentence and what it wrote: the header's lines above every page, and the Overview's notes.

A text without words (only punctuation or symbols, which the model still "translates"), unknown words (read as
`<unk>`), words read in fragments (SentencePiece spells a typo, a name or a number out of short pieces and never says
`<unk>`), a translation that repeats itself, and what the model card says of the model's limits. Every line is
computed from the sentence and the tokens on the page (model/text/reading.py) or read from the checkpoint's
metrics.json.
"""
from __future__ import annotations

import streamlit as st

from model.records import ModelConfig, Source
from model.text.reading import describe_fragments, describe_repetition, fragmented_words, has_words, repeated_run
from views.parts.text import md_escape

FRAGMENTS_HELP = ("“in N pieces”: every piece is in the vocabulary (✓), the word as a whole is not; the model reads "
                  "it as fragments. Often a typo, a name or a number.")


def reads_pieces(cfg: ModelConfig) -> bool:
    """Does the model read pieces (SentencePiece, or FSMT's byte pairs: a word can be split), rather than one token
    per word?"""
    return cfg.tokenizer != "spacy"


NO_WORDS = ("This text has no words or numbers, only punctuation or symbols: the model still writes a translation, "
            "but it is invented, not read from the text.")


def input_notes(source: Source, cfg: ModelConfig, text: str) -> list[tuple[str, str]]:
    """The header's notes on how the model read the sentence `text`, on every page, as (kind, Markdown) for
    views/parts/header.py: a text without words, the unknown words, and the words read in fragments with their
    piece counts."""
    notes = [] if has_words(text) else [("warning", NO_WORDS)]
    unknown = [t for t, u in zip(source.tokens, source.unknown) if u]
    if unknown:
        notes.append(("caption", "? Unknown to the model (read as `<unk>`): " + md_escape(", ".join(unknown))))
    line = describe_fragments(fragmented_words(source.tokens, reads_pieces(cfg)))
    if line:
        notes.append(("caption", md_escape(line)))
    return notes


def output_captions(tokens: list[str], source: Source, cfg: ModelConfig) -> list[str]:
    """The header's line on the translation it shows (its output `tokens`), when it repeats a run, as Markdown. It
    speaks of the output, so it belongs with the captions that a quiz question hides (views/parts/header.py)."""
    line = describe_repetition(repeated_run(tokens, source.tokens), reads_pieces(cfg))
    return [md_escape(line)] if line else []


def fragment_spans(source: Source, cfg: ModelConfig) -> list[tuple[int, int, str]]:
    """(first position, number of pieces, word) of each source word read in fragments, for the token table."""
    return [(w.start, w.n_pieces, w.text) for w in fragmented_words(source.tokens, reads_pieces(cfg))]


def repetition_caption(tokens: list[str], source: Source, cfg: ModelConfig) -> None:
    """Under the output tokens: the run the translation repeats, if any (the header's line, views/parts/header.py)."""
    for line in output_captions(tokens, source, cfg):
        st.caption(line)


def card_limits(metrics: dict) -> list[str]:
    """The limits the model card states, from metrics.json's `limits` (a list of sentences); [] when the
    checkpoint states none (a model trained or imported here, a toy, an untrained twin)."""
    limits = metrics.get("limits") if isinstance(metrics, dict) else None
    if not isinstance(limits, list):
        return []
    return [s for s in limits if isinstance(s, str) and s.strip()]


def card_section(metrics: dict) -> None:
    """What the model card says of the model's domain and limits, when the checkpoint says it."""
    limits = card_limits(metrics)
    if limits:
        st.markdown("**What the model card says** (its limits, from the checkpoint's `metrics.json`)\n\n"
                    + "\n".join(f"- {md_escape(s)}" for s in limits))


def forced_by(ctx, step_no: int, step) -> str:
    """Who forced decoding step `step_no` (1-based; "" when nobody did): a many-to-many model forces the target
    language's token first, as its generate() does; any other forced token is the user's."""
    if not step.forced:
        return ""
    lang_token = ctx.facts["languages"].get(ctx.facts["tgt_lang"] or "")
    if step_no == 1 and lang_token is not None and step.chosen_token == lang_token:
        return "forced: the target language's token, as the model's generate() starts"
    return "forced by you"
