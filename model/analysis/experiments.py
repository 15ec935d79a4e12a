"""Numbers the pages state about a sentence, computed from what the model recorded.

Every sentence of explanation in the app that states a fact about the model or the sentence is
built from one of these functions, so it holds for any model (the untrained twin included) and is
tested here, not inline in a page. NumPy in, NumPy and plain Python out; no Streamlit.

Shape letters: see model/__init__.py (L layers, h heads, i query positions, j key positions).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA_ENV = "ATLAS_DATA_DIR"


# ----------------------------------------------------------------------------- attention measures

def entropy(probs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """(..., i, j) attention rows -> (...) mean over query rows of −Σ p log p (nats).

    `mask` (i, j), True = may attend, only marks rows with no allowed key, which are left out.
    """
    p = np.clip(probs.astype(np.float64), 0.0, 1.0)
    h = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(-1)  # (..., i)
    if mask is not None:
        rows = mask.any(-1)  # (i,)
        h = h[..., rows]
    return h.mean(-1)


def weight_on_keys(probs: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> float:
    """Mean over the chosen query rows of the total weight they give to the chosen key columns.

    probs (i, j); rows, cols: bool or index arrays. 0.0 when there are no such rows or columns.
    """
    rows, cols = np.asarray(rows), np.asarray(cols)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    if cols.dtype == bool:
        cols = np.flatnonzero(cols)
    if rows.size == 0 or cols.size == 0:
        return 0.0
    return float(probs[np.ix_(rows, cols)].sum(-1).mean())


def future_weight(probs: np.ndarray) -> np.ndarray:
    """(L, h, t, t) decoder self-attention -> (t,) weight each position gives to later positions,
    averaged over layers and heads (0 wherever the causal mask was on)."""
    t = probs.shape[-1]
    upper = np.triu(np.ones((t, t), dtype=bool), k=1)  # j > i
    return (probs * upper).sum(-1).mean(axis=(0, 1))


def dropout_sample(probs: np.ndarray, p: float, seed: int = 0) -> tuple[np.ndarray | None, np.ndarray | None]:
    """What attention dropout does in training, on a copy: (weights after dropout, their row sums).

    Each weight is kept with probability 1 − p and then divided by 1 − p (inverted dropout), so a
    row's expected sum stays 1 but a single draw's does not. (None, None) when p is 0.
    """
    if p <= 0:
        return None, None
    keep = np.random.default_rng(seed).random(probs.shape) >= p
    dropped = (probs * keep / (1.0 - p)).astype(np.float32)
    return dropped, dropped.sum(-1)


def max_abs_diff(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> float:
    """max |a − b| over the cells where `where` is True (all cells when None)."""
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    if where is not None:
        d = d[np.broadcast_to(where, d.shape)]
    return float(d.max()) if d.size else 0.0


def position_similarity(pe: np.ndarray, ref: int) -> tuple[np.ndarray, int]:
    """(n, d) positional encodings -> (dot products of every position with position `ref`, the least similar
    position)."""
    sim = pe.astype(np.float64) @ pe[ref].astype(np.float64)  # (n,)
    return sim, int(np.argmin(sim))


def next_token_entropy(log_probs: np.ndarray) -> np.ndarray:
    """(t, V) log-probabilities of the generator -> (t,) entropy in nats of each next-token distribution.

    For comparison, a uniform choice among V tokens has entropy log V.
    """
    lp = log_probs.astype(np.float64)
    p = np.exp(lp)
    return -(np.where(p > 0, p * np.where(np.isfinite(lp), lp, 0.0), 0.0)).sum(-1)


def untrained_summary(log_probs: np.ndarray, chosen_probs: list[float], finished: bool) -> str:
    """What a model with random weights did on this sentence, in its own numbers.

    log_probs (t, V): the next-token distributions of the traced decoding; chosen_probs: each step's choice.
    """
    v = log_probs.shape[-1]
    h = next_token_entropy(log_probs)
    mean_p = float(np.mean(chosen_probs)) if len(chosen_probs) else 0.0
    return (f"This model has random weights (the untrained twin): nothing it learned shapes its choices. Its "
            f"next-token distributions here have a mean entropy of {h.mean():.2f} nats (a uniform choice among its "
            f"{v:,} tokens: {np.log(v):.2f}); the chosen token's mean probability is {mean_p:.4f}; decoding "
            + ("ended with <eos>." if finished else "never chose <eos>, so it ran to the length limit."))


# ----------------------------------------------------------------------------- the causal-mask experiment

@dataclass
class CausalExperiment:
    """Teacher-forced predictions with and without the causal mask, against a stated reference."""

    reference: str  # what the "must predict" column is measured against, in words
    rows: list[dict] = field(default_factory=list)
    future: float = 0.0  # mean weight on later positions with the mask off
    p_on: float = 0.0  # mean probability of the reference token, mask on
    p_off: float = 0.0
    right_on: int = 0  # positions whose top prediction is the reference token
    right_off: int = 0
    worse: int = 0  # positions where p(reference token) fell without the mask
    better: int = 0

    def summary(self) -> str:
        """One paragraph stating what these numbers show, for this model and this sentence."""
        n = len(self.rows)
        if n == 0:
            return "There is no decoder sequence to compare."
        change = ("higher" if self.p_off > self.p_on else "lower" if self.p_off < self.p_on else "the same")
        return (f"Measured against {self.reference}: with the mask off, on average {self.future:.0%} of the decoder "
                f"self-attention goes to later positions, which include the very token to predict. The mean "
                f"probability of the reference token is {self.p_off:.3f} without the mask against {self.p_on:.3f} "
                f"with it ({change}); it fell at {self.worse} of {n} positions and rose at {self.better}. "
                f"The top prediction is the reference token at {self.right_on} of {n} positions with the mask "
                f"and {self.right_off} of {n} without.")


def allowed_log_probs(log_probs: np.ndarray, banned: list[int]) -> np.ndarray:
    """(..., V) -> (..., V) float64: the `banned` ids at -inf and the rest renormalised, as greedy decoding does
    before it chooses (model/inference/decode.py), so a table's top token is one decoding could have written."""
    lp = log_probs.astype(np.float64).copy()
    lp[..., list(banned)] = -np.inf
    top = lp.max(-1, keepdims=True)
    return lp - (top + np.log(np.exp(lp - top).sum(-1, keepdims=True)))


