"""How the model read a sentence and what it wrote: words read in fragments, and a translation caught in a loop.

SentencePiece spells every word out of known pieces, so no word is ever `<unk>` and a typo, a name or a number
passes unnoticed: "Männr" is read as `▁M ä n n r`, five pieces the model has rarely seen together. A word model
reads one token per word and `<unk>` for a word outside its vocabulary (Source.unknown says which); it never
fragments a word. `has_words` says whether a text holds any word at all, `misread` which tokens of a forced
prefix the model received as others; `fragmented_words` finds the words of a SentencePiece source that are read as
many short pieces; `repeated_run` finds the longest stretch of an output that repeats one token, or a run of two or
three, over and over ("guard guard guard guard"), the usual sign that decoding lost track of the source.

Plain Python on token lists (no torch): pages reach it through model/service.py.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

WORD_START = "\u2581"  # SentencePiece's mark for "a space came before this piece" (as model/text/pieces.py)
WORD_END = "</w>"  # byte-pair encoding's mark for "this piece ends a word" (FSMT; model/text/moses_bpe.py)

# The rule of is_fragmented. A word read in many pieces, or in several pieces that are mostly single letters, is
# not in the vocabulary as a whole: the model meets it as fragments. On Multi30k's validation split (the shipped
# model's 8k German pieces) the rule flags 1.9 % of the words (rare ones: "Kassierer" as `▁K ass ier er`), and it
# flags every word of the typos, names and numbers that the shipped model garbles: "Männr" (5 pieces of one
# letter), "Fussbal" (`▁F uss b al`), "Merkel" (`▁M er kel`), "2024" (`▁2 0 2 4`), "Wolfsburg" (5 pieces),
# "Schwarzenegger" (5). A rule of "at least 4 pieces" alone misses "Merkel" and also flags compounds read as a few
# long parts, which the model reads well; a mean piece length rather than a count of one-letter pieces keeps
# `▁M er kel` (2 letters a piece) in and `▁Spiel haus` out.
# A bare "▁" is a piece like any other, in the count and in the mean (a piece of no letters): the model reads it as
# one more position, the header's "(3 pieces)" counts it, and SentencePiece writes it when none of its word-start
# pieces fits the word. So "namens" (`▁ n amens`) is flagged as "München" (`▁Mü n chen`) is, both "3 pieces"; on the
# validation split this adds 4 of its 11,706 words to the 1.9 %.
MANY_PIECES = 5  # a word in this many pieces or more is fragmented, however long its pieces
SOME_PIECES = 3  # a word in this many pieces or more is fragmented when its pieces are short:
SHORT_PIECE = 2.5  # ... at most this many characters a piece on average (the "▁" mark not counted)
MIN_TIMES = 3  # repeated_run: a unit repeated this many times in a row (twice happens in good translations)
MAX_UNIT = 3  # repeated_run: units of 1, 2 or 3 tokens


@dataclass(frozen=True)
class Word:
    """A word of the source as the model reads it: its text, and the pieces (tokens) that spell it."""

    text: str  # the word as typed, without the "▁" mark
    start: int  # position of its first piece among the source tokens
    pieces: tuple[str, ...]  # the tokens, as the vocabulary stores them

    @property
    def n_pieces(self) -> int:
        return len(self.pieces)

    @property
    def positions(self) -> range:
        """Positions of its pieces among the source tokens."""
        return range(self.start, self.start + len(self.pieces))


@dataclass(frozen=True)
class Repetition:
    """A unit of 1 to MAX_UNIT output tokens repeated `times` times in a row, from output position `start`."""

    unit: tuple[str, ...]
    times: int
    start: int

    @property
    def length(self) -> int:
        """How many output tokens the run covers."""
        return len(self.unit) * self.times


def _is_separator(piece: str) -> bool:
    """A piece of punctuation or symbols only (".", ",", "(", "-"): not part of a word, and it ends one."""
    core = piece.lstrip(WORD_START).removesuffix(WORD_END)
    return bool(core) and all(unicodedata.category(c)[0] in "PS" for c in core)


def read_words(tokens: list[str], pieces: bool) -> list[Word]:
    """The source's words as the model reads them.

    `pieces`: the tokens are SentencePiece pieces (a word starts at a piece that begins with "▁" and goes on over
    the pieces without it; punctuation pieces are no word and end one), or byte pairs (a word ends at a piece
    that ends with "</w>"). Otherwise every token is one word (a word model, or a toy's characters), one piece each.
    """
    if not pieces:
        return [Word(t, k, (t,)) for k, t in enumerate(tokens)]
    if any(t.endswith(WORD_END) for t in tokens):
        return _pair_words(tokens)
    words: list[Word] = []
    run: list[str] = []
    start = 0

    def close() -> None:
        text = "".join(run).replace(WORD_START, "")
        if text:  # a bare "▁" before punctuation spells nothing
            words.append(Word(text, start, tuple(run)))

    for k, tok in enumerate(tokens):
        if _is_separator(tok):
            close()
            run = []
        elif tok.startswith(WORD_START) or not run:
            close()
            run, start = [tok], k
        else:
            run.append(tok)
    close()
    return words


def _pair_words(tokens: list[str]) -> list[Word]:
    """Words of byte-pair pieces: each runs up to and with the piece that ends with "</w>"; a word of punctuation
    alone is none (as read_words)."""
    words, run, start = [], [], 0
    for k, tok in enumerate(tokens):
        run.append(tok)
        if tok.endswith(WORD_END) or k == len(tokens) - 1:
            text = "".join(run).removesuffix(WORD_END)
            if text and not _is_separator(text):
                words.append(Word(text, start, tuple(run)))
            run, start = [], k + 1
    return words


def is_fragmented(word: Word) -> bool:
    """Is the word read as fragments? In MANY_PIECES pieces or more, or in SOME_PIECES or more that average at most
    SHORT_PIECE characters (the reasons and what the thresholds flag are above MANY_PIECES)."""
    n = word.n_pieces
    if n >= MANY_PIECES:
        return True
    if n < SOME_PIECES:
        return False
    return sum(len(p.replace(WORD_START, "").removesuffix(WORD_END)) for p in word.pieces) / n <= SHORT_PIECE


def has_words(text: str) -> bool:
    """Does the text hold a word or a number (a letter or digit of any script), not only punctuation, symbols and
    spaces? A model trained on sentences still translates "?!.," (into an invented caption): the page says so."""
    return any(c.isalnum() for c in text)


def misread(given: Sequence[str], received: Sequence[str]) -> list[tuple[str, str]]:
    """(given, received) for each token of a forced prefix that reached the model as another token: one its target
    vocabulary does not hold is read as the unknown token. `received`: the forced steps' tokens as the vocabulary
    holds them, the given ones last (a many-to-many model forces its language token first)."""
    if not given:
        return []
    return [(g, r) for g, r in zip(given, list(received)[-len(given):]) if g != r]


def fragmented_words(tokens: list[str], pieces: bool) -> list[Word]:
    """The source's words that the model reads as fragments (is_fragmented), in order. A word model reads no word
    in pieces (its unknown words are `<unk>`): none."""
    return [w for w in read_words(tokens, pieces) if is_fragmented(w)]


def spelled(tokens: tuple[str, ...] | list[str], pieces: bool) -> str:
    """Tokens as text: SentencePiece pieces joined ("▁R", "ugby" -> "Rugby"), byte pairs joined ("Rug", "by</w>" ->
    "Rugby"), words joined by spaces."""
    if pieces and any(t.endswith(WORD_END) for t in tokens):
        return "".join(tokens).replace(WORD_END, " ").strip() or " ".join(tokens)
    if pieces:
        text = "".join(tokens).replace(WORD_START, " ").strip()
        return text or " ".join(tokens)  # a unit of bare "▁" marks: show the marks
    return " ".join(tokens)


def _count(tokens: list[str], unit: tuple[str, ...]) -> int:
    """How many times `unit` occurs in `tokens`, without overlaps."""
    n, k, i = len(unit), 0, 0
    while i + n <= len(tokens):
        if tuple(tokens[i : i + n]) == unit:
            k, i = k + 1, i + n
        else:
            i += 1
    return k


def repeated_run(tokens: Sequence[str], source: Sequence[str] = (), min_times: int = MIN_TIMES,
                 max_unit: int = MAX_UNIT) -> Repetition | None:
    """The longest run of one unit of 1..max_unit tokens repeated at least `min_times` times in a row, or None.

    Longest: covering the most tokens; on a tie the shorter unit ("guard" × 6 rather than "guard guard" × 3), then
    the earlier one. A unit that the source holds at least as many times is a copy, not a loop (a toy model
    copying "3 3 3", a number the sentence repeats), and is left out.
    """
    tokens, source = list(tokens), list(source)
    best, best_key = None, None
    for n in range(1, max_unit + 1):
        for i in range(len(tokens) - n + 1):
            unit = tuple(tokens[i : i + n])
            times = 1
            while tuple(tokens[i + times * n : i + (times + 1) * n]) == unit:
                times += 1
            key = (times * n, -n, -i)
            if times < min_times or (best_key is not None and key <= best_key):
                continue
            if source and _count(source, unit) >= times:
                continue
            best, best_key = Repetition(unit, times, i), key
    return best


def describe_fragments(words: Sequence[Word]) -> str:
    """The header's line on the words read as fragments ("" when there are none)."""
    if not words:
        return ""
    listed = ", ".join(f"{w.text} ({w.n_pieces} pieces)" for w in words)
    return f"✂ Read in fragments, not as whole words (often a typo, a name or a number): {listed}"


def describe_repetition(run: Repetition | None, pieces: bool) -> str:
    """The sentence saying that the translation repeats a unit ("" when it does not)."""
    if run is None:
        return ""
    return (f"↻ The translation repeats “{spelled(run.unit, pieces)}” {run.times} times in a row: a sign the model "
            "lost track of the source (common with names, numbers and long sentences).")
