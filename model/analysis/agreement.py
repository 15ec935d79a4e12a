"""Do two head measures rank the heads alike? Spearman rank correlation over a head report's grids.

The Heads page colours every head by one measure; the measured effect of switching a head off
(ablation_loss_increase) is the yardstick the other measures are compared with. Everything here is NumPy on the
report's [layer][head] grids: no model is run. Layers and heads are 0-based, as in the report.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from model.records import KINDS

GROUPS = ("all", *KINDS)  # "all": every head of every kind together
EFFECT = "ablation_loss_increase"  # the measured effect of switching one head off
MIN_HEADS = 3  # with fewer pairs a rank correlation says nothing
SCALES = ("raw", "layer")  # the values as measured, or each layer's divided by their L2 norm

# Words for a correlation, strongest first: (lowest rho that earns them, the words). A rho below the last is a
# disagreement: the measures rank the heads in roughly opposite orders. Judged on rho at two decimals.
STRENGTH = ((0.7, "agree closely"), (0.4, "agree moderately"), (0.1, "agree only weakly"),
            (-0.1, "are unrelated"), (-0.4, "disagree weakly"))
DISAGREE = "disagree"


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of a 1-d array, tied values sharing the mean of their ranks."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0  # mean of the ranks start+1 .. end
            start = end
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> tuple[float | None, int, str]:
    """(rho, pairs used, why rho is undefined or '') over the pairs where both values are finite.

    rho is the Pearson correlation of the average ranks; it is None with fewer than MIN_HEADS pairs or when
    either measure is constant over them.
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = len(a)
    if n < MIN_HEADS:
        return None, n, f"fewer than {MIN_HEADS} heads"
    if np.all(a == a[0]) or np.all(b == b[0]):
        return None, n, "a measure is constant"
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / np.sqrt((ra ** 2).sum() * (rb ** 2).sum())), n, ""


def per_layer_normalised(values: np.ndarray) -> np.ndarray:
    """(L, h) values with each layer's row divided by its L2 norm over the finite values (bertology's
    per-layer step); a row whose norm is 0 is left as it is, NaN stays NaN."""
    v = np.asarray(values, dtype=np.float64)
    norm = np.sqrt(np.nansum(v ** 2, axis=-1, keepdims=True))
    return np.divide(v, norm, out=v.copy(), where=norm > 0)


def grid_values(report: dict, kind: str, measure: str, scale: str = "raw") -> np.ndarray | None:
    """(L, h) values of a measure as the Heads grid shows them (NaN where a head has none), or None when the
    measure is not defined for the kind.

    scale "raw": as measured (importance: the raw gradient, comparable across layers); "layer": each layer's
    values divided by their L2 norm (importance: the report's normalised importance, which is that followed by
    one min-max over all heads).
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    measures = report["kinds"][kind]["measures"]
    if measure == "importance":
        name = "importance_raw" if scale == "raw" else "importance"
        values = measures.get(name)
        return None if values is None else _array(values)
    values = measures.get(measure)
    if values is None:
        return None
    v = _array(values)
    return per_layer_normalised(v) if scale == "layer" else v


def _array(grid) -> np.ndarray:
    return np.array([[np.nan if x is None else x for x in row] for row in grid], dtype=np.float64)


def has_effect(report: dict) -> bool:
    """Does the report hold the measured loss increase of every kind (it was computed with the ablation)?"""
    return all(EFFECT in report["kinds"][k]["measures"] for k in KINDS)


def rank_agreement(report: dict, values: Mapping[str, np.ndarray | None],
                   against: str = EFFECT) -> dict[str, tuple[float | None, int, str]]:
    """Spearman rho between `values` ({kind: (L, h) grid or None}) and the report's `against` measure, overall
    ("all": every head with both values) and per kind: {group: (rho or None, heads, why undefined)}."""
    pairs = {}
    for k in KINDS:
        ref = report["kinds"][k]["measures"].get(against)
        mine = values.get(k)
        if ref is not None and mine is not None:
            pairs[k] = (np.asarray(mine, dtype=np.float64).ravel(), _array(ref).ravel())
    out = {"all": spearman(np.concatenate([a for a, _ in pairs.values()] or [np.zeros(0)]),
                           np.concatenate([b for _, b in pairs.values()] or [np.zeros(0)]))}
    for k in KINDS:
        out[k] = spearman(*pairs[k]) if k in pairs else (None, 0, "a measure is not defined there")
    return out


def strength(rho: float) -> str:
    """What a rank correlation says, in words ('agree closely' .. 'disagree'), judged on rho as the page
    writes it (two decimals), so that the words and the number shown never fall on two sides of a bound."""
    rho = round(rho, 2)
    for lowest, words in STRENGTH:
        if rho >= lowest:
            return words
    return DISAGREE


def agreement_sentence(name_a: str, name_b: str, result: Mapping[str, tuple[float | None, int, str]],
                       group_names: Mapping[str, str], kinds: Sequence[str] = KINDS) -> str:
    """One sentence, computed from the numbers: how well measure A and measure B rank the heads, overall and
    within each kind, e.g. 'Importance and the loss increase agree only weakly across 36 heads (ρ = 0.33);
    within cross-attention they disagree (ρ = −0.57, 12 heads); …'."""
    def rho_text(rho: float) -> str:
        return f"ρ = {round(rho, 2) or 0.0:.2f}".replace("-", "−")  # or 0.0: no "−0.00"

    rho, n, why = result["all"]
    if rho is None:
        head = f"How {name_a} and {name_b} rank the heads is not comparable overall: ρ undefined ({why})"
    else:
        head = f"{name_a[:1].upper() + name_a[1:]} and {name_b} {strength(rho)} across {n} heads ({rho_text(rho)})"
    parts = []
    for k in kinds:
        rho, n, why = result[k]
        if rho is None:
            parts.append(f"within {group_names[k]} ρ is undefined ({why})")
        else:
            parts.append(f"within {group_names[k]} they {strength(rho)} ({rho_text(rho)}, {n} heads)")
    return head + ("; " + "; ".join(parts) if parts else "") + "."
