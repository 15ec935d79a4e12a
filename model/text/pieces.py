"""SentencePiece tokenization: imported (Marian) models, and models trained here with their own pieces.

Two vocabulary layouts read text through the same PieceCodec. Marian's: a vocabulary file of its own
(</s> 0, <unk> 1, ..., <pad> last) that the pieces are looked up in, a language code such as ">>fra<<"
kept whole, the ids MarianTokenizer gives. Ours (`python -m model.train --tokenizer sentencepiece`,
train_piece_model below): the SentencePiece model is trained with our specials <unk> <pad> <bos> <eos>
at ids 0..3, so the vocabulary is the model's pieces in the model's order and every word-vocabulary
code path (pad_idx 1, <bos> 2, <eos> 3) holds unchanged.

Display form: a piece is shown exactly as the vocabulary stores it, the word-start mark "▁" (U+2581)
included: "▁Hund" begins a word, "e" continues the word before it, "▁" alone is a space before a
character the pieces do not cover. Keeping the stored string (rather than turning "▁" into a space)
means a label on an axis is also the token a user can pick, force or look up, and two pieces that
differ only by the mark stay distinguishable.
"""
from __future__ import annotations

import io
import threading
from collections.abc import Iterable
from pathlib import Path

from model.text.vocab import SPECIALS, Vocab

WORD_START = "\u2581"  # SentencePiece's mark for "a space came before this piece"
MODEL_TYPES = ("unigram", "bpe")
# Fixed trainer options, so that the same sentences always give the same pieces (byte for byte: the
# model is written to memory, so no temporary path ends up inside the stored trainer options).
TRAINER_OPTIONS = dict(
    # Our specials at our ids: <bos>/<eos>/<pad> become control pieces that text never produces, and no
    # <s>/</s> of SentencePiece's own can clash with them.
    unk_id=0, pad_id=1, bos_id=2, eos_id=3, unk_piece=SPECIALS[0], pad_piece=SPECIALS[1], bos_piece=SPECIALS[2],
    eos_piece=SPECIALS[3],
    # Text arrives cleaned by tokenize.clean_text (NFC, whitespace collapsed), as the app cleans it; no
    # further normalisation, so that decoding gives back the references' own characters.
    normalization_rule_name="identity",
    character_coverage=1.0,  # every character of the training text is a piece: names get through
    hard_vocab_limit=False,  # a small corpus may not have vocab_size pieces; take what it has
    num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,  # all sentences, in order: repeatable
)


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

    def __init__(self, source_spm: str | Path | bytes, target_spm: str | Path | bytes, specials: Iterable[str],
                 language_codes: bool = True):
        """Each model is a .spm file or its bytes. `language_codes`: a leading ">>xxx<<" is one token
        (Marian's multilingual targets); models trained here have none, so they read it as text."""
        self.source, self.target = processor(source_spm), processor(target_spm)
        # Longest first, so that a special that contains another is matched whole.
        self.specials = sorted(set(specials), key=len, reverse=True)
        self.language_codes = language_codes
        self._lock = threading.Lock()

    def _split_specials(self, text: str) -> list[str]:
        """Text cut around special tokens typed in it (they stay whole, as in MarianTokenizer)."""
        if not any(s in text for s in self.specials):
            return [text] if text else []  # the usual case, without the walk below (training reads 29k lines)
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
            code, rest = split_language_code(chunk) if self.language_codes else ([], chunk)
            with self._lock:
                pieces += code + processor.encode(rest, out_type=str)
        return pieces

    def source_pieces(self, text: str) -> list[str]:
        """The pieces of a source sentence, without the final </s> (the caller appends it)."""
        return self._encode(self.source, text)

    def source_score(self, piece: str) -> float | None:
        """The source model's score of a piece (unigram: its log-probability; BPE: minus its merge rank),
        or None when the model does not hold it."""
        with self._lock:
            i = self.source.piece_to_id(piece)
            if i == self.source.unk_id() and piece != self.source.id_to_piece(i):
                return None
            return float(self.source.get_score(i))

    def reading(self, text: str, side: str) -> tuple[int, float]:
        """(number of pieces, summed scores) of text under the "source" or "target" model."""
        sp = self.source if side == "source" else self.target
        with self._lock:
            ids = sp.encode(text)
            return len(ids), float(sum(sp.get_score(i) for i in ids))

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


def processor(model: str | Path | bytes):
    """A SentencePieceProcessor from a .spm file or from a model's bytes."""
    import sentencepiece as spm  # only SentencePiece models need it

    if isinstance(model, bytes):
        return spm.SentencePieceProcessor(model_proto=model)
    return spm.SentencePieceProcessor(model_file=str(model))


def train_piece_model(sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
                      seed: int = 0) -> bytes:
    """A SentencePiece model (its bytes, as a .spm file holds them) trained on cleaned sentences.

    Our specials take ids 0..3 (TRAINER_OPTIONS), so vocab_of(model) starts with them; vocab_size counts
    them too. The same sentences, size, type and seed give the same bytes.
    """
    import sentencepiece as spm

    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    spm.set_random_generator_seed(seed)  # the trainer's sampling (seed pieces, EM pruning ties)
    out = io.BytesIO()
    # minloglevel 2: errors only; the trainer's progress lines would drown the training log (its
    # logstream option redirects the stderr file descriptor, which fails where stderr is not a file)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(list(sentences)), model_writer=out, vocab_size=vocab_size,
                                   model_type=model_type, minloglevel=2, **TRAINER_OPTIONS)
    return out.getvalue()


def vocab_of(model: str | Path | bytes) -> Vocab:
    """The vocabulary of a model from train_piece_model: its pieces in its own order (ids agree)."""
    sp = processor(model)
    itos = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    return Vocab(itos)  # raises if the model does not start with our specials (e.g. a Marian .spm)
