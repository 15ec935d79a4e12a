"""The header above every page: the sentence, the translation the figures show, and the notes on them.

The page's fragment draws it (into a slot app.py keeps above the page) after the page itself, because what it may say
depends on the page: while presenter mode's quiz asks about a decoding step, the translation stops at the prefix
that step read, and nothing else in the header (another decoding's output) gives the answer away.

In presenter mode the header gives the translation the room: the whole translation, on two lines at most, then
"… (+N words)"; the source takes what is left of the first line, or of two (cut at a word, with "…"). "Whole text"
(a popover) shows both whole, with the notes on them (a cut sentence, unknown words, another language). The caption
takes the second line, and "Choose" at its end holds the page's pickers (views.parts.widgets.choices): the header
and the controls take two lines, and the page's figure the rest of the screen (viz.theme.HEADER_PX: as tall with a
translation of two lines as of one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

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
    one_line: bool  # side by side: both sentences on one line (presenter mode draws into presenter_slots)
    captions: tuple[str, ...] = ()  # Markdown lines about other decodings (they would give a quiz's answer away)
    notes: tuple[tuple[str, str], ...] = field(default=())  # (kind: warning/caption/info, Markdown) on the input


# Characters of the presenter header's bold type in one line of its column at 1280 px, between the toolbar's
# buttons (a line of ▁-marked pieces, the widest text it shows, measured about 64), and the least of the source
# worth showing beside a translation.
LINE_CHARS, MIN_SOURCE_CHARS = 62, 12


class Line(NamedTuple):
    source: str  # as shown: whole, or cut at a word with "…"
    output: str  # as shown: whole, or its first words and "… (+N words)"
    lines: int  # 1 or 2


def translation(h: Header, secret_step: int | None) -> str:
    """The translation as the header may show it (Markdown-escaped): whole, or while the quiz asks about step n
    (1-based), the prefix step n read followed by an ellipsis."""
    return md_escape(_plain_translation(h, secret_step)) or "∅ (empty output)"


def _plain_translation(h: Header, secret_step: int | None) -> str:
    if secret_step is None:
        return h.output
    shown = h.prefixes[secret_step - 1] if 0 < secret_step <= len(h.prefixes) else ""
    return (shown + " …").strip()


def _cut(text: str, chars: int, tail: str = "…") -> str:
    """``text``'s first words that fit ``chars`` with `` tail`` after them (at least the first word, cut)."""
    if len(text) <= chars:
        return text
    words, kept = text.split(), []
    for w in words:
        if len(" ".join([*kept, w])) + 1 + len(tail) > chars:
            break
        kept.append(w)
    return (" ".join(kept) if kept else words[0][: max(1, chars - len(tail) - 1)]) + " " + tail


def fit_line(h: Header, secret_step: int | None = None, per_line: int = LINE_CHARS) -> Line:
    """What presenter mode's header shows of the source and the translation, and on how many lines."""
    out = _plain_translation(h, secret_step) or "∅ (empty output)"
    tags = len(h.src_tag) + len(h.tgt_tag) + 5  # "DE " and " → EN "
    room = 2 * per_line - tags - MIN_SOURCE_CHARS
    if len(out) > room:  # the words that fit two lines, and how many were left out
        words = out.split()
        for k in range(len(words), 0, -1):
            shown = " ".join(words[:k]) + f" … (+{len(words) - k} words)"
            if len(shown) <= room:
                break
        out = shown
    first = per_line - tags - len(out)  # what the first line leaves the source
    if first >= min(len(h.source), MIN_SOURCE_CHARS):
        return Line(_cut(h.source, first), out, 1)
    return Line(_cut(h.source, 2 * per_line - tags - len(out)), out, 2)


class Slots(NamedTuple):
    """Presenter mode's header, laid out before the page is drawn: two lines, each with a button at its end."""

    text: Any  # the sentence and its translation
    whole: Any  # "Whole text"
    caption: Any  # what the figures show, the model, the facts
    choose: Any  # the place of "Choose", the page's pickers (views.parts.widgets.choices opens it when first used)


def presenter_slots() -> Slots:
    """The header's places, drawn by the page's fragment above the page (its pickers are widgets: a fragment draws
    widgets only inside itself), and filled in by :func:`draw` after it."""
    st.markdown(style(HEADER_CSS), unsafe_allow_html=True)
    line = st.container(key="atlas_header_line")
    text, whole = line.columns([9, 2], vertical_alignment="center")
    caption, choose = line.columns([9, 2], vertical_alignment="center")
    return Slots(text, whole, caption, choose)


def draw(slot, h: Header, secret_step: int | None, above: str, slots: Slots | None = None) -> None:
    """Draw the header into `slot` (presenter mode: into `slots`); `above` is the caption saying what the figures
    below show."""
    out = translation(h, secret_step)
    if slots is not None:
        fit = fit_line(h, secret_step)
        slots.text.markdown(f"#### :gray[{h.src_tag}] {md_escape(fit.source)} :gray[→ {h.tgt_tag}] "
                            f"{md_escape(fit.output)}")
        slots.caption.caption(above)
        n = len(h.notes)
        with slots.whole.popover("Whole text" + (f" · {n} note{'s' * (n > 1)}" if n else ""), width="stretch"):
            st.markdown(f"**{h.src_tag}** {md_escape(h.source)}")
            st.markdown(f"**{h.tgt_tag}** {out}")
            _notes(st, h, secret_step)
        return
    if not h.one_line:
        slot.markdown(f"#### :gray[{h.src_tag}] {md_escape(h.source)}")
        slot.markdown(f"### :gray[{h.tgt_tag}] {out}")
    else:  # side by side on a laptop: one line, which may wrap
        slot.markdown(f"#### :gray[{h.src_tag}] {md_escape(h.source)} :gray[→ {h.tgt_tag}] {out}")
    slot.caption(above)
    _notes(slot, h, secret_step)


def _notes(where, h: Header, secret_step: int | None) -> None:
    """The captions on other decodings (not while a quiz question is open) and the notes on the input."""
    if secret_step is None:
        for line in h.captions:
            where.caption(line)
    for kind, text in h.notes:
        getattr(where, kind)(text)
