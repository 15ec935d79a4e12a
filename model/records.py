"""The plain data a page gets from the model: records of a translation and its trace, NumPy and strings only.

No torch here (a test imports it in an interpreter that has none loaded), so the app's pages and viz/ may use
these types freely; `model/service.py` is the one door that makes them. Shape letters: see model/__init__.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from model.nn.config import ModelConfig  # noqa: F401  (a page reads the config facts it shows from this record)
from model.text.vocab import BOS, EOS

# The app's example sentences, all from Multi30k's val: views/plumbing/state.py shows these as EXAMPLES, and the
# trainer's film
# (model/training/film.py) uses them as its first probes: one list.
APP_EXAMPLES = [
    "Ein brauner Hund rennt dem schwarzen Hund hinterher.",
    "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
    "Ein Junge mit Kopfhörern sitzt auf den Schultern einer Frau.",
    "Zwei Hunde spielen im hohen Gras mit einem orangen Spielzeug.",
    "Ein kleines Kind steht allein auf einem zerklüfteten Felsen.",
    "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen",
]
# A SentenceTrace's fields by the hook point each holds (model/nn/trace.py reads them from a cache).
TRACE_ATTENTION = {"hook_q": "q", "hook_k": "k", "hook_v": "v", "hook_scaled_scores": "scores",
                   "hook_pattern": "probs", "hook_z": "out",
                   # only where the model makes them (T5Gemma): rotated queries and keys, soft-capped scores
                   "hook_rot_q": "rot_q", "hook_rot_k": "rot_k", "hook_softcapped_scores": "capped"}
PER_HEAD_ROWS = ("q", "k", "v", "out", "rot_q", "rot_k")  # held per head, (h, pos, d_head); k, v, rot_k: h_kv heads
TRACE_EMBED = {"hook_token_embed": "token", "hook_embed": "scaled", "hook_pos_embed": "positional"}
KINDS = ("enc_self", "dec_self", "cross")  # the attention kinds: encoder self, decoder (masked) self, cross
# Nats: a smaller clean − corrupt difference of log p leaves a patching share undefined (NaN). The share divides by
# that gap, and float32 carries log p to about 1e-5 nats: the same grid computed two correct ways (rows batched or
# one per pass, one thread or two) differs by up to 8e-6 nats on the shipped model's example pairs, which moves a
# share s by up to 8e-6 (1 + |s|) / gap: 0.16 at a gap of 1e-4, under 0.002 at 1e-2 (shares are shown to two
# decimals). And a gap of 0.01 nats is a change of p by 1 %: below it the corruption left the token as it was.
# Absolute, not relative to the pair's largest gap: the noise does not grow with the gap, and a token that moved
# 0.05 nats beside one that moved 8 is measured as well as the other.
MIN_GAP = 1e-2
# The app's pages, in the sidebar's order (tests and benchmarks walk this list).
VIEWS = ("Overview", "Embeddings", "Positional encoding", "Attention", "Inside one head", "Masks", "Decoding",
         "Alignment", "What if", "Heads", "Training")



class CheckpointError(Exception):
    """A checkpoint folder that cannot be loaded; the message says which file and what to do (raised by
    model/io/checkpoint.py; here so that pages catch it without importing torch)."""

@dataclass
class Step:
    """One greedy step: what the decoder saw, what it proposed and what it picked."""

    prefix: list[int]  # decoder input ids so far, starting with <bos>
    top_ids: list[int]  # the k most probable next tokens, best first
    top_probs: list[float]  # their probabilities after <bos>/<pad> were removed and the rest renormalised
    chosen: int
    chosen_prob: float  # from the same distribution as top_probs
    forced: bool  # True when the token came from a given prefix, not from the argmax
    dec_self: np.ndarray | None = None  # (L, h, t) the last query's self-attention over the prefix
    cross: np.ndarray | None = None  # (L, h, s) the last query's attention over the source
    prefix_tokens: list[str] = field(default_factory=list)  # the same as strings (the Translator fills them)
    top_tokens: list[str] = field(default_factory=list)
    chosen_token: str = ""

    def candidates(self) -> tuple[list[str], list[float], int]:
        """(tokens, probabilities, index of the chosen one) of the top-k; a forced token outside it is added."""
        labels, probs = list(self.top_tokens), list(self.top_probs)
        if self.chosen in self.top_ids:
            return labels, probs, self.top_ids.index(self.chosen)
        return labels + [self.chosen_token], probs + [self.chosen_prob], len(labels)


@dataclass
class SentenceTrace:
    """One sentence's trace as NumPy arrays, with the token strings for every axis.

    Picklable and free of torch, so the app can cache it and viz/ can draw it.
    """

    src_tokens: list[str]  # source axis (keys of enc_self and cross): words + <eos>
    tgt_tokens: list[str]  # decoder axis (queries of dec_self and cross): <bos> + output
    # token, scaled, positional (none without a position table: T5), sum (the embedding norm's input, only where
    # the model has that norm: mBART), total (what enters layer 1): (s, d)
    src_embed: dict[str, np.ndarray]
    tgt_embed: dict[str, np.ndarray]  # (t, d)
    # kind -> per layer -> q, k, v, scores, mask, probs, out (and rot_q, rot_k, capped where the model has them:
    # T5Gemma); k, v and rot_k have the key/value heads (kv_head tells which a query head reads)
    attn: dict[str, list[dict[str, np.ndarray]]]
    log_probs: np.ndarray  # (t, V) the generator's output at every decoder position
    # Relative positions (T5): the bias the encoder / decoder added to every self-attention layer's scores; None
    # for a model with a position table (and in a trace recorded before these fields existed).
    src_pos_bias: np.ndarray | None = None  # (h, s, s)
    tgt_pos_bias: np.ndarray | None = None  # (h, t, t)

    def probs(self, kind: str) -> np.ndarray:
        """(L, h, i, j) attention probabilities of every layer and head."""
        return np.stack([layer["probs"] for layer in self.attn[kind]])

    def pos_bias(self, kind: str) -> np.ndarray | None:
        """(h, i, j) the position bias added to an attention kind's scores, or None (cross-attention has none)."""
        return {"enc_self": self.src_pos_bias, "dec_self": self.tgt_pos_bias}.get(kind)

    def axes(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of an attention kind."""
        return {
            "enc_self": (self.src_tokens, self.src_tokens),
            "dec_self": (self.tgt_tokens, self.tgt_tokens),
            "cross": (self.tgt_tokens, self.src_tokens),
        }[kind]

    def point(self, name: str) -> np.ndarray:
        """What hook point `name` held (docs/hooks.md), in the cache's own axis order without the batch axis: the
        trace and an ActivationCache are one vocabulary (`cache[name][0]` is `trace.point(name)`)."""
        side, _, rest = name.partition(".") if name.startswith(("encoder.", "decoder.")) else ("", "", name)
        embed = self.tgt_embed if side == "decoder" else self.src_embed
        if side != "encoder" and rest in TRACE_EMBED and TRACE_EMBED[rest] in embed:
            return embed[TRACE_EMBED[rest]]
        if (side and rest == "0.hook_resid_pre") or (side != "encoder" and rest == "embed_ln.hook_normalized"):
            return embed["total"]  # what enters layer 1: after the embedding norm where the model has one
        if side != "encoder" and rest == "hook_pos_bias" and self.pos_bias(
                "dec_self" if side else "enc_self") is not None:
            return self.pos_bias("dec_self" if side else "enc_self")
        parts = rest.split(".")
        kind = {("encoder", "attn"): "enc_self", ("decoder", "attn"): "dec_self",
                ("decoder", "cross_attn"): "cross"}.get((side, parts[1] if len(parts) == 3 else ""))
        if kind is not None and parts[0].isdigit() and int(parts[0]) < len(self.attn[kind]):
            layer, point = self.attn[kind][int(parts[0])], parts[2]
            if point == "hook_attn_scores":  # the trace keeps the mask, not the masked scores
                return np.where(layer["mask"][None], layer["scores"], -np.inf).astype(layer["scores"].dtype)
            field = TRACE_ATTENTION.get(point)
            if field in PER_HEAD_ROWS and field in layer:
                return layer[field].transpose(1, 0, 2)  # (h, pos, d_head) -> the cache's (pos, h, d_head)
            if field in layer:
                return layer[field]
        raise KeyError(f"{name!r} is no point this trace holds (its attention, embedding stages and first "
                       "residual stream): run_with_cache gives every point")


@dataclass
class Source:
    """A cleaned, tokenized and possibly truncated source sentence."""

    tokens: list[str]  # the words (or SentencePiece pieces, "▁" kept) the model reads, without <eos>
    ids: list[int]  # with <eos> appended (where the model reads one)
    unknown: list[bool]  # per token: not in the source vocabulary
    dropped: list[str] = field(default_factory=list)  # tokens cut off by the length limit
    chars_cut: int = 0  # characters beyond MAX_CHARS ignored before tokenizing
    eos_token: str = EOS  # the vocabulary's end token (Marian: </s>); "" where the source has none (T5Gemma)

    @property
    def truncated(self) -> bool:
        return bool(self.dropped) or self.chars_cut > 0

    @property
    def axis_tokens(self) -> list[str]:
        """Labels of the source axis: the tokens and the final <eos> (where the model reads one)."""
        return self.tokens + [self.eos_token] * bool(self.eos_token)

    @property
    def copyable(self) -> list[bool]:
        """Per token: may an output <unk> become this word? Only words the model could not read:
        unknown to the source vocabulary, or numbers (a token with a digit)."""
        return [unk or any(c.isdigit() for c in tok) for tok, unk in zip(self.tokens, self.unknown)]


@dataclass
class Translation:
    """A translation and, for greedy decoding with a trace, everything it computed."""

    text: str
    tokens: list[str]  # output tokens after <unk> replacement
    raw_tokens: list[str]  # as the model produced them
    source: Source
    finished: bool  # stopped at <eos>, not at the length limit
    seconds: float
    steps: list[Step] | None = None
    trace: SentenceTrace | None = None  # greedy decoding's recorded trace (Translator.trace), else None
    decoding: str = "greedy"  # "greedy", "beam 5", "greedy after a forced prefix of 2 tokens"
    start_token: str = BOS  # the decoder's first input (Marian: <pad>)

    @property
    def decoder_input(self) -> list[str]:
        """Decoder query/key labels: the start token (<bos>) followed by the raw output tokens."""
        return [self.start_token] + self.raw_tokens


@dataclass
class Attribution:
    """One sentence's attributions as NumPy arrays, with the token strings of both axes (no tensors)."""

    src_tokens: list[str]  # columns: the source words and the final <eos> the model reads (s)
    tgt_tokens: list[str]  # the chosen tokens y_1 .. y_t the model was teacher-forced on, one per decoder position
    matrices: dict[str, np.ndarray]  # method -> (r, s) float32, non-negative, rows sum to 1 (see DEFINITIONS)
    definitions: dict[str, str]  # method -> one sentence
    signed: dict[str, np.ndarray] = field(default_factory=dict)  # "input_x_grad" -> (t, s) float32, nats
    chosen_probs: np.ndarray | None = None  # (r,) float32 p(y_i) under the raw generator
    rows: list[int] = field(default_factory=list)  # (r,) row k of every matrix explains tgt_tokens[rows[k]]


@dataclass
class Knockout:
    """Head knockout on one sentence (NumPy only)."""

    src_tokens: list[str]  # the source axis: tokens and the end token
    tgt_tokens: list[str]  # y_1 .. y_T, the tokens scored
    positions: list[int]  # (P,) 0-based positions in tgt_tokens reported
    log_probs: np.ndarray  # (P,) log p(y_i) with every head on
    delta: dict[str, np.ndarray]  # kind -> (L, h, P) log p(y_i) with that head alone off, minus log_probs


@dataclass
class Patching:
    """Activation patching clean -> corrupted on one sentence pair (NumPy only); see the module docstring."""

    src_tokens: list[str]  # the clean source axis (s)
    corrupt_tokens: list[str]  # the corrupted source axis (s)
    tgt_tokens: list[str]  # y_1 .. y_T of the clean translation, scored in both runs
    positions: list[int]  # (P,) 0-based positions in tgt_tokens reported
    clean_log_probs: np.ndarray  # (P,)
    corrupt_log_probs: np.ndarray  # (P,)
    log_probs: dict[str, np.ndarray]  # component -> patched log p: heads (L, h, P), enc_resid (L, s, P), ...
    effect: dict[str, np.ndarray]  # component -> normalised effect, same shapes; NaN where undefined
    min_gap: float = MIN_GAP


@dataclass
class Alignment:
    """Which positions of two token lists match (a minimal pair); see model/analysis/pairs.py."""

    pairs: list[tuple[int, int]]  # (n,) (position in a, position in b), increasing in both
    changed_a: list[bool]  # per token of a: not an equal token of b (replaced, or deleted)
    changed_b: list[bool]  # per token of b: not an equal token of a (replaced, or inserted)

    @property
    def same(self) -> bool:
        """The two lists are equal."""
        return not any(self.changed_a) and not any(self.changed_b)


@dataclass
class LogitLens:
    """The logit lens at one step (NumPy only); layer l (0-based) is row l."""

    step: int  # 0-based position in tgt_tokens
    chosen_token: str  # tgt_tokens[step]
    top_tokens: list[list[str]]  # (L, k)
    top_ids: np.ndarray  # (L, k)
    top_probs: np.ndarray  # (L, k) descending
    chosen_probs: np.ndarray  # (L,) p(chosen token) read at each layer
    chosen_ranks: np.ndarray  # (L,) 1-based rank of the chosen token among all V


@dataclass
class Contrast:
    """Why `target` and not `foil` at one step (NumPy only); see the module docstring."""

    src_tokens: list[str]  # (s,) the source axis: tokens and the end token
    step: int  # 0-based position in tgt_tokens
    target: str  # A
    foil: str  # B
    log_prob_diff: float  # log p(A) − log p(B) with every head on
    input_x_grad: np.ndarray  # (s,) signed, nats
    relevance: np.ndarray  # (s,) non-negative, sums to 1 (or all 0)
    heads: dict[str, np.ndarray]  # kind -> (L, h) change of log p(A) − log p(B) with that head alone off
    top_heads: list[tuple[str, int, int, float]]  # (kind, 0-based layer, 0-based head, change), largest |change| first


def kv_share(cfg) -> int:
    """Query heads per key/value head: 1, or n_heads / n_kv_heads under grouped-query attention (T5Gemma)."""
    n_kv = getattr(cfg, "n_kv_heads", 0) or cfg.n_heads
    return cfg.n_heads // n_kv


def kv_head(cfg, head: int) -> int:
    """The key/value head (0-based) query head `head` reads: neighbouring query heads share one, in Hugging Face's
    repeat_kv order (kv head g serves query heads g·share .. g·share + share − 1)."""
    return head // kv_share(cfg)


def score_scale(cfg) -> float:
    """What the scores are divided by when it is not √d_k: √query_pre_attn_scalar (Gemma), else 0."""
    scalar = getattr(cfg, "query_pre_attn_scalar", 0) or 0
    return float(scalar) ** 0.5 if scalar else 0.0


def attention_cap(cfg) -> float:
    """The attention scores' soft cap c (c·tanh(s / c); T5Gemma), 0 for none."""
    return float(getattr(cfg, "attn_softcap", 0.0) or 0.0)


def head_qkv(cfg, record: dict, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q (i, d_k), k (j, d_k), v (j, d_k)) of one head (0-based) of a recorded attention layer, as its scores read
    them: the rotated queries and keys where the model rotates them, the key/value head the query head shares."""
    g = kv_head(cfg, head)
    q = record["rot_q"][head] if "rot_q" in record else record["q"][head]
    k = record["rot_k"][g] if "rot_k" in record else record["k"][g]
    return q, k, record["v"][g]
