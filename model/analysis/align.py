"""Word alignment read from what cross-attention carries, scored against gold links (AER, Och & Ney 2003).

A pair is two pre-tokenised sentences (the words that are aligned). Each word is split into the model's pieces, the
model is teacher-forced on the target's pieces, and for every target piece the source piece that receives the most
(cross-attention weight, value norm or ALTI+ contribution) is linked to it; two words are aligned when any of their
pieces are (the rule of awesome-align and SimAlign). The end token and a language token belong to no word and are
never linked. Which decoder row stands for a target piece is the **reading**: the row that *predicts* it (the row
whose input is the piece before), or, shifted, the row whose *input* is the piece (Chen et al. 2020's Shift-Att).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from model.analysis import contributions as C

METHODS = ("attention", "value-norm", "alti")
_LINK = re.compile(r"^(\d+)([-p])(\d+)$")


@dataclass
class Pair:
    """One pair's pieces, the word each piece belongs to, and its cross-attention measures (all decoder rows)."""

    src_words: list[str]
    tgt_words: list[str]
    src_word_of: list[int | None]  # per source position (the model's input): its word, None for the end token
    tgt_word_of: list[int]  # per target piece: its word
    offset: int  # decoder rows before the first target piece's predicting row (a forced language token)
    attention: np.ndarray  # (L, H, T, S)
    value_norm: np.ndarray  # (L, H, T, S)
    value_norm_layer: np.ndarray  # (L, T, S)
    alti: np.ndarray  # (L, T, S): the cross-attention block's contributions, its residual column left out


def encode_pair(translator, src_words: list[str], tgt_words: list[str]) -> Pair:
    """Split each word into the model's pieces and run the teacher-forced pass (ValueError for an empty side)."""
    if not src_words or not tgt_words:
        raise ValueError("an empty sentence")
    src_pieces = [translator.source_tokens(w) for w in src_words]
    tgt_pieces = [translator.target_tokens(w) for w in tgt_words]
    lead, start = list(translator.lead), list(translator.start_prefix)
    src_tokens = lead + [p for ps in src_pieces for p in ps]
    ends = translator.model.cfg.src_eos  # Gemma's source has no end token
    src_word_of = [None] * len(lead) + [w for w, ps in enumerate(src_pieces) for _ in ps] + [None] * ends  # <eos>
    tgt_tokens = [p for ps in tgt_pieces for p in ps]
    sv, tv = translator.src_vocab, translator.tgt_vocab
    cfg = translator.model.cfg
    for side, n in (("source", len(src_tokens) + ends), ("target", 1 + len(start) + len(tgt_tokens))):
        if n > cfg.max_len:
            raise ValueError(f"the {side} side has {n} pieces; the model reads at most {cfg.max_len}")
    src = torch.tensor([sv.encode(src_tokens) + [sv.eos_idx] * ends], dtype=torch.long)
    tgt_in = torch.tensor([[tv.bos_idx] + start + tv.encode(tgt_tokens)], dtype=torch.long)
    with torch.inference_mode():
        _, cache = translator.model.run_with_cache(src, tgt_in, C.points(cfg.n_encoder_layers, cfg.n_decoder_layers))
    rec = C.from_cache(translator.model, cache, src_tokens + [sv.token("eos")] * ends, tv.decode(tgt_in[0].tolist()))
    return Pair(src_words, tgt_words, src_word_of, [w for w, ps in enumerate(tgt_pieces) for _ in ps], len(start),
                rec.attention["cross"], rec.value_norm["cross"], rec.value_norm_layer["cross"],
                rec.alti["cross"][:, :, :-1])


def matrix(pair: Pair, method: str, layer: int | None, head: int | None) -> np.ndarray:
    """(T, S) of ``method`` at 0-based ``layer`` and ``head`` (None: the mean of the layers, of the heads; the value
    norms of a layer's heads together are ‖Σ_h α f_h‖; ALTI+ is a layer's, whatever the head)."""
    if method == "attention":
        m = pair.attention if head is None else pair.attention[:, head: head + 1]
        m = m.mean(1)
    elif method == "value-norm":
        m = pair.value_norm_layer if head is None else pair.value_norm[:, head]
    elif method == "alti":
        m = pair.alti
    else:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}")
    return m.mean(0) if layer is None else m[layer]


def links(pair: Pair, m: np.ndarray, shift: bool = False) -> set[tuple[int, int]]:
    """0-based (source word, target word) links: each target piece to the source piece of the largest value in its
    row of ``m`` (T, S) (the predicting row, or with ``shift`` the row that reads the piece)."""
    words = [j for j, w in enumerate(pair.src_word_of) if w is not None]  # positions that belong to a word
    out = set()
    for k, tw in enumerate(pair.tgt_word_of):
        row = pair.offset + k + (1 if shift else 0)
        best = words[int(np.argmax(m[row, words]))]
        out.add((pair.src_word_of[best], tw))
    return out


def read_talp(line: str, n_src: int, n_tgt: int, where: str) -> tuple[set, set]:
    """(sure, possible ⊇ sure) 0-based links of a talp line (`i-j` sure, `ipj` possible, 1-based; German first);
    ValueError naming ``where`` for a malformed item or a word out of range."""
    sure, possible = set(), set()
    for item in line.split():
        m = _LINK.match(item)
        if not m:
            raise ValueError(f"{where}: {item!r} is not a link (i-j sure, ipj possible)")
        i, j = int(m[1]) - 1, int(m[3]) - 1
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            raise ValueError(f"{where}: {item!r} is outside the pair ({n_src} source, {n_tgt} target words)")
        possible.add((i, j))
        if m[2] == "-":
            sure.add((i, j))
    return sure, possible


