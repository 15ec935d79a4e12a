"""Inside one head: Q, K, V, the scores, scaling, the position bias (T5), mask, softmax, dropout and the weighted
sum of V: the steps this model takes, drawn from the numbers it recorded."""
from __future__ import annotations

import html

import numpy as np
import streamlit as st

from model.analysis.experiments import dropout_sample, max_abs_diff
from model.records import KINDS, attention_cap, head_qkv, kv_head, kv_share, score_scale
from views.parts.widgets import chart, choices, fig_config, kind_layer_head, panel_group, sections, shows_caption
from views.plumbing.figcache import cached
from views.plumbing.state import Context
from views.plumbing.urlstate import within
from viz.head import head_pipeline_rows
from viz.layout import PAGE_WIDTH_PX
from viz.token_axes import panels_that_fit

STEPS = {  # numbered on the page in the order they appear: the mask step exists only where a mask was used
    "Q": "Queries: the layer input times W_Q, this head's slice (one row per query token).",
    "K": "Keys: the input times W_K (for cross-attention: the encoder output).",
    "V": "Values: the input times W_V: what each key hands over if it is attended to.",
    "scores": "Raw scores QKᵀ: how well each query matches each key (the model's recorded scores × √d_k).",
    "scaled": "Scaled by 1/√d_k, so that the softmax does not saturate as d_k grows.",
    "masked": "Mask: forbidden cells are set to −∞ before the softmax, so they get exactly zero weight.",
    "softmax": "Softmax along each row: weights ≥ 0 that sum to 1.",
    "dropout": "In training only, dropout zeroes weights at random and rescales the rest by 1/(1−p): rows no "
               "longer sum to 1. (At inference, as everywhere else in this app, there is no dropout.)",
    "output": "Output: the weighted sum of the value vectors, one per query. The heads' outputs are concatenated "
              "and multiplied by W_O.",
}
ORDER = [["Q", "K", "V"], ["scores", "scaled", "bias", "summed", "capped", "masked"], ["softmax", "dropout"],
         ["output"]]
ROW_NAMES = ["Q, K, V", "scores", "weights", "output"]  # presenter mode shows one row of ORDER at a time
KEY_ROWS = ("scores", "weights")  # rows whose panels have the keys across
# the steps' names in presenter mode's "Choose"
SHORT = {"scores": "QKᵀ", "scaled": "scaled", "bias": "bias B", "summed": "+ B", "capped": "capped",
         "masked": "masked", "softmax": "softmax", "dropout": "dropout"}


def step_texts(scaled: bool = True, biased: bool = False, cfg=None, head: int = 0) -> dict[str, str]:
    """STEPS as this model takes them: `scaled` its scores are divided by √d_k (not in T5), `biased` a position
    bias is added to them (T5's self-attention); `cfg` the model's config and `head` (0-based) the head shown, for
    what T5Gemma adds (rotated queries and keys, its own scale, soft-capping, grouped keys and values)."""
    texts = dict(STEPS)
    recorded = "the model's recorded scores" + (" less the bias B" if biased else "") + (" × √d_k" if scaled else "")
    texts["scores"] = f"Raw scores QKᵀ: how well each query matches each key ({recorded})."
    sum_of = "QKᵀ/√d_k + B" if scaled else "QKᵀ + B"
    texts["bias"] = ("Position bias B: a learned number for each key's distance from the query, this head's, added "
                     "to the scores (the Positional encoding page shows it by distance). It is the same in every "
                     "layer of the stack; cross-attention has none.")
    texts["summed"] = f"The scores with the bias, {sum_of}: the softmax's input, as the model recorded it."
    if biased:
        texts["masked"] = (f"Mask: forbidden cells of {sum_of} are set to −∞ before the softmax, so they get exactly "
                           "zero weight.")
    if not scaled:
        texts["softmax"] = ("Softmax along each row (this model does not divide the scores by √d_k): weights ≥ 0 "
                            "that sum to 1.")
    return texts | (_family_texts(cfg, head) if cfg is not None else {})