def never_generated(translator) -> list[int]:
    """The target ids greedy decoding never writes: the start token and <pad> (model/inference/decode.py's `search`)."""
    from model.inference.decode import never_generated as banned

    return banned(translator.model, translator.tgt_vocab.bos_idx, translator.tgt_vocab.eos_idx)


def causal_experiment(log_probs_on: np.ndarray, log_probs_off: np.ndarray, dec_self_off: np.ndarray,
                      inputs: list[str], targets: list[str], target_ids: list[int], itos: list[str],
                      reference: str, banned: list[int] = ()) -> CausalExperiment:
    """Compare the two teacher-forced passes over `inputs` (<bos> + the reference's tokens before each target).

    log_probs_*: (t, V) the generator's output at each decoder position; dec_self_off: (L, h, t, t)
    the self-attention without the mask; targets/target_ids: what each position must predict
    (the reference shifted by one, ending in <eos> where the reference ended). `banned`: ids decoding never
    writes (never_generated): left out of the top tokens, and the probabilities renormalised without them.
    """
    fut = future_weight(dec_self_off)
    exp = CausalExperiment(reference=reference, future=float(fut.mean()) if fut.size else 0.0)
    lp_on, lp_off = allowed_log_probs(log_probs_on, list(banned)), allowed_log_probs(log_probs_off, list(banned))
    p_on_all, p_off_all = [], []
    for i, (tok, tgt, tid) in enumerate(zip(inputs, targets, target_ids)):
        on, off = np.exp(lp_on[i]), np.exp(lp_off[i])
        pred_on, pred_off = int(on.argmax()), int(off.argmax())
        p_on, p_off = float(on[tid]), float(off[tid])
        p_on_all.append(p_on)
        p_off_all.append(p_off)
        exp.right_on += pred_on == tid
        exp.right_off += pred_off == tid
        exp.worse += p_off < p_on
        exp.better += p_off > p_on
        exp.rows.append({"position": i, "input": tok, "reference next": tgt,
                         "top, mask on": itos[pred_on], "p(ref), on": p_on,
                         "top, mask off": itos[pred_off], "p(ref), off": p_off,
                         "weight on later": float(fut[i])})
    if p_on_all:
        exp.p_on, exp.p_off = float(np.mean(p_on_all)), float(np.mean(p_off_all))
    return exp


def run_causal_experiment(translator, text: str, reference_tokens: list[str], reference: str, ended: bool = True):
    """Teacher-force `translator` along reference_tokens with and without the causal mask.

    Position i reads <bos> + reference_tokens[:i] and must predict reference_tokens[i]; where the reference
    `ended` (at <eos>), one more position must predict <eos>. An output cut at the length limit did not end:
    nothing is known about what would follow its last token, so that token is a target and never an input.
    Returns (SentenceTrace with the mask, SentenceTrace without it, CausalExperiment).
    """
    tv = translator.tgt_vocab
    targets = list(reference_tokens) + ([tv.itos[tv.eos_idx]] if ended else [])
    ids = tv.encode(list(reference_tokens)) + ([tv.eos_idx] if ended else [])
    fed = targets[:-1]  # the decoder's input after <bos>
    on = translator.teacher_forced(text, fed, use_causal_mask=True)
    off = translator.teacher_forced(text, fed, use_causal_mask=False)
    exp = causal_experiment(on.log_probs, off.log_probs, off.probs("dec_self"), on.tgt_tokens, targets, ids,
                            tv.itos, reference, never_generated(translator))
    return on, off, exp


