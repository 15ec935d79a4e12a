"""The header above every page: the sentence, the translation the figures show, and the notes on them.

The page's fragment draws it (into a slot app.py keeps above the page) after the page itself, because what it may say
depends on the page: while presenter mode's quiz asks about a decoding step, the translation stops at the prefix
that step read, and nothing else in the header (another decoding's output) gives the answer away.

In presenter mode the header is one line whatever the sentence's length: the text is cut with an ellipsis, and
"Whole text" (a popover) shows it whole, with the notes on it (a cut sentence, unknown words, another language);
the figures below get the rest of a 720 px screen.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from views.parts.text import md_escape
from views.plumbing.streamlit_internals import HEADER_CSS, style


@dataclass(frozen=True)
class Header:
    """What the header shows, known before the page is drawn (app.py builds it)."""

    src_tag: str  # "DE", or "A · DE" side by side
    tgt_tag: str
    source: str  # the source tokens as the encoder reads them, joined by spaces (the end token it appends left out)
    output: str  # the translation the figures show ("" when empty)
    prefixes: tuple[str, ...]  # the output tokens each step read before choosing (start token left out), joined
    one_line: bool  # presenter mode, or side by side
    present: bool
    captions: tuple[str, ...] = ()  # Markdown lines about other decodings (they would give a quiz's answer away)
    notes: tuple[tuple[str, str], ...] = field(default=())  # (kind: warning/caption/info, Markdown) on the input


def translation(h: Header, secret_step: int | None) -> str:
    """The translation as the header may show it (Markdown-escaped): whole, or while the quiz asks about step n
    (1-based), the prefix step n read followed by an ellipsis."""
    if secret_step is None:
        return md_escape(h.output) or "∅ (empty output)"
    shown = h.prefixes[secret_step - 1] if 0 < secret_step <= len(h.prefixes) else ""
    return (md_escape(shown) + " …").strip()


def draw(slot, h: Header, secret_step: int | None, above: str) -> None:
    """Draw the header into `slot`; `above` is the caption saying what the figures below show."""
    out = translation(h, secret_step)
    if not h.one_line:
        slot.markdown(f"#### :gray[{h.src_tag}] {md_escape(h.source)}")
        slot.markdown(f"### :gray[{h.tgt_tag}] {out}")
        slot.caption(above)
        _notes(slot, h, secret_step)
        return
    line_md = f"#### :gray[{h.src_tag}] {md_escape(h.source)} :gray[→ {h.tgt_tag}] {out}"
    if not h.present:  # side by side on a laptop: one line, which may wrap
        slot.markdown(line_md)
        slot.caption(above)
        _notes(slot, h, secret_step)
        return
    slot.markdown(style(HEADER_CSS), unsafe_allow_html=True)
    line = slot.container(key="atlas_header_line")
    text, more = line.columns([9, 2], vertical_alignment="center")
    text.markdown(line_md)
    line.caption(above)
    n = len(h.notes)
    with more.popover("Whole text" + (f" · {n} note{'s' * (n > 1)}" if n else ""), width="stretch"):
        st.markdown(f"**{h.src_tag}** {md_escape(h.source)}")
        st.markdown(f"**{h.tgt_tag}** {out}")
        _notes(st, h, secret_step)


def _notes(where, h: Header, secret_step: int | None) -> None:
    """The captions on other decodings (not while a quiz question is open) and the notes on the input."""
    if secret_step is None:
        for line in h.captions:
            where.caption(line)
    for kind, text in h.notes:
        getattr(where, kind)(text)
