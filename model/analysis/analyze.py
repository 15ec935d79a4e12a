"""Corpus head analysis: what every attention head does on a whole test set, teacher-forced on the references.

    python -m model.analyze [--checkpoint DIR] [--src F] [--ref F] [--limit N] [--out FILE.json]
                            [--batch-tokens N] [--ablation-limit N] [--pruning-limit N] [--threads N]
                            [--no-ablation] [--no-pruning]

Without --src/--ref the Multi30k validation split is used (model.experiments.find_data_dir("val")).
The report (schema "attention-atlas-head-report/1") goes to DIR/head_report.json, or, when the checkpoint folder
is not writable, to $XDG_CACHE_HOME/attention-atlas/<checkpoint name>/head_report.json (XDG_CACHE_HOME defaults
to ~/.cache); the path written is printed.

For every attention kind (enc_self, dec_self, cross), layer and head, over every real (non-pad) query of the corpus:
confidence and entropy (Voita et al. 2019; Clark et al. 2019), mean attention distance (Vig & Belinkov 2019),
previous/same/next-token weight and argmax offsets (positional heads), weight on <eos>/<bos>/final punctuation
(sinks), rare-word heads (Voita), agreement and monotonicity of cross-attention argmax alignments, gradient head
importance (Michel et al. 2019), the loss increase when one head is switched off, documented role labels and a
pruning curve (greedy BLEU with the least important heads switched off). Every definition is written into the
report ("definitions"), with the thresholds the roles use.

Sums and counts are accumulated batch by batch; no attention matrix outlives its batch.
Shape letters: see model/__init__.py (b batch, L layers, h heads, i queries, j keys, s source, t target).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model.nn.transformer import HeadMask, make_src_mask, make_tgt_mask
from model.records import KINDS
from model.text.pieces import WORD_START
from model.training.data import collate, token_batches

SCHEMA = "attention-atlas-head-report/1"
REPORT_NAME = "head_report.json"
CACHE_ENV = "XDG_CACHE_HOME"  # the cache folder's parent (default ~/.cache), for read-only checkpoint folders
SELF_KINDS = ("enc_self", "dec_self")
ARGMAX_OFFSETS = tuple(range(-3, 4))  # offsets whose argmax share is counted (positional heads)
PATTERN_OFFSETS = tuple(range(-8, 9))  # offsets of the average attention pattern kept for the app
FINAL_PUNCT = frozenset(".!?;:")
TOP_SENTENCES = 5
DIGITS = 6  # significant figures of every float in the report (a raw importance can be 1e-7)
DEFAULT_BATCH_TOKENS = 3000
DEFAULT_PRUNING_LIMIT = 500
PRUNING_FRACTIONS = tuple(k / 10 for k in range(11))

THRESHOLDS = {
    "positional": 0.90,  # Voita et al.: the argmax key at one fixed offset for >= 90 % of queries
    "positional_offsets": [-1, 0, 1],  # offsets that give a "positional" label
    "previous_next": 0.50,  # Clark et al.: mean weight on the previous (next) token above 0.5
    "sink": 0.60,  # Clark et al.: mean weight on the sink tokens above 0.6
    "rare_word": 0.50,  # share of queries whose argmax is the rarest source word ...
    "rare_word_over_chance": 2.0,  # ... and at least this many times the chance share
    "aligner_agreement": 0.50,  # cross heads: argmax agrees with the best layer's head-averaged argmax ...
    "aligner_monotonicity": 0.50,  # ... and the head's own argmax path is this monotone (Spearman), so that a
    #                                 head resting on <eos> whenever the layer does is not called an aligner
    "diffuse": 0.80,  # entropy >= 80 % of the uniform row's entropy
    "bleu_drop": 1.0,  # pruning summary: heads that can go before greedy BLEU drops by this many points
}
# The main label is the first of these that applies: the most specific behaviour first, "diffuse" last.
ROLE_ORDER = ("positional", "previous-token", "next-token", "aligner", "rare-word", "sink", "diffuse")

DEFINITIONS = {
    "queries": "Every real (non-pad) query position of the corpus counts once: all source positions including "
               "<eos> for enc_self; every decoder input position (<bos> y1 .. yn) for dec_self and cross. The model "
               "is teacher-forced on the tokenized references (truncated to the model's max_len), in eval mode.",
    "confidence": "Mean over queries of the largest attention weight of the row (Voita et al. 2019).",
    "entropy": "Mean over queries of -sum_j p_ij log p_ij, in nats (Clark et al. 2019).",
    "entropy_fraction": "Mean over queries of the row's entropy divided by log(#keys the query may attend to): all "
                        "real source positions for enc_self and cross, positions <= i for the causal dec_self. "
                        "1 = uniform. A query with a single allowed key (the <bos> query of dec_self) counts as 0, "
                        "so a uniform dec_self head scores (t-1)/t on a sentence, not 1.",
    "mean_distance": "Self-attention only (Vig & Belinkov 2019): mean over queries of sum_j p_ij |i-j| / sum_j p_ij.",
    "prev_share": "Self-attention only: mean weight on key j = i-1, over the queries that have an allowed key there "
                  "(query 0 has none and is left out).",
    "same_share": "Self-attention only: mean weight on key j = i (the query's own position).",
    "next_share": "enc_self only (the causal mask hides i+1 from dec_self): mean weight on key j = i+1, over the "
                  "queries that have a real key there.",
    "argmax_offsets": "Self-attention only: for each offset k in -3..+3, the share of queries whose strongest key is "
                      "at j = i+k, among the queries for which i+k is an allowed key (0 when there is none, e.g. "
                      "k > 0 for dec_self). best_offset is the offset with the largest share, best_offset_share that "
                      "share; a head is positional when it is >= thresholds.positional (Voita et al. 2019).",
    "eos_share": "enc_self and cross: mean weight on the source <eos>.",
    "punct_share": "enc_self and cross: mean weight on the source sentence's final punctuation mark, i.e. the "
                   "last token before <eos> when it is one of . ! ? ; : (a piece read without its word-start mark; "
                   "0 for sentences without one; corpus.src_final_punct says how many have one).",
    "bos_share": "dec_self only: mean weight on <bos>, the decoder input's first position (it has no <eos>).",
    "sink_share": "Weight on the no-op tokens (Clark et al. 2019): eos_share + punct_share for enc_self and cross, "
                  "bos_share for dec_self. A head with sink_share >= thresholds.sink is a sink.",
    "rare_share": "enc_self and cross (Voita et al. 2019): share of queries whose strongest key is the least frequent "
                  "source token of the sentence. Word vocabularies keep no counts, but Vocab.build orders itos most "
                  "frequent first, so the vocabulary rank (id) is the frequency order and an <unk> is rarer than any "
                  "vocabulary token; for a SentencePiece model the order is the piece's score in source.spm (its "
                  "log-probability in a unigram model, minus its merge rank in BPE), so a piece is rare or not, not "
                  "a whole word. Several <unk>s, or a repeated rarest token, all count as the rarest. Specials, "
                  "punctuation-only tokens and a bare word-start mark are not candidates; sentences with fewer than "
                  "2 candidates are skipped. "
                  "kinds[kind].chance.rare_share is the share a head attending uniformly at random would get "
                  "(#rarest positions / #keys, averaged over the same queries).",
    "monotonicity": "cross only: per sentence, the Spearman rank correlation between the target position i and the "
                    "argmax source position of the head's row i (0 when the argmax never moves), averaged over "
                    "sentences with >= 2 target positions. layer_monotonicity is the same for each decoder layer's "
                    "head-averaged cross-attention; best_layer is the layer with the largest layer_monotonicity "
                    "(a constant path, e.g. resting on <eos>, scores 0, unlike a share of non-backward moves).",
    "forward_share": "cross only: share of consecutive target positions (i, i+1) whose argmax source position does "
                     "not move backwards.",
    "agreement": "cross only: share of target queries whose argmax source position equals the argmax of the best "
                 "layer's head-averaged cross-attention. A head of the best layer is compared with the mean of that "
                 "layer's other heads (leave-one-out): a mean it is part of would lean towards it. Multi30k has no "
                 "gold alignments to compute AER against.",
    "importance": "Michel et al. 2019, I_h = E_x |dL(x)/dxi_h|: every head's output is multiplied by a gate xi = 1 "
                  "(head_mask), one gate per sentence and head, so that one backward pass per batch gives each "
                  "sentence's own gradient; L(x) is the summed token NLL of sentence x's reference (its tokens and "
                  "<eos>). importance_raw = the sum over sentences of |dL(x)/dxi_h|, divided by the number of target "
                  "tokens of the corpus (corpus.tokens.tgt): per target token, and the same however the sentences are "
                  "batched (signs cancel within no batch). importance: each layer's scores divided by their L2 norm "
                  "(per kind and layer), then min-max scaled over all heads of all kinds (as Hugging Face bertology's "
                  "compute_heads_importance); the ranking does not depend on the per-token divisor.",
    "ablation_loss_increase": "Mean token NLL of the references with that head alone switched off (head_mask 0) minus "
                              "the mean token NLL with every head on, over ablation.sentences sentences.",
    "offset_pattern": "Mean weight at offsets -8..+8 from a reference key, over the queries for which that key is "
                      "allowed. Self-attention: the reference is the query's own position i (so -1, 0, +1 are "
                      "prev/same/next_share). cross: the proportional diagonal d_i = round(i*S/T), S = real source "
                      "positions (with <eos>), T = real decoder positions (with <bos>), rounding halves up.",
    "top_sentences": "Per head, the corpus indices (0-based line numbers of the input files) of the 5 sentences where "
                     "the head is most confident (mean over that sentence's queries of the max weight), best first; "
                     "corpus.texts holds those sentences (source and reference) by index.",
    "roles": "Labels from thresholds (first = main label; order: positional, previous-token, next-token, aligner, "
             "rare-word, sink, diffuse): 'positional -1' / 'positional 0' / 'positional +1' (self-attention, "
             "best_offset_share >= positional at that offset), 'previous-token' / 'next-token' (self-attention, "
             "prev_share / next_share >= previous_next, Clark et al. 2019), 'aligner' (cross, agreement >= "
             "aligner_agreement and monotonicity >= aligner_monotonicity), "
             "'rare-word' (enc_self/cross, rare_share >= rare_word and >= rare_word_over_chance x chance), 'sink' "
             "(sink_share >= sink), 'diffuse' (entropy_fraction >= diffuse); 'mixed' when none applies.",
    "pruning": "Michel et al. 2019, Fig. 3: heads switched off in ascending order of (normalised) importance, "
               "round(f x N) of them for f = 0, 0.1, .., 1 (halves up), N = the heads of that kind, or all heads; "
               "greedy decoding (Translator.translate_batch with off_heads, <unk> copying on) of the first "
               "pruning.sentences sentences, scored with sacreBLEU (model.evaluate.bleu_scores). Where a curve "
               "first falls >= thresholds.bleu_drop below the baseline, the head counts between that point and the "
               "one before are decoded too (pruning.refined), so pruning.heads_off_before_bleu_drop is exact to one "
               "head (on these sentences).",
}


def _punct(token: str) -> bool:
    """A token made only of punctuation characters (Unicode category P*)."""
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


# ============================================================================ one sentence's facts

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
        examples.append(Example(n, source.ids, tv.encode(ref), source.tokens, punct, rare + [False], ok))
    return examples, skipped


# ============================================================================ the measures (NumPy)

class HeadStats:
    """Sums and counts for every layer and head of one attention kind, fed batch by batch.

    add() takes a batch's attention probabilities (b, L, h, i, j) with the masks the model used;
    result() turns the sums into per-head means. The same code serves one hand-made matrix
    (measure_head) and the whole corpus, so the tests of the one check the other.
    """

    def __init__(self, kind: str, n_layers: int, n_heads: int, n_sentences: int = 0):
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}")
        self.kind, self.L, self.h = kind, n_layers, n_heads
        self.self_attn = kind in SELF_KINDS
        z = lambda *shape: np.zeros(shape, dtype=np.float64)  # noqa: E731
        self.n_q = 0.0
        self.sums = {name: z(n_layers, n_heads) for name in self.measure_names(kind) if name not in self._derived}
        self.pattern_w, self.pattern_n = z(n_layers, n_heads, len(PATTERN_OFFSETS)), z(len(PATTERN_OFFSETS))
        self.offset_hits, self.offset_n = z(n_layers, n_heads, len(ARGMAX_OFFSETS)), z(len(ARGMAX_OFFSETS))
        self.rare_hits, self.rare_n, self.rare_chance = z(n_layers, n_heads), 0.0, 0.0
        self.sent_conf = np.full((n_sentences, n_layers, n_heads), -1.0)  # per corpus sentence, -1 = not seen
        # cross only: argmax paths, kept per query (ints), for the agreement with the best layer found afterwards
        self.head_argmax: list[np.ndarray] = []  # (q, L, h) per batch
        self.layer_argmax: list[np.ndarray] = []  # (q, L)
        self.loo_argmax: list[np.ndarray] = []  # (q, L, h) argmax of the layer's mean over the other heads
        self.rho_head, self.rho_layer, self.rho_n = z(n_layers, n_heads), z(n_layers), 0.0
        self.fwd_hits, self.fwd_n = z(n_layers, n_heads), 0.0

    # measures computed in result() from other sums, not summed per query themselves
    _derived = ("prev_share", "same_share", "next_share", "sink_share", "best_offset", "best_offset_share",
                "rare_share", "agreement", "monotonicity", "forward_share")

    @staticmethod
    def measure_names(kind: str) -> list[str]:
        """The per-head measures a kind has (ablation and importance are added by analyze())."""
        names = ["confidence", "entropy", "entropy_fraction"]
        if kind in SELF_KINDS:
            names += ["mean_distance", "prev_share", "same_share"] + (["next_share"] if kind == "enc_self" else [])
            names += ["best_offset", "best_offset_share"]
        names += ["eos_share", "punct_share"] if kind != "dec_self" else ["bos_share"]
        names += ["sink_share"]
        if kind != "dec_self":
            names += ["rare_share"]
        if kind == "cross":
            names += ["agreement", "monotonicity", "forward_share"]
        return names

    def add(
        self,
        p: np.ndarray,  # (b, L, h, i, j) attention probabilities (0 where masked)
        allowed: np.ndarray,  # (b, i, j) bool: keys each query may attend to
        qvalid: np.ndarray,  # (b, i) bool: real queries
        src_len: np.ndarray,  # (b,) real source positions (with <eos>)
        tgt_len: np.ndarray,  # (b,) real decoder positions (with <bos>)
        punct: np.ndarray | None = None,  # (b,) source position of the final punctuation, -1 = none
        rare: np.ndarray | None = None,  # (b, s) bool: rarest candidate word's positions
        rare_ok: np.ndarray | None = None,  # (b,) bool: the sentence counts for rare_share
        sent_ids: np.ndarray | None = None,  # (b,) corpus indices, for top_sentences
    ) -> None:
        b, L, h, I, J = p.shape
        p = p.astype(np.float64)
        qv = qvalid.astype(np.float64)  # (b, i)
        qw = qv[:, None, None, :]  # (b, 1, 1, i) weights for summing per head

        def add(name: str, per_query: np.ndarray) -> None:  # (b, L, h, i) values -> summed over real queries
            self.sums[name] += (per_query * qw).sum((0, 3))

        self.n_q += qv.sum()
        qi = np.arange(I)
        rows = np.arange(b)[:, None]

        conf = p.max(-1)  # (b, L, h, i)
        add("confidence", conf)
        ent = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1)  # (b, L, h, i)
        add("entropy", ent)
        n_keys = allowed.sum(-1)  # (b, i)
        uniform = np.log(np.maximum(n_keys, 2))[:, None, None, :]
        add("entropy_fraction", np.where((n_keys > 1)[:, None, None, :], ent / uniform, 0.0))

        # Keys relative to a reference position per query: i itself (self-attention) or the proportional diagonal.
        if self.self_attn:
            ref = np.broadcast_to(qi, (b, I))  # (b, i)
            dist = np.abs(qi[:, None] - np.arange(J)[None, :])  # (i, j)
            mass = p.sum(-1)
            add("mean_distance", np.where(mass > 0, (p * dist).sum(-1) / np.where(mass > 0, mass, 1.0), 0.0))
        else:
            ref = np.floor(qi[None, :] * src_len[:, None] / tgt_len[:, None] + 0.5).astype(np.int64)  # (b, i)

        def at_offset(k):
            """(b, L, h, i) weight on key ref+k, and (b, i) whether that key is allowed for a real query."""
            j = ref + k
            inside = (j >= 0) & (j < J)
            jc = np.clip(j, 0, J - 1)
            ok = inside & allowed[rows, qi[None, :], jc] & qvalid
            w = np.take_along_axis(p, np.broadcast_to(jc[:, None, None, :, None], (b, L, h, I, 1)), -1)[..., 0]
            return w * ok[:, None, None, :], ok

        for n, k in enumerate(PATTERN_OFFSETS):
            w, ok = at_offset(k)
            self.pattern_w[..., n] += w.sum((0, 3))
            self.pattern_n[n] += ok.sum()  # prev/same/next_share are the pattern at -1, 0, +1 (eligible queries)

        am = p.argmax(-1)  # (b, L, h, i) strongest key (the first of equal ones)
        if self.self_attn:
            offset = am - qi
            for n, k in enumerate(ARGMAX_OFFSETS):
                ok = ((qi + k >= 0) & (qi + k < J))[None, :] & qvalid
                ok &= allowed[rows, qi[None, :], np.clip(qi + k, 0, J - 1)[None, :]]
                self.offset_hits[..., n] += ((offset == k) & ok[:, None, None, :]).sum((0, 3))
                self.offset_n[n] += ok.sum()

        # Sinks: weight on fixed key positions of each sentence.
        if self.kind == "dec_self":
            add("bos_share", p[..., 0])
        else:
            eos = src_len - 1
            add("eos_share", p[rows[:, 0], ..., eos])  # (b, L, h, i)
            if punct is None:
                punct = np.full(b, -1)
            add("punct_share", p[rows[:, 0], ..., np.maximum(punct, 0)] * (punct >= 0)[:, None, None, None])
            if rare is not None:
                ok = qvalid & rare_ok[:, None]  # (b, i)
                r = np.zeros((b, J), dtype=bool)
                r[:, : rare.shape[1]] = rare[:, :J]
                hit = np.take_along_axis(np.broadcast_to(r[:, None, None, :], (b, L, h, J)), am, -1)  # (b, L, h, i)
                self.rare_hits += (hit & ok[:, None, None, :]).sum((0, 3))
                self.rare_n += ok.sum()
                self.rare_chance += ((r.sum(-1)[:, None] / np.maximum(n_keys, 1)) * ok).sum()

        if sent_ids is not None and len(self.sent_conf):
            per_sent = (conf * qw).sum(-1) / np.maximum(qv.sum(-1), 1)[:, None, None]  # (b, L, h)
            self.sent_conf[sent_ids] = per_sent

        if self.kind == "cross":
            total = p.sum(2, keepdims=True)  # (b, L, 1, i, j)
            layer_am = total[:, :, 0].argmax(-1)  # (b, L, i) argmax of the head-averaged attention
            # A head of the best layer is compared with the mean of the layer's other heads, not with a mean
            # it is part of (with 4 heads it would pull the mean towards itself).
            loo_am = (total - p).argmax(-1) if h > 1 else am  # (b, L, h, i)
            self.head_argmax.append(am.transpose(0, 3, 1, 2)[qvalid])  # (q, L, h)
            self.layer_argmax.append(layer_am.transpose(0, 2, 1)[qvalid])  # (q, L)
            self.loo_argmax.append(loo_am.transpose(0, 3, 1, 2)[qvalid])  # (q, L, h)
            counted = tgt_len >= 2
            self.rho_head += spearman_with_position(am, qvalid)[counted].sum(0)
            self.rho_layer += spearman_with_position(layer_am, qvalid)[counted].sum(0)
            self.rho_n += counted.sum()
            pairs = qvalid[:, 1:] & qvalid[:, :-1]  # (b, i-1)
            self.fwd_hits += ((am[..., 1:] >= am[..., :-1]) & pairs[:, None, None, :]).sum((0, 3))
            self.fwd_n += pairs.sum()

    def best_layer(self) -> int:
        """cross: the decoder layer whose head-averaged argmax path is most monotone (Spearman)."""
        return int(np.argmax(self.rho_layer / max(self.rho_n, 1)))

    def result(self) -> dict:
        """{"measures": {name: (L, h) array}, ...}: means over the queries seen."""
        n = max(self.n_q, 1.0)
        m = {name: s / n for name, s in self.sums.items()}
        with np.errstate(invalid="ignore", divide="ignore"):
            pattern = np.where(self.pattern_n > 0, self.pattern_w / np.maximum(self.pattern_n, 1), 0.0)
        out: dict = {"queries": int(self.n_q)}
        if self.self_attn:
            names = self.measure_names(self.kind)
            for k, name in ((-1, "prev_share"), (0, "same_share"), (1, "next_share")):
                if name in names:
                    m[name] = pattern[..., PATTERN_OFFSETS.index(k)]
            shares = np.where(self.offset_n > 0, self.offset_hits / np.maximum(self.offset_n, 1), 0.0)  # (L, h, 7)
            best = shares.argmax(-1)
            m["best_offset"] = np.array(ARGMAX_OFFSETS)[best]  # ints
            m["best_offset_share"] = shares.max(-1)
            out["argmax_offsets"] = {"offsets": list(ARGMAX_OFFSETS), "shares": shares}
        m["sink_share"] = m["bos_share"] if self.kind == "dec_self" else m["eos_share"] + m["punct_share"]
        if self.kind != "dec_self":
            m["rare_share"] = self.rare_hits / max(self.rare_n, 1)
            out["chance"] = {"rare_share": self.rare_chance / max(self.rare_n, 1)}
            out["rare_queries"] = int(self.rare_n)
        if self.kind == "cross":
            best = self.best_layer()
            heads = np.concatenate(self.head_argmax) if self.head_argmax else np.zeros((0, self.L, self.h), int)
            layers = np.concatenate(self.layer_argmax) if self.layer_argmax else np.zeros((0, self.L), int)
            target = np.repeat(layers[:, best, None, None], self.L, 1).repeat(self.h, 2)  # (q, L, h)
            if self.loo_argmax:
                target[:, best] = np.concatenate(self.loo_argmax)[:, best]
            m["agreement"] = (heads == target).mean(0) if len(heads) else np.zeros((self.L, self.h))
            m["monotonicity"] = self.rho_head / max(self.rho_n, 1)
            m["forward_share"] = self.fwd_hits / max(self.fwd_n, 1)
            out["best_layer"] = best
            out["layer_monotonicity"] = self.rho_layer / max(self.rho_n, 1)
        out["measures"] = {name: m[name] for name in self.measure_names(self.kind)}
        out["offset_pattern"] = {
            "offsets": list(PATTERN_OFFSETS),
            "reference": "query position i" if self.self_attn else "proportional diagonal round(i*S/T)",
            "weights": pattern,
        }
        if len(self.sent_conf):
            order = np.argsort(-self.sent_conf, axis=0, kind="stable")[:TOP_SENTENCES]  # (5, L, h)
            seen = np.take_along_axis(self.sent_conf, order, 0) >= 0
            out["top_sentences"] = {
                "ids": [[[int(order[r, l, hh]) for r in range(order.shape[0]) if seen[r, l, hh]]
                         for hh in range(self.h)] for l in range(self.L)],
                "confidence": [[[float(self.sent_conf[order[r, l, hh], l, hh]) for r in range(order.shape[0])
                                 if seen[r, l, hh]] for hh in range(self.h)] for l in range(self.L)],
            }
        return out


def spearman_with_position(path: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(b, ..., i) argmax paths + (b, i) real queries -> (b, ...) Spearman rho of (i, path_i) per sentence.

    Ties get average ranks; a path that never moves (or one real position) gives 0.
    """
    b, I = valid.shape
    extra = path.shape[1:-1]
    v = valid.reshape((b,) + (1,) * len(extra) + (I,)).astype(np.float64)  # (b, ..., i)
    a = path.astype(np.float64)
    less = ((a[..., None, :] < a[..., :, None]) * v[..., None, :]).sum(-1)  # (b, ..., i)
    equal = ((a[..., None, :] == a[..., :, None]) * v[..., None, :]).sum(-1)
    rank_a = less + (equal + 1) / 2
    rank_i = np.broadcast_to(np.arange(1, I + 1, dtype=np.float64), rank_a.shape)  # pads come last: no effect
    n = np.maximum(v.sum(-1), 1)
    ma, mi = (rank_a * v).sum(-1) / n, (rank_i * v).sum(-1) / n
    da, di = (rank_a - ma[..., None]) * v, (rank_i - mi[..., None]) * v
    cov, sa, si = (da * di).sum(-1), np.sqrt((da * da).sum(-1)), np.sqrt((di * di).sum(-1))
    ok = (sa > 1e-12) & (si > 1e-12)
    return np.where(ok, cov / np.where(ok, sa * si, 1.0), 0.0)