def _family_texts(cfg, head: int) -> dict[str, str]:
    """What rotary positions, grouped keys and values, another scale and soft-capping change in the steps' texts."""
    texts, share = {}, kv_share(cfg)
    if getattr(cfg, "positions", "") == "rotary":
        texts["Q"] = ("Queries: the layer input times W_Q, this head's slice, then each pair of dimensions turned by "
                      "the token's position (rotary: the Positional encoding page shows how).")
        texts["K"] = "Keys: the input times W_K, turned by position like the queries (cross-attention: not turned)."
    if share > 1:
        g = kv_head(cfg, head)
        texts["K"] = texts.get("K", STEPS["K"]) + (
            f" Grouped-query attention: heads {g * share + 1}–{g * share + share} share this key and value head "
            f"(kv {g + 1} of {cfg.n_heads // share}).")
    if score_scale(cfg):
        texts["scaled"] = (f"Scaled by 1/√{score_scale(cfg) ** 2:g} (the model's query_pre_attn_scalar, not "
                           f"d_k = {cfg.d_k}), so that the softmax does not saturate.")
        texts["scores"] = ("Raw scores QKᵀ: how well each query matches each key (the recorded scores × "
                           f"{score_scale(cfg):.2f}).")
    if attention_cap(cfg):
        c = attention_cap(cfg)
        texts["capped"] = (f"Soft-capped: {c:g}·tanh(s / {c:g}) squeezes every score into (−{c:g}, {c:g}); small "
                           "scores pass almost unchanged, large ones flatten. The mask and the softmax read these.")
    return texts


def numbered_steps(present: set[str], texts: dict[str, str] | None = None) -> dict[str, str]:
    """Step titles numbered 1, 2, 3, ... in reading order over the figures actually drawn."""
    texts = STEPS if texts is None else texts
    names = [n for row in ORDER for n in row if n in present]
    return {n: f"{i} · {texts[n]}" for i, n in enumerate(names, 1)}


def render(ctx: Context) -> None:
    tr, cfg = ctx.result.trace, ctx.cfg
    if not ctx.present:  # presenter mode: the controls, the part and its figures; the rest goes below them
        st.subheader("Inside one head")
    with choices(ctx):
        kind, layer, head = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads,
                                            compact=ctx.present)
        show = sections(ctx, ROW_NAMES)
    shows_caption(ctx, kind)
    q_tokens, k_tokens = tr.axes(kind)
    rows = _rows(ctx, kind, layer, head)
    if not ctx.present:
        _checks(ctx, kind, layer, head)
    biased = tr.pos_bias(kind) is not None
    titles = numbered_steps({name for steps in rows for name in steps}, step_texts(_scaled(cfg), biased, cfg, head))
    # Read left to right, top to bottom: Q K V, then the score matrices, then the weights, then the output. Each row
    # is one figure, its panels under the steps' titles (one chart per row: a first visit draws four, not eight).
    for row_name, (names, fig) in zip(ROW_NAMES, rows.items()):
        if not show(row_name):
            continue
        if ctx.present and row_name in KEY_ROWS:  # as many panels as label every key; the others in "Choose"
            width = PAGE_WIDTH_PX if row_name == "scores" else int(PAGE_WIDTH_PX * 0.74)  # beside the row sums
            shown = panel_group(ctx, [SHORT[n] for n in names], panels_that_fit(len(names), k_tokens, q_tokens, width))
            if len(shown) < len(names):
                names = tuple(names[i] for i in shown)
                fig = _rows(ctx, kind, layer, head, only=names)[names]
        if not ctx.present:
            _step_titles(names, titles, "markdown")
        chart(st, fig, width="stretch", key=f"head_{names[0]}",
              config=fig_config(ctx, f"inside-one-head_{kind}_L{layer + 1}_H{head + 1}_{'-'.join(names)}"))
        if ctx.present:  # the steps' explanations under their figure, which keeps the screen's height
            _step_titles(names, titles, "caption")
    if ctx.present:
        _checks(ctx, kind, layer, head)


def ahead(ctx: Context) -> list:
    """What a first visit builds, to be built before it (views/plumbing/ahead.py): the rows of figures of the head
    the session has chosen."""
    ss, cfg = st.session_state, ctx.cfg
    kind = ss.get("kind") if ss.get("kind") in KINDS else KINDS[0]
    layers = cfg.n_encoder_layers if kind == "enc_self" else cfg.n_decoder_layers
    layer, head = within(ss.get("layer"), 1, layers) - 1, within(ss.get("head"), 1, cfg.n_heads) - 1
    return [lambda: _rows(ctx, kind, layer, head)]


