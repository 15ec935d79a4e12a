"""SentencePiece tokenization for imported (Marian) models: the ids MarianTokenizer gives, and its detokenization.

Display form: a piece is shown exactly as the vocabulary stores it, the word-start mark "▁" (U+2581)
included: "▁Hund" begins a word, "e" continues the word before it, "▁" alone is a space before a
character the pieces do not cover. Keeping the stored string (rather than turning "▁" into a space)
means a label on an axis is also the token a user can pick, force or look up, and two pieces that
differ only by the mark stay distinguishable.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

WORD_START = "\u2581"  # SentencePiece's mark for "a space came before this piece"


def split_language_code(text: str) -> tuple[list[str], str]:
    """A leading ">>fra<<" (multilingual Marian targets) as its own token, as MarianTokenizer does."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[: end + 2]], text[end + 2 :]
    return [], text


class PieceCodec:
    """The source and target SentencePiece models of one checkpoint, and its special tokens.

    SentencePieceProcessor.encode is called under a lock: the processors are shared by every session of
    the app and the library does not promise that concurrent calls on one processor are safe.
    """

    def __init__(self, source_spm: str | Path, target_spm: str | Path, specials: Iterable[str]):
        import sentencepiece as spm  # only SentencePiece checkpoints need it

        self.source = spm.SentencePieceProcessor(model_file=str(source_spm))
        self.target = spm.SentencePieceProcessor(model_file=str(target_spm))
        # Longest first, so that a special that contains another is matched whole.
        self.specials = sorted(set(specials), key=len, reverse=True)
        self._lock = threading.Lock()

    def _split_specials(self, text: str) -> list[str]:
        """Text cut around special tokens typed in it (they stay whole, as in MarianTokenizer)."""
        out, start, i = [], 0, 0
        while i < len(text):
            hit = next((s for s in self.specials if text.startswith(s, i)), None)
            if hit is None:
                i += 1
                continue
            if i > start:
                out.append(text[start:i])
            out.append(hit)
            i = start = i + len(hit)
        if start < len(text):
            out.append(text[start:])
        return out

    def _encode(self, processor, text: str) -> list[str]:
        pieces: list[str] = []
        for chunk in self._split_specials(text):
            if chunk in self.specials:
                pieces.append(chunk)
                continue
            code, rest = split_language_code(chunk)
            with self._lock:
                pieces += code + processor.encode(rest, out_type=str)
        return pieces

    def source_pieces(self, text: str) -> list[str]:
        """The pieces of a source sentence, without the final </s> (the caller appends it)."""
        return self._encode(self.source, text)

    def target_pieces(self, text: str) -> list[str]:
        """The pieces of a target sentence (a reference, or a prefix a user typed)."""
        return self._encode(self.target, text)

    def detokenize(self, pieces: list[str]) -> str:
        """Target pieces -> text, as MarianTokenizer's convert_tokens_to_string: specials kept as written."""
        out, run = "", []
        with self._lock:
            for piece in pieces:
                if piece in self.specials:
                    out += self.target.decode_pieces(run) + piece + " "
                    run = []
                else:
                    run.append(piece)
            out += self.target.decode_pieces(run)
        return out.replace(WORD_START, " ").strip()
