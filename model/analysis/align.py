"""Word alignment read from what cross-attention carries, scored against gold links (AER, Och & Ney 2003).

A pair is two pre-tokenised sentences (the words that are aligned). Each word is split into the model's pieces, the
model is teacher-forced on the target's pieces, and for every target piece the source piece that receives the most
(cross-attention weight, value norm or ALTI+ contribution) is linked to it; two words are aligned when any of their
pieces are (the rule of awesome-align and SimAlign). The end token and a language token belong to no word and are
never linked. Which decoder row stands for a target piece is the **reading**: the row that *predicts* it (the row
whose input is the piece before), or, shifted, the row whose *input* is the piece (Chen et al. 2020's Shift-Att).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.analysis import contributions as C
from model.analysis.links import METHODS, Pair, aer, links, matrix, read_talp


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