def measure_head(p: np.ndarray, kind: str, allowed: np.ndarray | None = None, punct: int = -1,
                 rare: Sequence[bool] | None = None) -> dict[str, float]:
    """Every measure of one head's (i, j) matrix (one sentence, all rows real queries), as floats.

    `allowed` (i, j) defaults to every key (enc_self, cross) or the causal triangle (dec_self). For
    enc_self and cross the last key is <eos>; `punct` is the final punctuation's key position and
    `rare` marks the rarest word's key positions (see rarest_positions). For cross, agreement is with
    the head's own (single-head) layer, so it is 1; use the corpus report for the real value.
    """
    p = np.asarray(p, dtype=np.float64)
    I, J = p.shape
    if allowed is None:
        allowed = np.tril(np.ones((I, J), dtype=bool)) if kind == "dec_self" else np.ones((I, J), dtype=bool)
    stats = HeadStats(kind, 1, 1)
    r = None if rare is None else np.asarray(rare, dtype=bool)[None, :]
    stats.add(p[None, None, None], np.asarray(allowed, dtype=bool)[None], np.ones((1, I), dtype=bool),
              src_len=np.array([J if kind != "dec_self" else I]), tgt_len=np.array([I]), punct=np.array([punct]),
              rare=r, rare_ok=None if r is None else np.array([True]))
    res = stats.result()
    out = {name: float(v[0, 0]) for name, v in res["measures"].items()}
    if "chance" in res:
        out["rare_chance"] = float(res["chance"]["rare_share"])
    return out


