"""The Positional encoding page for a model with rotary position embeddings (T5Gemma): no vector is added; each
head's queries and keys are turned, pair of dimensions by pair, by their position. Drawn from the queries and keys
the model recorded for this sentence before and after the rotation (hook_q / hook_rot_q, hook_k / hook_rot_k)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from model.records import kv_head
from views.parts.widgets import chart, choices, fig_config, sections
from views.plumbing.figcache import cached
from views.plumbing.state import Context
from views.plumbing.urlstate import within
from viz.rotary import angles, distance_figure, frequency_figure, rotate, score_by_distance, turn_figure, turned

PARTS = ["how fast each pair turns", "one query and key", "the score depends on the distance only"]


def render(ctx: Context) -> None:
    cfg, tr, ss = ctx.cfg, ctx.result.trace, st.session_state
    base, d_head = float(getattr(cfg, "rope_base", 10000.0)), cfg.d_k
    if not ctx.present:
        st.subheader("Positional encoding: rotary (RoPE)")
        st.write(
            "This model adds no position vector to its embeddings. Inside every self-attention layer, each head's "
            f"query and key vectors ({d_head} dimensions) are cut into {d_head // 2} pairs, dimension i with "
            f"i + {d_head // 2}, and each pair is turned by the angle p·θᵢ at position p, "
            f"θᵢ = {base:g}^(−2i/{d_head}): "
            "the first pairs turn fast, the last ones hardly at all. Turning the query by its position m and the key "
            "by n multiplies their dot product's pairs by e^{i(m − n)θᵢ}, so the score sees the positions only "
            "through the distance m − n. Cross-attention is not rotated. Shown: the queries and keys this model "
            "recorded for your sentence, before and after the turn.")
    with choices(ctx):
        show = sections(ctx, PARTS) if ctx.present else None
        c1, c2, c3 = st.columns(3)
        with c1:
            side = st.radio("Self-attention of", ["src", "tgt"], horizontal=True, key="emb_side",
                            persist_state="session", format_func={"src": "encoder", "tgt": "decoder"}.get)
        kind = "enc_self" if side == "src" else "dec_self"
        n_layers = cfg.kind_layers[kind]
        ss["layer"], ss["head"] = within(ss["layer"], 1, n_layers), within(ss["head"], 1, cfg.n_heads)
        layer = c2.selectbox("Layer", list(range(1, n_layers + 1)), key="layer", persist_state="session") - 1
        head = c3.selectbox("Head", list(range(1, cfg.n_heads + 1)), key="head", persist_state="session") - 1
    show = show or sections(ctx, PARTS)
    a = tr.attn[kind][layer]
    tokens = tr.axes(kind)[0]
    n, g = len(tokens), kv_head(cfg, head)
    if "rot_q" not in a:
        st.info("This trace holds no rotated queries: translate the sentence again to record them.")
        return
    q, rot_q, k, rot_k = a["q"][head], a["rot_q"][head], a["k"][g], a["rot_k"][g]  # (n, d_head) each
    if show(PARTS[0]):
        chart(st, cached(frequency_figure, max(n, 32), d_head, base), width="stretch",
              config=fig_config(ctx, "positional_rotary_frequencies"))
        st.caption(f"Pair 0 turns {angles(np.array([1]), d_head, base)[0, 0]:.2f} radians per position; pair "
                   f"{d_head // 2 - 1} turns {angles(np.array([1]), d_head, base)[0, -1]:.1e}: fast pairs tell "
                   "neighbours apart, slow ones keep a long distance readable. The formula; no table is stored.")
    ss["pe_ref"], ss["pe_key"] = within(ss["pe_ref"], 0, n - 1), within(ss["pe_key"], 0, n - 1)
    m, j = ss["pe_ref"], ss["pe_key"]
    picks = show(PARTS[1]) or show(PARTS[2])
    if picks:
        with choices(ctx):  # presenter mode: in the header's "Choose", the figure keeps the screen
            c1, c2 = st.columns(2)
            name = lambda i: f"{i}: {tokens[i]}"  # noqa: E731
            m = c1.selectbox("Query position m", list(range(n)), key="pe_ref", persist_state="session",
                             format_func=name)
            j = c2.selectbox("Key position n", list(range(n)), key="pe_key", persist_state="session",
                             format_func=name)
        if not ctx.present:
            _check(q, rot_q, k, rot_k, base, ctx)
    if show(PARTS[1]):
        turns = {f"query at {m} (recorded)": turned(q[m], rot_q[m]), f"key at {m} (recorded)": turned(k[m], rot_k[m])}
        chart(st, cached(turn_figure, turns, angles(np.array([m]), d_head, base)[0],
                         f"How far each pair of head {head + 1}'s query and key at position {m} was turned"),
              width="stretch", config=fig_config(ctx, f"positional_rotary_turn_L{layer + 1}H{head + 1}_p{m}"))
        st.caption("Each pair keeps its length and turns by the formula's angle (wrapped to ±π): the markers are "
                   "what the model recorded before and after, the line is p·θᵢ.")
    if show(PARTS[2]):
        _distance(q[m], k[j], m, j, base, n, ctx, f"L{layer + 1}H{head + 1}", float(rot_q[m] @ rot_k[j]))
    if picks and ctx.present:
        _check(q, rot_q, k, rot_k, base, ctx)


def _check(q: np.ndarray, rot_q: np.ndarray, k: np.ndarray, rot_k: np.ndarray, base: float, ctx: Context) -> None:
    """The formula's rotation of the recorded queries and keys against the rotated ones the model recorded."""
    pos = np.arange(len(q))
    diff = max(float(np.abs(rotate(q, pos, base) - rot_q).max()), float(np.abs(rotate(k, pos, base) - rot_k).max()))
    scale = max(float(np.abs(rot_q).max()), float(np.abs(rot_k).max()), 1e-12)
    st.caption(f":material/check_circle: the formula, applied to the recorded queries and keys of all {len(q)} "
               f"positions, gives the rotated ones the model recorded to {diff:.1e} (largest value {scale:.1f}).")


def _distance(q: np.ndarray, k: np.ndarray, m: int, j: int, base: float, n: int, ctx: Context, where: str,
              recorded: float) -> None:
    distances = np.arange(-(n - 1), n)
    scores = score_by_distance(q, k, base, distances)
    shifts = np.arange(0, max(n, 8))
    # The same query and key rotated to m + s and n + s: the distance kept, every absolute position moved.
    both = np.stack([rotate(q[None], np.array([m + s]), base)[0] @ rotate(k[None], np.array([j + s]), base)[0]
                     for s in shifts])
    chart(st, cached(distance_figure, distances, scores, shifts, both, m - j,
                     f"Query at {m}, key at {j}: their score q·k against the distance, and with both moved"),
          width="stretch", config=fig_config(ctx, f"positional_rotary_distance_{where}_{m}-{j}"))
    spread = float(np.ptp(both))
    at = scores[m - j + n - 1]
    st.caption(f"At their distance m − n = {m - j} the formula gives {at:.3f}; the rotated query and key the model "
               f"recorded give {recorded:.3f}. Moving both by the same amount changes the score by at most "
               f"{spread:.1e} (float64 rounding): the rotation leaves the score a function of the distance alone. "
               "These are the scores before the model scales them (and, where it does, soft-caps them).")
