"""Per-head measures on attention maps (NumPy): what every head of one attention kind does over many queries.

HeadStats sums, batch by batch, the confidence and entropy (Voita et al. 2019; Clark et al. 2019), mean
attention distance (Vig & Belinkov 2019), the weight at offsets from a reference key (positional heads), the
weight on sink tokens, rare-word hits (Voita) and, for cross-attention, the argmax paths whose agreement and
monotonicity make an aligner; head_roles turns one head's measures into documented role labels. The same code
serves one hand-made matrix (measure_head) and a whole corpus, so the tests of the one check the other.
Definitions: model/analysis/report.py (DEFINITIONS). Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from model.records import KINDS

SELF_KINDS = ("enc_self", "dec_self")
ARGMAX_OFFSETS = tuple(range(-3, 4))  # offsets whose argmax share is counted (positional heads)
PATTERN_OFFSETS = tuple(range(-8, 9))  # offsets of the average attention pattern kept for the app
TOP_SENTENCES = 5

THRESHOLDS = {
    "positional": 0.90,  # Voita et al.: the argmax key at one fixed offset for >= 90 % of queries
    "positional_offsets": [-1, 0, 1],  # offsets that give a "positional" label
    "previous_next": 0.50,  # Clark et al.: mean weight on the previous (next) token above 0.5
    "sink": 0.60,  # Clark et al.: mean weight on the sink tokens above 0.6
    "rare_word": 0.50,  # share of queries whose argmax is the rarest source word ...
    "rare_word_over_chance": 2.0,  # ... and at least this many times the chance share
    "aligner_aer": 35.0,  # cross heads: AER (%) on the annotated pairs at most this (a report with alignment) ...
    "aligner_agreement": 0.50,  # ... else: argmax agrees with the best layer's head-averaged argmax ...
    "aligner_monotonicity": 0.50,  # ... and the head's own argmax path is this monotone (Spearman), so that a
    #                                 head resting on <eos> whenever the layer does is not called an aligner
    "diffuse": 0.80,  # entropy >= 80 % of the uniform row's entropy
    "bleu_drop": 1.0,  # pruning summary: heads that can go before greedy BLEU drops by this many points
}
# The main label is the first of these that applies: the most specific behaviour first, "diffuse" last.
ROLE_ORDER = ("positional", "previous-token", "next-token", "aligner", "rare-word", "sink", "diffuse")


class HeadStats:
    """Sums and counts for every layer and head of one attention kind, fed batch by batch.

    add() takes a batch's attention probabilities (b, L, h, i, j) with the masks the model used;
    result() turns the sums into per-head means. The same code serves one hand-made matrix
    (measure_head) and the whole corpus, so the tests of the one check the other.
    """

    def __init__(self, kind: str, n_layers: int, n_heads: int, n_sentences: int = 0, src_eos: bool = True):
        """`src_eos`: the source ends with the end token (not T5Gemma's, whose eos_share stays 0)."""
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}")
        self.kind, self.L, self.h, self.src_eos = kind, n_layers, n_heads, src_eos
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
        allowed: np.ndarray,  # (b, i, j) or per layer (b, L, i, j; sliding windows) bool: keys each query may see
        qvalid: np.ndarray,  # (b, i) bool: real queries
        src_len: np.ndarray,  # (b,) real source positions (with <eos>)
        tgt_len: np.ndarray,  # (b,) real decoder positions (with <bos>)
        punct: np.ndarray | None = None,  # (b,) source position of the final punctuation, -1 = none
        rare: np.ndarray | None = None,  # (b, s) bool: rarest candidate word's positions
        rare_ok: np.ndarray | None = None,  # (b,) bool: the sentence counts for rare_share
        sent_ids: np.ndarray | None = None,  # (b,) corpus indices, for top_sentences
    ) -> None:
        p = p.astype(np.float64)
        qv = qvalid.astype(np.float64)  # (b, i)
        qw = qv[:, None, None, :]  # (b, 1, 1, i) weights for summing per head
        self.n_q += qv.sum()
        conf, n_keys = self._add_spread(p, allowed, qw)
        # The offsets' eligibility and rare_share read the keys any layer may see (a window wider than the offsets)
        allowed = allowed.any(1) if allowed.ndim == 4 else allowed  # (b, i, j)
        n_keys = n_keys.max(1) if n_keys.ndim == 3 else n_keys  # (b, i)
        self._add_pattern(p, allowed, qvalid, self._reference(p, src_len, tgt_len, qw))
        am = p.argmax(-1)  # (b, L, h, i) strongest key (the first of equal ones)
        if self.self_attn:
            self._add_argmax_offsets(am, allowed, qvalid, p.shape[-1])
        # Sinks: weight on fixed key positions of each sentence.
        if self.kind == "dec_self":
            self._sum("bos_share", p[..., 0], qw)
        else:
            self._add_source_sinks(p, src_len, punct, qw)
            if rare is not None:
                self._add_rare(am, qvalid, n_keys, rare, rare_ok, p.shape[-1])
        if sent_ids is not None and len(self.sent_conf):
            per_sent = (conf * qw).sum(-1) / np.maximum(qv.sum(-1), 1)[:, None, None]  # (b, L, h)
            self.sent_conf[sent_ids] = per_sent
        if self.kind == "cross":
            self._add_alignment(p, am, qvalid, tgt_len)

    def _sum(self, name: str, per_query: np.ndarray, qw: np.ndarray) -> None:
        """(b, L, h, i) values -> added to sums[name], summed over the real queries (weights qw (b, 1, 1, i))."""
        self.sums[name] += (per_query * qw).sum((0, 3))

    def _add_spread(self, p: np.ndarray, allowed: np.ndarray, qw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Confidence, entropy and entropy_fraction; returns ((b, L, h, i) max weights, (b, i) or (b, L, i) allowed
        keys)."""
        conf = p.max(-1)  # (b, L, h, i)
        self._sum("confidence", conf, qw)
        ent = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1)  # (b, L, h, i)
        self._sum("entropy", ent, qw)
        n_keys = allowed.sum(-1)  # (b, i), or (b, L, i) where each layer has its mask
        per = n_keys[:, :, None, :] if n_keys.ndim == 3 else n_keys[:, None, None, :]  # (b, L|1, 1, i)
        uniform = np.log(np.maximum(per, 2))
        self._sum("entropy_fraction", np.where(per > 1, ent / uniform, 0.0), qw)
        return conf, n_keys

    def _reference(self, p: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, qw: np.ndarray) -> np.ndarray:
        """(b, i) the key each query's offsets count from: i itself (self-attention) or the proportional diagonal.

        Self-attention also sums mean_distance here, the distance from that same reference.
        """
        b, _, _, I, J = p.shape
        qi = np.arange(I)
        if not self.self_attn:
            return np.floor(qi[None, :] * src_len[:, None] / tgt_len[:, None] + 0.5).astype(np.int64)
        dist = np.abs(qi[:, None] - np.arange(J)[None, :])  # (i, j)
        mass = p.sum(-1)
        self._sum("mean_distance", np.where(mass > 0, (p * dist).sum(-1) / np.where(mass > 0, mass, 1.0), 0.0), qw)
        return np.broadcast_to(qi, (b, I))

    def _add_pattern(self, p: np.ndarray, allowed: np.ndarray, qvalid: np.ndarray, ref: np.ndarray) -> None:
        """Weight on key ref+k for every k of PATTERN_OFFSETS, over the real queries for which that key is allowed."""
        b, L, h, I, J = p.shape
        qi, rows = np.arange(I), np.arange(b)[:, None]
        for n, k in enumerate(PATTERN_OFFSETS):
            j = ref + k  # (b, i)
            inside = (j >= 0) & (j < J)
            jc = np.clip(j, 0, J - 1)
            ok = inside & allowed[rows, qi[None, :], jc] & qvalid  # (b, i)
            w = np.take_along_axis(p, np.broadcast_to(jc[:, None, None, :, None], (b, L, h, I, 1)), -1)[..., 0]
            self.pattern_w[..., n] += (w * ok[:, None, None, :]).sum((0, 3))
            self.pattern_n[n] += ok.sum()  # prev/same/next_share are the pattern at -1, 0, +1 (eligible queries)

    def _add_argmax_offsets(self, am: np.ndarray, allowed: np.ndarray, qvalid: np.ndarray, J: int) -> None:
        """Self-attention: per offset of ARGMAX_OFFSETS, the queries whose strongest key (am, (b, L, h, i)) is there."""
        b, I = qvalid.shape
        qi, rows = np.arange(I), np.arange(b)[:, None]
        offset = am - qi
        for n, k in enumerate(ARGMAX_OFFSETS):
            ok = ((qi + k >= 0) & (qi + k < J))[None, :] & qvalid
            ok &= allowed[rows, qi[None, :], np.clip(qi + k, 0, J - 1)[None, :]]
            self.offset_hits[..., n] += ((offset == k) & ok[:, None, None, :]).sum((0, 3))
            self.offset_n[n] += ok.sum()

    def _add_source_sinks(self, p: np.ndarray, src_len: np.ndarray, punct: np.ndarray | None, qw: np.ndarray) -> None:
        """enc_self and cross: weight on the source <eos> and on the final punctuation mark (when there is one)."""
        b = p.shape[0]
        rows = np.arange(b)
        if self.src_eos:
            self._sum("eos_share", p[rows, ..., src_len - 1], qw)  # (b, L, h, i)
        if punct is None:
            punct = np.full(b, -1)
        self._sum("punct_share", p[rows, ..., np.maximum(punct, 0)] * (punct >= 0)[:, None, None, None], qw)

    def _add_rare(self, am: np.ndarray, qvalid: np.ndarray, n_keys: np.ndarray, rare: np.ndarray,
                  rare_ok: np.ndarray, J: int) -> None:
        """enc_self and cross: queries whose strongest key is the rarest word, and the share chance would give."""
        b, L, h, _ = am.shape
        ok = qvalid & rare_ok[:, None]  # (b, i)
        r = np.zeros((b, J), dtype=bool)
        r[:, : rare.shape[1]] = rare[:, :J]
        hit = np.take_along_axis(np.broadcast_to(r[:, None, None, :], (b, L, h, J)), am, -1)  # (b, L, h, i)
        self.rare_hits += (hit & ok[:, None, None, :]).sum((0, 3))
        self.rare_n += ok.sum()
        self.rare_chance += ((r.sum(-1)[:, None] / np.maximum(n_keys, 1)) * ok).sum()

    def _add_alignment(self, p: np.ndarray, am: np.ndarray, qvalid: np.ndarray, tgt_len: np.ndarray) -> None:
        """cross: the argmax paths kept for agreement, their Spearman rho with the position, the forward moves."""
        h = p.shape[2]
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

    # How the sums of disjoint shares of one corpus combine (combine(); model/analysis/sharded.py): these add up,
    # the argmax paths are concatenated, and sent_conf (-1 = not seen) takes each sentence from the share that saw it.
    _summed = ("n_q", "pattern_w", "pattern_n", "offset_hits", "offset_n", "rare_hits", "rare_n", "rare_chance",
               "rho_head", "rho_layer", "rho_n", "fwd_hits", "fwd_n")
    _listed = ("head_argmax", "layer_argmax", "loo_argmax")

    @classmethod
    def combine(cls, parts: Sequence[HeadStats]) -> HeadStats:
        """One HeadStats of the sentences of all `parts`, each fed a disjoint share of the same corpus.

        Its result() is the one of a single HeadStats fed every batch: the means are taken after the sums and counts
        are added, and agreement is a mean over queries, whatever order their argmax paths come in.
        """
        first = parts[0]
        out = cls(first.kind, first.L, first.h, len(first.sent_conf), first.src_eos)
        for part in parts:
            for name in cls._summed:
                setattr(out, name, getattr(out, name) + getattr(part, name))
            for name, s in part.sums.items():
                out.sums[name] = out.sums[name] + s
            for name in cls._listed:
                getattr(out, name).extend(getattr(part, name))
        out.sent_conf = np.max([part.sent_conf for part in parts], axis=0)  # (sentences, L, h)
        return out

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
    if kind == "cross" and "aer" in m and math.isfinite(m["aer"]):  # gold links: the head aligns words, measured
        if m["aer"] <= th["aligner_aer"]:
            roles["aligner"] = "aligner"
    elif kind == "cross" and m.get("agreement", 0.0) >= th["aligner_agreement"] \
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