def head_roles(m: dict[str, float], kind: str, thresholds: dict | None = None,
               rare_chance: float | None = None) -> list[str]:
    """Role labels of one head from its measures (see DEFINITIONS["roles"]); 'mixed' when none applies."""
    th = {**THRESHOLDS, **(thresholds or {})}
    roles = {}
    if kind in SELF_KINDS and m.get("best_offset_share", 0.0) >= th["positional"]:
        k = int(m["best_offset"])
        if k in th["positional_offsets"]:
            roles["positional"] = "positional 0" if k == 0 else f"positional {k:+d}"
    if kind in SELF_KINDS and m.get("prev_share", 0.0) >= th["previous_next"]:
        roles["previous-token"] = "previous-token"
    if kind == "enc_self" and m.get("next_share", 0.0) >= th["previous_next"]:
        roles["next-token"] = "next-token"
    if kind == "cross" and m.get("agreement", 0.0) >= th["aligner_agreement"] \
            and m.get("monotonicity", 0.0) >= th["aligner_monotonicity"]:
        roles["aligner"] = "aligner"
    if kind != "dec_self" and "rare_share" in m:
        chance = m.get("rare_chance", 0.0) if rare_chance is None else rare_chance
        if m["rare_share"] >= th["rare_word"] and m["rare_share"] >= th["rare_word_over_chance"] * chance:
            roles["rare-word"] = "rare-word"
    if m.get("sink_share", 0.0) >= th["sink"]:
        roles["sink"] = "sink"
    if m.get("entropy_fraction", 0.0) >= th["diffuse"]:
        roles["diffuse"] = "diffuse"
    return [roles[r] for r in ROLE_ORDER if r in roles] or ["mixed"]