def causal_reference(translator, text: str, own: list[str], own_ended: bool) -> tuple[list[str], bool, str]:
    """What the causal-mask experiment teacher-forces: (tokens, whether they ended at <eos>, what they are).

    A toy task's right answer when every input token is a digit; Multi30k's reference translation when `text` is
    one of its validation sentences; else the model's own output `own` (`own_ended`: it stopped at <eos>, not at
    the length limit). A reference longer than the decoder's positions is cut, and then it did not end either.
    """
    from model.training.toy import TASKS, ToyTranslator  # toy.py imports translator.py, which imports this module

    limit = translator.cfg.max_len - 2  # <bos> + the tokens, and <eos> to predict after them
    if isinstance(translator, ToyTranslator):
        source = translator.prepare(text)
        if source.tokens and not any(source.unknown) and not source.truncated:
            answer = TASKS[translator.task](source.tokens)
            return answer[:limit], len(answer) <= limit, f"the right answer of the {translator.task} task"
    else:
        ref = reference_for(text)
        if ref is not None:
            tokens = translator.target_tokens(ref)
            return tokens[:limit], len(tokens) <= limit, "the Multi30k reference translation"
    cut = "" if own_ended else f"; it stopped at the length limit, so no {translator.tgt_vocab.token('eos')} follows it"
    return list(own), own_ended, f"the model's own output shown at the top (no reference is known for this input{cut})"


# ----------------------------------------------------------------------------- BLEU with a noise estimate

@dataclass
class BleuComparison:
    """Corpus BLEU of two systems on the same sentences, with a paired bootstrap interval of the difference."""

    base: float
    other: float
    low: float  # 95 % interval of other − base over resampled sentence sets
    high: float
    n_sentences: int
    n_samples: int

    @property
    def delta(self) -> float:
        return self.other - self.base

    @property
    def within_noise(self) -> bool:
        return self.low <= 0.0 <= self.high

    def sentence(self) -> str:
        verdict = ("within noise: the interval includes 0" if self.within_noise else
                   "outside noise: the interval excludes 0")
        return (f"{self.delta:+.1f} BLEU (95 % paired-bootstrap interval {self.low:+.1f} … {self.high:+.1f}, "
                f"{self.n_samples} resamples of {self.n_sentences} sentences): {verdict}.")


def _bleu_from_stats(s: np.ndarray) -> float:
    from sacrebleu.metrics import BLEU

    return BLEU.compute_bleu(s[2:6].tolist(), s[6:10].tolist(), int(s[0]), int(s[1]), smooth_method="exp").score


def paired_bootstrap(base_hyps: list[str], other_hyps: list[str], refs: list[str], n_samples: int = 1000,
                     seed: int = 0) -> BleuComparison:
    """sacreBLEU (13a) of both systems and a 95 % paired-bootstrap interval of the difference (Koehn 2004)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    a = np.asarray(bleu._extract_corpus_statistics(base_hyps, [refs]), dtype=np.int64)  # (n, 10) per sentence
    b = np.asarray(bleu._extract_corpus_statistics(other_hyps, [refs]), dtype=np.int64)
    n = len(refs)
    rng = np.random.default_rng(seed)
    deltas = np.empty(n_samples)
    for k in range(n_samples):
        idx = rng.integers(0, n, n)
        deltas[k] = _bleu_from_stats(b[idx].sum(0)) - _bleu_from_stats(a[idx].sum(0))
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    return BleuComparison(_bleu_from_stats(a.sum(0)), _bleu_from_stats(b.sum(0)), float(lo), float(hi), n, n_samples)


# ----------------------------------------------------------------------------- where the data is

def data_dir_candidates() -> list[Path]:
    """Where Multi30k is looked for, in order: $ATLAS_DATA_DIR, then ../shared/data/multi30k beside the
    repository, then data/multi30k inside it."""
    out = []
    if os.environ.get(DATA_ENV):
        out.append(Path(os.environ[DATA_ENV]).expanduser())
    out += [ROOT.parent / "shared" / "data" / "multi30k", ROOT / "data" / "multi30k"]
    return out


def find_data_dir(split: str = "val") -> tuple[Path | None, list[Path]]:
    """(the first candidate folder holding `split`.de[.gz], every folder looked in)."""
    looked = data_dir_candidates()
    for folder in looked:
        if any((folder / f"{split}.de{ext}").is_file() for ext in (".gz", "")):
            return folder, looked
    return None, looked


def reference_for(text: str, split: str = "val") -> str | None:
    """The Multi30k reference translation of `text` when it is a sentence of `split`, else None."""
    from model.training.data import DataError, read_split

    folder, _ = find_data_dir(split)
    if folder is None:
        return None
    try:
        src, ref = read_split(folder, split)
    except DataError:
        return None
    wanted = " ".join(text.split())
    for s, r in zip(src, ref):
        if " ".join(s.split()) == wanted:
            return r
    return None
