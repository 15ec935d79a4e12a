"""Minimal pairs and the what-if lab's summaries: which tokens of two sentences match, and the numbers the pages
state about knockout, patching and the logit lens. NumPy and difflib only (no torch), so the door can hand these
functions to pages as they are.

Shape letters: see model/__init__.py (L layers, h heads, s source and t target positions); P target positions
reported, n the rows or columns two token lists have in common (aligned).

How two token lists are matched. difflib's SequenceMatcher (no junk heuristic) finds the longest runs of equal
tokens in the same order. Equal runs are aligned one to one; a replaced run of the same length on both sides
("brauner" for "schwarzer", "Hund läuft" for "Hunde laufen") is aligned position by position and marked as
changed; an inserted or deleted token, or a replaced run of another length, has no partner. A difference of two
matrices is taken over the aligned rows and columns only.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

from model.records import KINDS, MIN_GAP, Alignment, Knockout, Patching


def align(a: Sequence[str], b: Sequence[str]) -> Alignment:
    """Which positions of token lists `a` and `b` match (see the module docstring)."""
    a, b = list(a), list(b)
    pairs: list[tuple[int, int]] = []
    changed_a, changed_b = [True] * len(a), [True] * len(b)
    for op, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
            pairs += list(zip(range(i1, i2), range(j1, j2)))
        if op == "equal":
            changed_a[i1:i2], changed_b[j1:j2] = [False] * (i2 - i1), [False] * (j2 - j1)
    return Alignment(pairs=pairs, changed_a=changed_a, changed_b=changed_b)


def shared_tokens(a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
    """(tokens `a` and `b` have in common, the longer list's length): a minimal pair shares most of its tokens.

    In common: each token counted as often as it occurs in both lists, in any order (a multiset intersection), so
    that a pair with its words reordered ("Der Mann hält das Kind." / "Das Kind hält den Mann.") shares them; the
    share is the first number over the second ((0, 0) for two empty lists)."""
    return sum((Counter(a) & Counter(b)).values()), max(len(a), len(b))


def pair_labels(a: Sequence[str], b: Sequence[str], pairs: Sequence[tuple[int, int]]) -> list[str]:
    """One label per aligned pair: the token where both agree, 'a→b' where it was replaced."""
    return [a[i] if a[i] == b[j] else f"{a[i]}→{b[j]}" for i, j in pairs]


def aligned_difference(za: np.ndarray, zb: np.ndarray, rows: Alignment, cols: Alignment,
                       mask_a: np.ndarray | None = None, mask_b: np.ndarray | None = None):
    """(zb − za over the aligned cells (n_rows, n_cols), may-attend mask of those cells or None).

    za (i, j) and zb (i', j') are one head's attention in sentence A and B; rows and cols align their query and
    key tokens. A cell counts as masked when it is masked on either side (its difference says nothing).
    """
    ra, rb = (np.array([p[k] for p in rows.pairs], dtype=np.int64) for k in (0, 1))
    ca, cb = (np.array([p[k] for p in cols.pairs], dtype=np.int64) for k in (0, 1))
    za, zb = np.asarray(za, dtype=np.float64), np.asarray(zb, dtype=np.float64)
    diff = zb[np.ix_(rb, cb)] - za[np.ix_(ra, ca)]  # (n_rows, n_cols)
    if mask_a is None and mask_b is None:
        return diff, None
    ok = np.ones(diff.shape, dtype=bool)
    if mask_a is not None:
        ok &= np.broadcast_to(np.asarray(mask_a, dtype=bool), za.shape)[np.ix_(ra, ca)]
    if mask_b is not None:
        ok &= np.broadcast_to(np.asarray(mask_b, dtype=bool), zb.shape)[np.ix_(rb, cb)]
    return diff, ok


def same_length(a: Sequence[str], b: Sequence[str]) -> bool:
    """Can a patch run position by position? Position j of one source goes into position j of the other."""
    return len(a) == len(b)


def normalised_effect(patched: np.ndarray, clean, corrupt, min_gap: float = MIN_GAP) -> np.ndarray:
    """(patched − corrupt) / (clean − corrupt) over the last axis; NaN where |clean − corrupt| < min_gap (the
    gap float32 cannot carry: see MIN_GAP in model/records.py)."""
    gap = np.asarray(clean, dtype=np.float64) - np.asarray(corrupt, dtype=np.float64)
    ok = np.abs(gap) >= min_gap
    return np.where(ok, (np.asarray(patched, dtype=np.float64) - corrupt) / np.where(ok, gap, 1.0), np.nan)


def patch_effect(p: Patching, token: int | None = None) -> dict[str, np.ndarray]:
    """component -> normalised effect on one reported token (0-based index into p.positions) or, with None, on
    the whole translation: the sum of log p over the tokens, (Σ patched − Σ corrupt) / (Σ clean − Σ corrupt).
    Shapes: (L, h) for enc_self / dec_self / cross, (L, s) enc_resid, (L, t) dec_resid."""
    if token is not None:
        return {c: np.asarray(v)[..., token] for c, v in p.effect.items()}
    clean, corrupt, _ = patch_gap(p)
    return {c: normalised_effect(np.asarray(v).sum(-1), clean, corrupt, p.min_gap) for c, v in p.log_probs.items()}


def patch_gap(p: Patching, token: int | None = None) -> tuple[float, float, float]:
    """(log p in the clean run, in the corrupted run, their difference: the gap a share divides), in nats, of one
    reported token (0-based index into p.positions) or, with None, of the whole translation (sums over its
    tokens), as patch_effect measures it. A share is defined where |gap| ≥ p.min_gap."""
    pick = np.sum if token is None else (lambda v: np.asarray(v)[token])
    clean, corrupt = float(pick(p.clean_log_probs)), float(pick(p.corrupt_log_probs))
    return clean, corrupt, clean - corrupt


def knockout_effect(k: Knockout, token: int | None = None) -> dict[str, np.ndarray]:
    """kind -> (L, h) change of log p with that head alone off: of one reported token (0-based index into
    k.positions) or, with None, of the whole translation (the sum over its tokens), in nats."""
    return {kind: np.asarray(v).sum(-1) if token is None else np.asarray(v)[..., token]
            for kind, v in k.delta.items()}


def strongest(values: dict[str, np.ndarray], n: int = 3) -> list[tuple[str, int, int, float]]:
    """The n cells of kind -> (L, w) arrays with the largest |value| (NaN left out): (kind, 0-based layer,
    0-based head or position, value), largest first; ties keep the KINDS, layer, column order."""
    flat = [(kind, l, c, float(v[l, c])) for kind in [*KINDS, *sorted(set(values) - set(KINDS))] if kind in values
            for v in [np.asarray(values[kind])] for l in range(v.shape[0]) for c in range(v.shape[1])
            if np.isfinite(v[l, c])]
    flat.sort(key=lambda x: -abs(x[3]))
    return flat[:n]


def commit_layer(chosen_ranks: Sequence[int]) -> int | None:
    """The first layer (0-based) from which the chosen token is the top candidate in every later layer of the
    logit lens; None when the last layer does not rank it first (a forced token, or a tie lost)."""
    ranks = [int(r) for r in chosen_ranks]
    if not ranks or ranks[-1] != 1:
        return None
    first = len(ranks) - 1
    while first > 0 and ranks[first - 1] == 1:
        first -= 1
    return first
