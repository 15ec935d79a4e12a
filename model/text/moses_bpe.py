"""Moses and byte-pair encoding: how FSMT (fairseq's WMT19 models, facebook/wmt19-de-en) reads and writes text.

A sentence is read as transformers' FSMTTokenizer reads it, without transformers: special tokens typed in the text
stay whole; every stretch between them is lowercased where the tokenizer lowercases, its Unicode punctuation replaced
(Moses' replace-unicode-punctuation.perl), normalised by Moses' punctuation normaliser, stripped of non-printing
characters and cut into words by Moses' tokeniser (aggressive dash splits: "Hund-Park" -> Hund @-@ Park; & | < > ' "
[ ] escaped as XML entities), all in the language of its side. Each word is then cut into pieces by the merges of
merges.txt, lowest rank first, its last piece marked "</w>" (end of word). The source and the target have a
vocabulary each (vocab.src.json, vocab.tgt.json); a piece its vocabulary does not hold is read as <unk>.

Display form: a piece is shown as the vocabulary stores it, "</w>" included: "Hund</w>" is a whole word, "Kat" a
piece that a later one ("ze</w>") ends; a label on an axis is the token a user can pick, force or look up.

Writing is FSMTTokenizer.decode(skip_special_tokens=True): specials dropped, the pieces joined, "</w>" made a
space, Moses' detokeniser in the target's language (entities unescaped).

sacremoses is imported when a sentence is first read: its import is slow (model/text/tokenize.py does the same).
"""
from __future__ import annotations

import functools
import json
import math
import re
import threading
import unicodedata
from collections.abc import Iterable
from pathlib import Path

END = "</w>"  # the mark of a word's last piece
MERGES_FILE = "merges.txt"  # the merges, one "a b [count]" a line, rank = line number (FSMT's own file)
OPTIONS_FILE = "moses_bpe.json"  # the tokenizer's settings: languages, lowercasing, specials (write_options)
CACHE_WORDS = 100_000  # words whose pieces are kept; the cache starts again when it is full
# Moses' replace-unicode-punctuation.perl as FSMTTokenizer ports it. No replacement writes what another reads, so
# one table and the two rules that also eat the spaces after a full stop give what its steps in turn give.
_PUNCT = str.maketrans({
    "，": ",", "、": ",", "”": '"', "“": '"', "∶": ":", "：": ":", "？": "?", "《": '"', "》": '"', "）": ")",
    "！": "!", "（": "(", "；": ";", "」": '"', "「": '"', "～": "~", "’": "'", "…": "...", "━": "-", "〈": "<",
    "〉": ">", "【": "[", "】": "]", "％": "%", **{chr(0xFF10 + d): str(d) for d in range(10)}})
_STOPS = (re.compile(r"。\s*"), re.compile(r"．\s*"))
_lock = threading.Lock()


def replace_unicode_punct(text: str) -> str:
    """Full-width and CJK punctuation and digits as ASCII, as Moses' replace-unicode-punctuation.perl."""
    text = text.translate(_PUNCT)
    for stop in _STOPS:
        text = stop.sub(". ", text)
    return text


def remove_non_printing(text: str) -> str:
    """Text without its control, format, surrogate and unassigned characters (Unicode category C*), as Moses'
    remove-non-printing-char.perl."""
    return "".join(c for c in text if not unicodedata.category(c).startswith("C"))


@functools.cache
def _moses(kind: str, lang: str):
    """One sacremoses normaliser, tokeniser or detokeniser per language, built once."""
    with _lock:
        import sacremoses

        return {"normalizer": sacremoses.MosesPunctNormalizer, "tokenizer": sacremoses.MosesTokenizer,
                "detokenizer": sacremoses.MosesDetokenizer}[kind](lang=lang)


def moses_words(text: str, lang: str) -> list[str]:
    """The words of `text` as FSMTTokenizer's Moses pipeline cuts them in language `lang`."""
    text = remove_non_printing(_moses("normalizer", lang).normalize(replace_unicode_punct(text)))
    return _moses("tokenizer", lang).tokenize(text, aggressive_dash_splits=True, return_str=False, escape=True)


