"""The language hint: does a text look like the model's target language (English typed into a German model)?"""
from __future__ import annotations


def looks_like_target_language(tokens: list[str], src_known: list[bool], tgt_vocab: set[str] | dict) -> bool:
    """True when most words are unknown to the source vocabulary but known to the target one.

    Used to hint that English was typed into a German→English model; needs at least two such words.
    """
    words = [(t, k) for t, k in zip(tokens, src_known) if any(c.isalpha() for c in t)]
    if len(words) < 2:
        return False
    foreign = sum(1 for t, k in words if not k and (t in tgt_vocab or t.lower() in tgt_vocab))
    return foreign >= 2 and foreign / len(words) >= 0.5


def pieces_look_like_target_language(n_words: int, source: tuple[int, float], target: tuple[int, float],
                                     margin: float = 4.0) -> bool:
    """The same hint for a SentencePiece model, which reads any text without <unk>.

    `source` and `target` are (number of pieces, summed piece scores) of the text under the source and the
    target piece model (a unigram model's score is the piece's log-probability). True when the target model
    cuts the text into fewer pieces and finds it likelier by at least `margin` nats per word (>= 2 words):
    English typed into a German model is spelt in many rare German pieces and few common English ones.
    """
    (n_src, lp_src), (n_tgt, lp_tgt) = source, target
    return n_words >= 2 and n_tgt < n_src and (lp_tgt - lp_src) / n_words >= margin