# ============================================================================ the model passes (torch)

def _batches(examples: list[Example], batch_tokens: int) -> list[list[int]]:
    """Indices into examples, sorted by length and grouped to <= batch_tokens padded positions."""
    return token_batches([(e.src_ids, e.tgt_ids) for e in examples], max(1, batch_tokens), shuffle=False)


def _tensors(examples: list[Example], batch: list[int], translator):
    """(src (b, s), decoder input (b, t) = <bos> y, decoder output (b, t) = y <eos>)."""
    tv = translator.tgt_vocab
    return collate([(e.src_ids, e.tgt_ids) for e in examples], batch, translator.cfg.pad_idx, tv.bos_idx, tv.eos_idx)


def token_nll(log_probs: torch.Tensor, tgt_out: torch.Tensor, pad: int) -> torch.Tensor:
    """(b, t, V) log-probabilities + (b, t) gold ids -> summed NLL of the real target tokens (a scalar)."""
    gold = log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (b, t)
    return -(gold * (tgt_out != pad)).sum()


def ones_head_mask(cfg, requires_grad: bool = False, dtype=torch.float32, batch: int | None = None) -> HeadMask:
    """Gates xi = 1 for every head: kind -> (L, h), or (L, b, h), a gate per sentence, when `batch` = b is given."""
    layers = {"enc_self": cfg.n_encoder_layers, "dec_self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    shape = lambda n: (n, cfg.n_heads) if batch is None else (n, batch, cfg.n_heads)  # noqa: E731
    return {k: torch.ones(shape(n), dtype=dtype, requires_grad=requires_grad) for k, n in layers.items()}


def head_mask_gradient(model, src, tgt_in, tgt_out, head_mask: HeadMask | None = None,
                       return_trace: bool = False):
    """(summed NLL, {kind: dL/dxi}, trace or None) for one batch; xi = 1 unless `head_mask` is given.

    The gradients have the gates' shape: (L, h) gates shared by the batch, or (L, b, h) gates, one per sentence.
    As sentence x's loss depends on its own gates only, a (L, b, h) gradient holds each sentence's dL(x)/dxi
    from one backward pass. Only the gates get gradients (torch.autograd.grad with them as inputs: no weight
    gradients are formed).
    """
    dtype = next(model.parameters()).dtype
    xi = head_mask or ones_head_mask(model.cfg, dtype=dtype)
    xi = {k: v.detach().clone().to(dtype).requires_grad_(True) for k, v in xi.items()}
    with torch.enable_grad():
        log_probs, trace = model(src, tgt_in, return_trace=return_trace, head_mask=xi)
        loss = token_nll(log_probs, tgt_out, model.cfg.pad_idx)
        grads = torch.autograd.grad(loss, [xi[k] for k in KINDS])
    return loss.detach(), dict(zip(KINDS, grads)), trace


def ablation_losses(translator, examples: list[Example], heads: Sequence[tuple[str, int, int]],
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: Callable[[float], object] | None = None,
                    ) -> tuple[float, dict[tuple[str, int, int], float]]:
    """(summed token NLL with every head on, {head: summed NLL with that head alone off}) over the examples.

    The same maths as EncoderDecoder.forward with a head_mask (a test checks it), but layers below the
    switched-off head are not run again: each batch keeps the baseline's input to every encoder and decoder
    layer, so switching off a head of decoder layer l reruns decoder layers l.. only, and one of encoder
    layer l reruns encoder layers l.. and the decoder. Only real target positions reach the generator.
    """
    model, cfg = translator.model, translator.cfg
    pad = cfg.pad_idx
    off = {h_: 0.0 for h_ in heads}
    base = 0.0
    batches = _batches(examples, batch_tokens)

    def run_encoder(x, src_mask, start=0, layer_mask=None):
        for n in range(start, len(model.encoder_layers)):
            x, _ = model.encoder_layers[n](x, src_mask, layer_mask if n == start else None)
        return model.encoder_norm(x)

    def run_decoder(y, memory, src_mask, tgt_mask, start=0, kind=None, layer_mask=None, keep=None):
        for n in range(start, len(model.decoder_layers)):
            if keep is not None:
                keep.append(y)
            shm = layer_mask if n == start and kind == "dec_self" else None
            chm = layer_mask if n == start and kind == "cross" else None
            y, _, _ = model.decoder_layers[n](y, memory, src_mask, tgt_mask, shm, chm)
        return model.decoder_norm(y)

    with torch.inference_mode():
        for n, batch in enumerate(batches):
            src, tgt_in, tgt_out = _tensors(examples, batch, translator)
            src_mask, tgt_mask = make_src_mask(src, pad), make_tgt_mask(tgt_in, pad)
            real = tgt_out != pad  # (b, t)
            gold = tgt_out[real]  # (N,)

            def nll(y):  # (b, t, d) decoder states -> summed NLL of the real target tokens
                lp = model.generator(y[real])  # (N, V): padded positions never reach the generator
                return -float(lp.gather(-1, gold[:, None]).sum())

            enc_in = []  # input of every encoder layer, (b, s, d) each
            x, _ = model.src_embed(src)
            for layer in model.encoder_layers:
                enc_in.append(x)
                x, _ = layer(x, src_mask)
            memory = model.encoder_norm(x)
            dec_in: list[torch.Tensor] = []
            y0, _ = model.tgt_embed(tgt_in)
            base += nll(run_decoder(y0, memory, src_mask, tgt_mask, keep=dec_in))
            for kind, l, hh in heads:
                mask = torch.ones(cfg.n_heads)
                mask[hh] = 0.0
                if kind == "enc_self":
                    mem = run_encoder(enc_in[l], src_mask, l, mask)
                    off[(kind, l, hh)] += nll(run_decoder(y0, mem, src_mask, tgt_mask))
                else:
                    off[(kind, l, hh)] += nll(run_decoder(dec_in[l], memory, src_mask, tgt_mask, l, kind, mask))
            if progress is not None:
                progress((n + 1) / len(batches))
    return base, off


def normalise_importance(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """bertology: each layer's scores / their L2 norm, then min-max over all heads of all kinds."""
    per_layer = {k: v / (np.sqrt((v ** 2).sum(-1, keepdims=True)) + 1e-20) for k, v in raw.items()}
    flat = np.concatenate([v.ravel() for v in per_layer.values()])
    lo, hi = flat.min(), flat.max()
    return {k: (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v) for k, v in per_layer.items()}


class _Progress:
    """Maps each stage's own progress onto 0..1 for the caller's progress(fraction, message)."""

    def __init__(self, callback, weights: dict[str, float]):
        self.callback, self.done = callback, 0.0
        total = sum(weights.values()) or 1.0
        self.weights = {k: w / total for k, w in weights.items()}
        self.stage, self.base = None, 0.0

    def start(self, stage: str) -> None:
        if self.stage is not None:
            self.base += self.weights.get(self.stage, 0.0)
        self.stage = stage
        self.update(0.0, stage)

    def update(self, within: float, message: str) -> None:
        if self.callback is not None:
            self.callback(min(1.0, self.base + self.weights.get(self.stage, 0.0) * min(max(within, 0.0), 1.0)), message)


def analyze(
    translator,
    src_texts: Sequence[str],
    ref_texts: Sequence[str],
    *,
    ablation: bool = True,
    pruning: bool = True,
    progress: Callable[[float, str], object] | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ablation_limit: int | None = None,
    pruning_limit: int | None = DEFAULT_PRUNING_LIMIT,
    name: str = "",
    src_path: str | None = None,
    ref_path: str | None = None,
) -> dict:
    """The head report (a dict in the schema SCHEMA) of `translator` on the sentence pairs.

    `progress(fraction, message)` is called as the work goes on (fraction 0..1). `ablation_limit` /
    `pruning_limit` use only the first N sentences for those steps (None or 0: all). Uses the torch
    threads the caller set. Floats keep DIGITS significant figures.
    """
    model, cfg = translator.model, translator.cfg
    pad = cfg.pad_idx
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    t0 = time.perf_counter()
    examples, skipped = prepare(translator, src_texts, ref_texts)
    if not examples:
        raise ValueError("no sentence pair with words on both sides to analyse")
    timings["prepare"] = time.perf_counter() - t0
    n_layers = {"enc_self": cfg.n_encoder_layers, "dec_self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    n_src_tok = sum(len(e.src_ids) for e in examples)
    n_tgt_tok = sum(len(e.tgt_ids) + 1 for e in examples)  # predicted tokens: the reference and <eos>
    abl_n = len(examples) if not ablation_limit else min(ablation_limit, len(examples))
    pr_n = len(src_texts) if not pruning_limit else min(pruning_limit, len(src_texts))
    all_heads = [(k, l, hh) for k in KINDS for l in range(n_layers[k]) for hh in range(cfg.n_heads)]
    # Relative costs for the progress fraction, in seconds per sentence measured on the shipped model.
    n_ex = len(examples)
    prog = _Progress(progress, {"measures": 0.005 * n_ex, "ablation": 0.05 * abl_n if ablation else 0.0,
                                "pruning": 0.25 * pr_n if pruning else 0.0})

    # --- 1. one traced, gated forward + backward per batch: every attention measure and the gate gradients
    prog.start("measures")
    t0 = time.perf_counter()
    stats = {k: HeadStats(k, n_layers[k], cfg.n_heads, len(src_texts)) for k in KINDS}
    grad_abs = {k: np.zeros((n_layers[k], cfg.n_heads)) for k in KINDS}
    total_nll = 0.0
    batches = _batches(examples, batch_tokens)
    for n, batch in enumerate(batches):
        src, tgt_in, tgt_out = _tensors(examples, batch, translator)
        gates = ones_head_mask(cfg, dtype=next(model.parameters()).dtype, batch=src.shape[0])  # (L, b, h)
        loss, grads, trace = head_mask_gradient(model, src, tgt_in, tgt_out, gates, return_trace=True)
        total_nll += float(loss)
        for k in KINDS:  # |dL(x)/dxi| per sentence, then the sum: no sign cancels between sentences
            grad_abs[k] += grads[k].double().abs().sum(1).numpy()
        src_real = (src != pad).numpy()  # (b, s)
        tgt_real = (tgt_in != pad).numpy()  # (b, t)
        tgt_real[:, 0] = True  # the start query is real even where it is <pad> (Marian), as make_tgt_mask has it
        ex = [examples[i] for i in batch]
        s_len, t_len = src_real.sum(1), tgt_real.sum(1)
        punct = np.array([e.punct for e in ex])
        rare = np.zeros_like(src_real)
        for r, e in enumerate(ex):
            rare[r, : len(e.rare)] = e.rare
        rare_ok = np.array([e.rare_ok for e in ex])
        ids = np.array([e.index for e in ex])
        with torch.no_grad():
            for k in KINDS:
                recs = trace.attention(k)
                p = torch.stack([a.probs.detach() for a in recs], 1).float().numpy()  # (b, L, h, i, j)
                allowed = recs[0].mask[:, 0].numpy()  # (b, i, j)
                qvalid = src_real if k == "enc_self" else tgt_real
                stats[k].add(p, allowed, qvalid, s_len, t_len, punct, rare, rare_ok, ids)
        del trace
        prog.update((n + 1) / len(batches), f"attention measures and importance: batch {n + 1}/{len(batches)}")
    results = {k: stats[k].result() for k in KINDS}
    importance_raw = {k: v / n_tgt_tok for k, v in grad_abs.items()}
    importance = normalise_importance(importance_raw)
    for k in KINDS:
        results[k]["measures"]["importance_raw"] = importance_raw[k]
        results[k]["measures"]["importance"] = importance[k]
    timings["measures_importance"] = time.perf_counter() - t0

    # --- 2. ablation: one plain forward per head switched off, batched sentences; decoder heads reuse the memory
    ablation_section = None
    if ablation:
        prog.start("ablation")
        t0 = time.perf_counter()
        abl_ex = examples[:abl_n]
        base, off = ablation_losses(translator, abl_ex, all_heads, batch_tokens,
                                    lambda f: prog.update(f, f"ablation: {len(all_heads)} heads, one at a time"))
        tokens = sum(len(e.tgt_ids) + 1 for e in abl_ex)
        delta = {k: np.zeros((n_layers[k], cfg.n_heads)) for k in KINDS}
        for (kind, l, hh), v in off.items():
            delta[kind][l, hh] = (v - base) / tokens
        for k in KINDS:
            results[k]["measures"]["ablation_loss_increase"] = delta[k]
        ablation_section = {"sentences": abl_n, "tokens": tokens, "baseline_loss": base / tokens,
                            "loss_increase": delta}
        timings["ablation"] = time.perf_counter() - t0

    # --- roles (they need no pruning)
    for k in KINDS:
        m = results[k]["measures"]
        chance = results[k].get("chance", {}).get("rare_share")
        results[k]["roles"] = [[head_roles({name: float(v[l, hh]) for name, v in m.items()}, k, None, chance)
                                for hh in range(cfg.n_heads)] for l in range(n_layers[k])]

    # --- 3. pruning curve: greedy BLEU with the least important heads off
    pruning_section = None
    if pruning:
        prog.start("pruning")
        t0 = time.perf_counter()
        pruning_section = pruning_curve(translator, list(src_texts[:pr_n]), list(ref_texts[:pr_n]), importance,
                                        lambda f, msg: prog.update(f, msg))
        pruning_section["limit"] = pruning_limit or None
        timings["pruning"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    prog.update(1.0, "done")

    # The top sentences' text goes into the report, so that a reader (the app's Heads page) needs no data folder.
    top_ids = sorted({i for k in KINDS for layer in results[k].get("top_sentences", {}).get("ids", [])
                      for head in layer for i in head})
    texts = {str(i): {"src": src_texts[i], "ref": ref_texts[i]} for i in top_ids}
    report = {
        "schema": SCHEMA,
        "checkpoint": name,
        "config": cfg.to_dict(),
        "corpus": {"src": corpus_file_name(src_path), "ref": corpus_file_name(ref_path),
                   "sentences": len(examples), "lines": len(src_texts), "skipped": skipped,
                   "tokens": {"src": n_src_tok, "tgt": n_tgt_tok, "src_words": n_src_tok - len(examples)},
                   "src_final_punct": sum(e.punct >= 0 for e in examples),
                   "rare_word_sentences": sum(e.rare_ok for e in examples),
                   "mean_token_nll": total_nll / n_tgt_tok,
                   "texts": texts},
        "settings": {"batch_tokens": batch_tokens, "ablation": ablation, "pruning": pruning,
                     "ablation_limit": ablation_limit or None, "pruning_limit": pruning_limit or None,
                     "torch_threads": torch.get_num_threads(), "torch": torch.__version__},
        "definitions": DEFINITIONS,
        "thresholds": THRESHOLDS,
        "kinds": {k: {"layers": n_layers[k], "heads": cfg.n_heads, **results[k]} for k in KINDS},
        "importance": {"raw": importance_raw, "normalised": importance, "tokens": n_tgt_tok,
                       "order": [list(h_) for h_ in importance_order(importance)],
                       "note": "raw: |dL(x)/dxi| per sentence x (one gate per sentence and head), summed over "
                               "sentences, / target tokens; normalised: per-layer L2, then global min-max (as "
                               "bertology's compute_heads_importance)"},
        "ablation": ablation_section,
        "pruning": pruning_section,
        "timings": timings,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    return _rounded(report)


def corpus_file_name(path: str | Path | None) -> str | None:
    """A corpus file as the report names it: its folder's name and its own ("multi30k/val.de.gz").

    No machine's path goes into a report that may be shipped; older reports hold absolute paths, which this
    shortens the same way for display.
    """
    if path is None:
        return None
    parts = Path(os.path.abspath(path)).parts[1:]  # without the root; symbolic links are not followed
    return "/".join(parts[-2:]) or None


def importance_order(importance: dict[str, np.ndarray], kinds: Sequence[str] = KINDS) -> list[tuple[str, int, int]]:
    """(kind, layer, head) of the given kinds, least important first (ties: kind, layer, head order)."""
    heads = [(float(importance[k][l, hh]), KINDS.index(k), l, hh) for k in kinds
             for l in range(importance[k].shape[0]) for hh in range(importance[k].shape[1])]
    return [(KINDS[k], l, hh) for _, k, l, hh in sorted(heads)]


def pruning_curve(translator, src: list[str], ref: list[str], importance: dict[str, np.ndarray],
                  progress: Callable[[float, str], object] | None = None,
                  fractions: Sequence[float] = PRUNING_FRACTIONS) -> dict:
    """Greedy corpus BLEU with round(f x N) of the least important heads off, per kind and for all heads.

    Then, per group, the head counts between the last point within thresholds.bleu_drop of the baseline and
    the first point below it are decoded too ("refined"), so heads_off_before_bleu_drop is exact to one head.
    """
    from model.training.evaluate import bleu_scores

    groups = {k: importance_order(importance, (k,)) for k in KINDS}
    groups["all"] = importance_order(importance)
    cache: dict[frozenset, dict] = {}  # the same heads off (e.g. none) are decoded once
    # progress: the coarse decodes, and room for the refinement (at most a step's gap minus one per group)
    coarse = {frozenset(order[: _count(f, len(order))]) for order in groups.values() for f in fractions}
    todo = len(coarse) + sum(max(0, math.ceil(len(o) / max(len(fractions) - 1, 1)) - 1) for o in groups.values())
    signature = None

    def bleu(off: list) -> dict:
        nonlocal signature
        key = frozenset(off)
        if key not in cache:
            done = len(cache)

            def step(n_sent: int) -> None:
                step.count += n_sent
                if progress is not None:
                    progress(min(1.0, (done + step.count / max(len(src), 1)) / todo),
                             f"pruning curve: decode {done + 1} of about {todo} ({len(off)} heads off)")
            step.count = 0
            hyps = translator.translate_batch(src, off_heads=off, progress=step)
            scores = bleu_scores(hyps, ref, translator.tgt_lang)
            signature = scores["signature"]
            cache[key] = {"bleu": scores["sacrebleu"], "bleu_lower_spacy_tokens": scores["bleu_lower_spacy_tokens"]}
        return cache[key]

    def point(f: float | None, off: list) -> dict:
        return {"fraction": f, "heads_off": len(off), "off": [list(h_) for h_ in off], **bleu(off)}

    curves = {g: [point(f, order[: _count(f, len(order))]) for f in fractions] for g, order in groups.items()}
    base = curves["all"][0]["bleu"]
    drop = THRESHOLDS["bleu_drop"]
    refined: dict[str, list] = {}
    within: dict[str, int] = {}
    for g, order in groups.items():
        pts = curves[g]
        first_bad = next((pt["heads_off"] for pt in pts if base - pt["bleu"] >= drop), None)
        last_ok = max((pt["heads_off"] for pt in pts if first_bad is None or pt["heads_off"] < first_bad), default=0)
        refined[g] = []
        n_ok = last_ok
        if first_bad is not None:
            for n in range(last_ok + 1, first_bad):
                pt = point(None, order[:n])
                refined[g].append(pt)
                if base - pt["bleu"] >= drop:
                    break
                n_ok = n
        within[g] = n_ok
    return {"sentences": len(src), "baseline_bleu": base, "signature": signature,
            "order": "ascending normalised importance (importance.order)", "curves": curves, "refined": refined,
            "heads_off_before_bleu_drop": within,
            "note": "heads_off_before_bleu_drop: per group, how many heads (in importance order) are off at the last "
                    "count before the first one whose BLEU is >= thresholds.bleu_drop below baseline_bleu; the counts "
                    "between two points of the curve around that drop are decoded too (refined, fraction null)"}


def _count(fraction: float, n: int) -> int:
    """round(fraction x n), halves up (Python's round() would send 0.5 x 5 to 2)."""
    return int(math.floor(fraction * n + 0.5 + 1e-9))


def _rounded(x):
    """NumPy to lists, floats rounded to DIGITS significant figures, recursively."""
    if isinstance(x, dict):
        return {str(k): _rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v) for v in x]
    if isinstance(x, np.ndarray):
        return _rounded(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(f"{float(x):.{DIGITS}g}")
    return x


# ============================================================================ the report file

class ReportError(ValueError):
    """A head report that is missing, unreadable or not in the schema; the message names the file."""


def load_report(path: str | Path) -> dict:
    """The report at `path` (plain or .gz JSON), checked against the schema; raises ReportError."""
    path = Path(path)
    if not path.is_file():
        raise ReportError(f"{path}: no head report there (make one with `python -m model.analyze`)")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError) as e:
        raise ReportError(f"{path}: not a readable JSON file ({e})") from e
    bad = lambda why: ReportError(f"{path}: not a head report in schema {SCHEMA}: {why}")  # noqa: E731
    if not isinstance(d, dict):
        raise bad("the top level is not an object")
    if d.get("schema") != SCHEMA:
        raise bad(f"schema is {d.get('schema')!r}")
    for key in ("checkpoint", "config", "corpus", "definitions", "thresholds", "kinds", "importance", "timings",
                "created"):
        if key not in d:
            raise bad(f"'{key}' is missing")
    for kind in KINDS:
        k = d["kinds"].get(kind) if isinstance(d["kinds"], dict) else None
        if not isinstance(k, dict):
            raise bad(f"kinds.{kind} is missing")
        L, h = k.get("layers"), k.get("heads")
        if not isinstance(L, int) or not isinstance(h, int) or L < 1 or h < 1:
            raise bad(f"kinds.{kind} has no valid layers/heads")
        for name, grid in {**k.get("measures", {}), "roles": k.get("roles")}.items():
            if not (isinstance(grid, list) and len(grid) == L
                    and all(isinstance(r, list) and len(r) == h for r in grid)):
                raise bad(f"kinds.{kind}.{'measures.' if name != 'roles' else ''}{name} is not a {L} x {h} grid")
        for name in HeadStats.measure_names(kind):
            if name not in k["measures"]:
                raise bad(f"kinds.{kind}.measures.{name} is missing")
    return d


def cache_dir(checkpoint_name: str) -> Path:
    """$XDG_CACHE_HOME (default ~/.cache)/attention-atlas/<checkpoint name>."""
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base).expanduser() / "attention-atlas" / checkpoint_name


def folder_writable(folder: Path) -> bool:
    """Can a file be created in `folder`? (tried, since os.access says yes to root on a read-only mount)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def write_report(report: dict, out: str | Path | None, checkpoint: Path) -> Path:
    """Write to `out`, or to checkpoint/head_report.json, or (read-only checkpoint) to the cache folder."""
    text = json.dumps(report, ensure_ascii=False, indent=1) + "\n"
    if out is not None:
        path = Path(out)
    else:
        path = checkpoint / REPORT_NAME
        if not folder_writable(checkpoint):
            path = cache_dir(checkpoint.resolve().name) / REPORT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from model.analysis.experiments import find_data_dir
    from model.inference.translator import Translator
    from model.io.checkpoint import DEFAULT_CHECKPOINT, CheckpointError
    from model.training.data import DataError, read_parallel

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="checkpoint folder")
    ap.add_argument("--src", help="source sentences, one per line (plain or .gz); default: Multi30k val.de")
    ap.add_argument("--ref", help="reference translations, one per line (plain or .gz); default: Multi30k val.en")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N sentence pairs (0 = all)")
    ap.add_argument("--out", help=f"report file (default: CHECKPOINT/{REPORT_NAME}, or the cache folder when the "
                                  f"checkpoint folder is not writable)")
    ap.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS,
                    help="padded positions per batch (default %(default)s)")
    ap.add_argument("--ablation-limit", type=int, default=0, help="sentences for the ablation losses (0 = all)")
    ap.add_argument("--pruning-limit", type=int, default=DEFAULT_PRUNING_LIMIT,
                    help="sentences decoded for the pruning curve (0 = all; default %(default)s)")
    ap.add_argument("--no-ablation", action="store_true", help="skip the per-head ablation losses")
    ap.add_argument("--no-pruning", action="store_true", help="skip the pruning curve")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = all cores)")
    args = ap.parse_args(argv)

    if (args.src is None) != (args.ref is None):
        print("error: give both --src and --ref, or neither (then the Multi30k validation split is used)",
              file=sys.stderr)
        return 2
    src_path, ref_path = args.src, args.ref
    if src_path is None:
        folder, looked = find_data_dir("val")
        if folder is None:
            print("error: the Multi30k validation split (val.de[.gz], val.en[.gz]) was not found; looked in: "
                  + ", ".join(str(p) for p in looked) + " (set ATLAS_DATA_DIR or pass --src and --ref)",
                  file=sys.stderr)
            return 2
        from model.training.data import find_file
        try:
            src_path, ref_path = str(find_file(folder, "val", "de")), str(find_file(folder, "val", "en"))
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        translator = Translator.from_checkpoint(args.checkpoint)
        src, ref = read_parallel(src_path, ref_path)
    except (CheckpointError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.limit > 0:
        src, ref = src[: args.limit], ref[: args.limit]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(args.threads if args.threads > 0 else cores)
    checkpoint = Path(args.checkpoint)
    with tqdm(total=1000, desc="analysing", unit="‰", file=sys.stderr, disable=None,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]") as bar:
        def progress(fraction: float, message: str) -> None:
            bar.set_description_str(message, refresh=False)
            bar.update(int(fraction * 1000) - bar.n)

        try:
            report = analyze(translator, src, ref, ablation=not args.no_ablation, pruning=not args.no_pruning,
                             progress=progress, batch_tokens=args.batch_tokens, ablation_limit=args.ablation_limit,
                             pruning_limit=args.pruning_limit, name=checkpoint.resolve().name, src_path=src_path,
                             ref_path=ref_path)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        path = write_report(report, args.out, checkpoint)
    except OSError as e:
        print(f"error: cannot write the report ({e})", file=sys.stderr)
        return 2
    t = report["timings"]
    print(f"wrote {path}  ({report['corpus']['sentences']} sentences; "
          + ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