def read_merges(path: str | Path) -> dict[tuple[str, ...], int]:
    """(left, right) -> rank from a merges file, parsed as FSMTTokenizer parses it: every line but what follows the
    last newline, its first two fields; a pair listed twice keeps its later rank."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")[:-1]
    return dict(zip((tuple(line.split()[:2]) for line in lines), range(len(lines))))


def merge_word(word: str, ranks: dict[tuple[str, ...], int]) -> tuple[str, ...]:
    """The pieces of one word: its characters, the last marked END, merged pair by pair, the pair of lowest rank
    first and every occurrence of it left to right, until no pair has a rank (FSMTTokenizer.bpe)."""
    symbols = tuple(word[:-1]) + (word[-1] + END,)
    while len(symbols) > 1:
        pairs = set(zip(symbols, symbols[1:]))
        best = min(pairs, key=lambda pair: ranks.get(pair, math.inf))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(symbols):
            if i < len(symbols) - 1 and (symbols[i], symbols[i + 1]) == best:
                merged.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = tuple(merged)
    return symbols


class MosesBpeCodec:
    """The source and target reading of an FSMT checkpoint: the interface of model/text/pieces.py's PieceCodec
    (source_pieces, target_pieces, detokenize, reading, source_score), so Translator and the pages read it alike.

    `vocabs` (token -> id of the source, of the target) serve the scores only: a fairseq dictionary numbers its
    tokens most frequent first, after its specials, so a piece's rank r gives Zipf's estimate of its
    log-probability, -ln r - ln H_N (H_N the N-th harmonic number, N the ranked tokens). Nothing here is shared
    between calls but the cache of words' pieces, which any thread may fill.
    """

    def __init__(self, ranks: dict[tuple[str, ...], int], langs: tuple[str, str],
                 vocabs: tuple[dict[str, int], dict[str, int]], specials: Iterable[str], lowercase: bool = False,
                 clean_up: bool = False):
        """`langs`: Moses' languages of the source and the target; `specials`: the tokens kept whole when typed in
        a text and dropped from a translation's text; `clean_up`: the tokenizer's clean_up_tokenization_spaces."""
        self.ranks, self.langs, self.vocabs = ranks, tuple(langs), vocabs
        self.specials = sorted(set(specials), key=len, reverse=True)  # longest first: one holding another is whole
        self._special_re = re.compile("(" + "|".join(map(re.escape, self.specials)) + ")") if self.specials else None
        self.lowercase, self.clean_up = lowercase, clean_up
        self._cache: dict[str, tuple[str, ...]] = {}
        self._zipf = [_zipf_table(stoi, self.specials) for stoi in vocabs]  # (leading specials, ln H_N) per side

    def pieces(self, word: str) -> tuple[str, ...]:
        """One Moses word's pieces, cached."""
        found = self._cache.get(word)
        if found is None:
            if len(self._cache) >= CACHE_WORDS:
                self._cache.clear()
            found = self._cache[word] = merge_word(word, self.ranks)
        return found

    def _read(self, text: str, lang: str) -> list[str]:
        chunks = self._special_re.split(text) if self._special_re is not None else [text]
        out: list[str] = []
        for i, chunk in enumerate(chunks):  # re.split with a group: the specials at the odd places
            if i % 2:
                out.append(chunk)
            elif chunk:
                for word in moses_words(chunk.lower() if self.lowercase else chunk, lang):
                    if word:
                        out += self.pieces(word)
        return out

    def source_pieces(self, text: str) -> list[str]:
        """The pieces of a source sentence, without the final </s> (the caller appends it)."""
        return self._read(text, self.langs[0])

    def target_pieces(self, text: str) -> list[str]:
        """The pieces of a target sentence (a reference, a prefix a user typed), read with the target's Moses.
        (FSMTTokenizer reads every text with the source's; fairseq reads a target with its own language's.)"""
        return self._read(text, self.langs[1])

    def _score(self, piece: str, side: int) -> float | None:
        i = self.vocabs[side].get(piece)
        if i is None:
            return None
        leading, log_h = self._zipf[side]
        return -math.log(max(1, i - leading + 1)) - log_h

    def source_score(self, piece: str) -> float | None:
        """Zipf's estimate of the piece's log-probability from its rank in the source vocabulary (lower is rarer),
        or None when the vocabulary does not hold it."""
        return self._score(piece, 0)

    def reading(self, text: str, side: str) -> tuple[int, float]:
        """(number of pieces, summed scores) of text read as the "source" or the "target" side reads it; a piece
        the side's vocabulary does not hold scores as one rarer than all it holds."""
        s = 0 if side == "source" else 1
        pieces = self._read(text, self.langs[s])
        unknown = -math.log(max(1, len(self.vocabs[s]) - self._zipf[s][0] + 1)) - self._zipf[s][1]
        scores = [self._score(p, s) for p in pieces]
        return len(pieces), float(sum(unknown if x is None else x for x in scores))

    def detokenize(self, pieces: list[str]) -> str:
        """Target pieces -> text, as FSMTTokenizer.decode(skip_special_tokens=True): specials dropped."""
        skip = set(self.specials)
        words = "".join(p.replace(" ", "").replace(END, " ") for p in pieces if p not in skip).split()
        text = _moses("detokenizer", self.langs[1]).detokenize(words)
        return clean_up_spaces(text) if self.clean_up else text


def _zipf_table(stoi: dict[str, int], specials: list[str]) -> tuple[int, float]:
    """(how many ids at the start are specials, ln H_N of the N tokens after them)."""
    ids = {stoi[s] for s in specials if s in stoi}
    leading = 0
    while leading in ids:
        leading += 1
    n = max(1, len(stoi) - leading)
    return leading, math.log(sum(1.0 / r for r in range(1, n + 1)))


def clean_up_spaces(text: str) -> str:
    """transformers' clean_up_tokenization (a tokenizer saved with clean_up_tokenization_spaces applies it)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
                 (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


def write_options(folder: str | Path, langs: tuple[str, str], specials: list[str], lowercase: bool,
                  clean_up: bool) -> Path:
    """The tokenizer's settings (OPTIONS_FILE) beside the merges in a checkpoint folder."""
    path = Path(folder) / OPTIONS_FILE
    options = {"source_lang": langs[0], "target_lang": langs[1], "lowercase": bool(lowercase),
               "specials": list(specials), "clean_up_tokenization_spaces": bool(clean_up)}
    path.write_text(json.dumps(options, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def read_codec(folder: str | Path, src_vocab, tgt_vocab) -> MosesBpeCodec:
    """The codec of a checkpoint folder (MERGES_FILE, OPTIONS_FILE) with its vocabularies; ValueError or OSError
    naming the file when one is broken."""
    path = Path(folder) / OPTIONS_FILE
    try:
        o = json.loads(path.read_text(encoding="utf-8"))
        langs, specials = (str(o["source_lang"]), str(o["target_lang"])), [str(s) for s in o["specials"]]
        lowercase, clean_up = bool(o["lowercase"]), bool(o.get("clean_up_tokenization_spaces", False))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path.name} is not the settings of a Moses + BPE tokenizer ({type(e).__name__}: {e})") \
            from None
    return MosesBpeCodec(read_merges(Path(folder) / MERGES_FILE), langs, (src_vocab.stoi, tgt_vocab.stoi), specials,
                         lowercase, clean_up)
