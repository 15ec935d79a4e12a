"""One sentence pair as the head report reads it: its ids, its final punctuation mark and its rarest word.

The measures of model/analysis/measures.py look at fixed key positions of each sentence (the final punctuation
for sinks, the rarest source word for rare-word heads); this module finds them once per pair, before any
model pass, so that every batch only looks them up.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from model.text.pieces import WORD_START

FINAL_PUNCT = frozenset(".!?;:")


def _punct(token: str) -> bool:
    """A token made only of punctuation characters (Unicode category P*)."""
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


@dataclass
class Example:
    """One sentence pair as the model reads it, and the key positions some measures look at."""

    index: int  # line number in the corpus files (0-based)
    src_ids: list[int]  # words + <eos>
    tgt_ids: list[int]  # reference tokens (no <bos>/<eos>)
    src_tokens: list[str]  # words, without <eos>
    punct: int  # source position of the final punctuation mark, or -1
    rare: list[bool]  # per source position (with <eos>): holds the sentence's rarest candidate word
    rare_ok: bool  # >= 2 candidate words, so the sentence counts for rare_share


def bare(token: str) -> str:
    """A piece without its word-start mark ("▁." -> "."); a word stays as it is."""
    return token.replace(WORD_START, "")


def rarity_rank(translator) -> Callable[[str], float | None]:
    """How rare a source token is (larger is rarer), or None when it is no candidate for the rarest word.

    Word vocabularies keep no counts, but Vocab.build orders itos most frequent first, so the id is the
    frequency rank, and an unknown word ranks after every vocabulary word. A SentencePiece model's score
    is the piece's log-probability (unigram) or minus its merge rank (BPE): either way a lower score is a
    rarer piece, and a piece the model does not hold ranks after all of them. Specials, punctuation-only
    tokens and a bare word-start mark are no candidates.
    """
    vocab, codec = translator.src_vocab, translator.pieces
    specials = set(vocab.specials.values())

    def rank(token: str) -> float | None:
        if token in specials or not bare(token) or _punct(bare(token)):
            return None
        if codec is None:
            idx = vocab.stoi.get(token)
            return float(len(vocab) if idx is None else idx)
        score = codec.source_score(token)
        return float("inf") if score is None else -score

    return rank


def rarest_positions(tokens: Sequence[str], rank: Callable[[str], float | None]) -> tuple[list[bool], bool]:
    """(per token: is it the sentence's rarest candidate, does the sentence count) with rank from rarity_rank.

    Fewer than 2 candidates: the sentence does not count. A repeated rarest token marks every position.
    """
    ranks = [rank(tok) for tok in tokens]
    candidates = [r for r in ranks if r is not None]
    if len(candidates) < 2:
        return [False] * len(tokens), False
    top = max(candidates)
    return [r is not None and r == top for r in ranks], True


def prepare(translator, src_texts: Sequence[str], ref_texts: Sequence[str]) -> tuple[list[Example], list[int]]:
    """(examples, skipped line numbers): a pair is skipped when either side has no tokens."""
    if len(src_texts) != len(ref_texts):
        raise ValueError(f"{len(src_texts)} source sentences but {len(ref_texts)} references")
    tv, rank = translator.tgt_vocab, rarity_rank(translator)
    max_tgt = translator.cfg.max_len - 1  # the decoder input is <bos> + the reference
    examples, skipped = [], []
    for n, (s, r) in enumerate(zip(src_texts, ref_texts)):
        source = translator.prepare(s)
        ref = translator.target_tokens(r)[:max_tgt]  # words, or SentencePiece pieces
        if not source.tokens or not ref:
            skipped.append(n)
            continue
        punct = len(source.tokens) - 1 if bare(source.tokens[-1]) in FINAL_PUNCT else -1
        rare, ok = rarest_positions(source.tokens, rank)
        ends = [False] * bool(source.eos_token)  # T5Gemma's source has no end token
        examples.append(Example(n, source.ids, tv.encode(ref), source.tokens, punct, rare + ends, ok))
    return examples, skipped