def _rows(ctx: Context, kind: str, layer: int, head: int, only: tuple[str, ...] | None = None) -> dict:
    """The page's figures, one per row of steps, for one head (0-based layer and head; ``only``: those steps)."""
    tr = ctx.result.trace
    a = tr.attn[kind][layer]
    q_tokens, k_tokens = tr.axes(kind)
    # Dropout is simulated on a copy of the weights with a fixed seed: the shared model stays in eval mode.
    dropped, _ = dropout_sample(a["probs"][head], ctx.cfg.attn_dropout, seed=0)
    mask = a["mask"]  # (i, j) the mask the model used
    bias = tr.pos_bias(kind)  # (h, i, j) the position bias the model added to these scores (T5), or None
    q, k, v = head_qkv(ctx.cfg, a, head)
    capped = a.get("capped")
    return cached(head_pipeline_rows, q, k, v, None,
                  mask if not mask.all() else None, a["probs"][head], a["out"][head], q_tokens, k_tokens, kind,
                  dropout_probs=dropped,
                  scaled_scores=a["scores"][head],  # the scores the model recorded, drawn as they are
                  pos_bias=None if bias is None else bias[head], scaled=_scaled(ctx.cfg), only=only,
                  scale=score_scale(ctx.cfg), capped=None if capped is None else capped[head],
                  cap=attention_cap(ctx.cfg), rotated="rot_q" in a)


def _scaled(cfg) -> bool:
    """Whether the model divides its scores by √d_k (T5 does not)."""
    return getattr(cfg, "scale_attention", True)


def _step_titles(names: tuple[str, ...], titles: dict[str, str], how: str) -> None:
    """The numbered titles of a row's steps, each above (or in presenter mode under) its panel of the row's figure.

    Above: one Markdown element whose grid has a column per panel (columns of Streamlit elements were seven
    elements a row for the browser to lay out on a first visit); under, in presenter mode: captions in columns."""
    if how == "markdown":
        cells = "".join(f"<div><strong>{html.escape(titles[name])}</strong></div>" for name in names)
        st.markdown(f"<div style='display: grid; grid-template-columns: repeat({len(names)}, 1fr); gap: 1rem;'>"
                    f"{cells}</div>", unsafe_allow_html=True)
        return
    for col, name in zip(st.columns(len(names)) if len(names) > 1 else [st.container()], names):
        col.caption(titles[name])


def _checks(ctx: Context, kind: str, layer: int, head: int) -> None:
    """The head's sizes, and the recorded numbers checked against Q, K and V (and the recorded bias)."""
    cfg, tr = ctx.cfg, ctx.result.trace
    a, bias = tr.attn[kind][layer], tr.pos_bias(kind)
    scaled = _scaled(cfg)
    shared = ("Panels that share a colour bar share its scale, so a colour is the same number in each: Q, K and V; "
              + ("the scaled and the masked scores; " if scaled else "")
              + "the weights before and after dropout.")
    if scaled:
        raw = (" The raw scores QKᵀ have a bar of their own: they are √d_k = "
               f"{np.sqrt(cfg.d_k):.1f} times the scaled ones, which on their scale would be drawn that much paler.")
    else:
        raw = " This model does not divide its scores by √d_k: the softmax reads QKᵀ" + (" + B." if bias is not None
                                                                                             else " as it is.")
    split = (f"d_model {cfg.d_model} is split into {cfg.n_heads} heads of d_k = {cfg.d_k}."
             if cfg.n_heads * cfg.d_k == cfg.d_model else
             f"Each of the {cfg.n_heads} heads projects d_model {cfg.d_model} to d_k = {cfg.d_k} (together "
             f"{cfg.n_heads * cfg.d_k}, not d_model: W_O maps them back).")
    st.caption(f"{split} "
               f"Layer {layer + 1}, head {head + 1}; attention dropout p = {cfg.attn_dropout}. {shared}{raw}")
    q, k, v = head_qkv(cfg, a, head)
    expected = q @ k.T / ((score_scale(cfg) or np.sqrt(cfg.d_k)) if scaled else 1.0)
    if bias is not None:
        expected = expected + bias[head]
    check = max_abs_diff(a["scores"][head], expected)
    out_check = max_abs_diff(a["out"][head], a["probs"][head] @ v)
    what = ("scaled scores" if scaled else "scores") + (" plus the recorded bias" if bias is not None else "")
    st.markdown(f":material/check_circle: recomputed from Q and K, the {what} match the model's recorded ones "
                f"to {check:.1e}; weights · V matches the head output to {out_check:.1e}")