def aer(predicted: list[set], sure: list[set], possible: list[set]) -> float:
    """The corpus's alignment error rate in percent: 1 − (|A∩S| + |A∩P|) / (|A| + |S|), summed over the pairs."""
    a = sum(len(p) for p in predicted)
    s = sum(len(x) for x in sure)
    hits = sum(len(p & x) + len(p & y) for p, x, y in zip(predicted, sure, possible))
    return 100.0 * (1.0 - hits / (a + s)) if a + s else 0.0


def pharaoh(found: set[tuple[int, int]]) -> str:
    """0-based `i-j` links, sorted (source word i, target word j)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(found))


ANNOTATED = "multi30k-align"  # model/data/: the project's 100 annotated German–English pairs (dev.de, dev.en, dev.talp)


def annotated_files():
    """(the German lines, the English lines, the talp lines) of the annotated pairs shipped with the app."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "data" / ANNOTATED
    return tuple((folder / name).read_text(encoding="utf-8").splitlines() for name in ("dev.de", "dev.en", "dev.talp"))


@dataclass
class AnnotatedSet:
    """The annotated pairs as one model reads them, with their gold links (0-based, possible ⊇ sure)."""

    pairs: list[Pair]
    sure: list[set]
    possible: list[set]


def annotated_set(translator) -> AnnotatedSet:
    """Every annotated pair run through the model (a few seconds: each is one teacher-forced pass)."""
    src, tgt, talp = annotated_files()
    pairs, sure, possible = [], [], []
    for n, (s, t, g) in enumerate(zip(src, tgt, talp), 1):
        pair = encode_pair(translator, s.split(), t.split())
        a, b = read_talp(g, len(pair.src_words), len(pair.tgt_words), f"{ANNOTATED}/dev.talp line {n}")
        pairs.append(pair)
        sure.append(a)
        possible.append(b)
    return AnnotatedSet(pairs, sure, possible)


def word_matrix(pair: Pair, m: np.ndarray, shift: bool = False) -> np.ndarray:
    """``m`` (T, S) at word level (target words, source words): each target word's rows (its pieces' predicting
    rows, or with ``shift`` the rows that read them) averaged, each source word's columns summed (the end token's
    and a language token's left out)."""
    rows = np.stack([m[pair.offset + k + (1 if shift else 0)] for k in range(len(pair.tgt_word_of))])  # (pieces, S)
    out = np.zeros((len(pair.tgt_words), len(pair.src_words)))
    counts = np.zeros(len(pair.tgt_words))
    for k, tw in enumerate(pair.tgt_word_of):
        for j, sw in enumerate(pair.src_word_of):
            if sw is not None:
                out[tw, sw] += rows[k, j]
        counts[tw] += 1
    return out / counts[:, None]


def reads_german_english(translator) -> bool:
    """Whether the annotated pairs are in the model's languages (de → en, any code that starts so: deu_Latn)."""
    return str(translator.src_lang).lower().startswith("de") and str(translator.tgt_lang).lower().startswith("en")


def head_alignment(translator) -> dict | None:
    """The head report's alignment: every cross-attention head's AER (%) on the annotated pairs from its weights
    ("aer", (L, h)) and its value norms ("aer_value_norm"), and per layer the heads together (the weights' mean,
    the layer's value norms, ALTI+); predicting reading. None for a model of other languages."""
    if not reads_german_english(translator):
        return None
    data = annotated_set(translator)
    cfg = translator.model.cfg

    def score(method: str, layer: int, head: int | None) -> float:
        return aer([links(p, matrix(p, method, layer, head)) for p in data.pairs], data.sure, data.possible)

    layers, heads = range(cfg.n_decoder_layers), range(cfg.n_heads)
    return {"pairs": len(data.pairs), "reading": "predicting",
            "aer": np.array([[score("attention", l, h) for h in heads] for l in layers]),
            "aer_value_norm": np.array([[score("value-norm", l, h) for h in heads] for l in layers]),
            "layers": {method: [score(method, l, None) for l in layers] for method in METHODS}}


def add_alignment(results: dict, translator) -> dict | None:
    """The cross heads' AER on the annotated pairs into results["cross"]["measures"] ("aer", "aer_value_norm"),
    and the report's "alignment" section (per layer); None (nothing added) for a model of other languages."""
    found = head_alignment(translator)
    if found is None:
        return None
    for name in ("aer", "aer_value_norm"):
        results["cross"]["measures"][name] = found.pop(name)
    return found


_PUNCT = ".,;:!?\"'()[]„“”‚‘’…"  # split off a word's ends, as the annotated pairs are tokenised (their README)


def words(text: str) -> list[str]:
    """A sentence's words as the annotated pairs have them: split on white space, then leading and trailing
    punctuation split off as words of their own (word-internal hyphens and apostrophes stay)."""
    out = []
    for chunk in text.split():
        lead = []
        while chunk and chunk[0] in _PUNCT:
            lead.append(chunk[0])
            chunk = chunk[1:]
        trail = []
        while chunk and chunk[-1] in _PUNCT:
            trail.insert(0, chunk[-1])
            chunk = chunk[:-1]
        out += lead + ([chunk] if chunk else []) + trail
    return out
