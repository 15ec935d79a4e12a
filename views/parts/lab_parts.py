"""The What if page's measured parts: head knockout on sentence A, and activation patching A (clean) → B (corrupted).

Both are teacher-forced on the translation shown in the header (its tokens and, when it finished, the end token)
and measure log-probabilities of those tokens: of the whole translation (their sum) or of one token, as the
"Measured on" box chooses (URL `lab_token`).
"""
from __future__ import annotations

import streamlit as st

from model.analysis import pairs
from views.parts.text import md_escape
from views.parts.widgets import chart, fig_config
from views.plumbing.figcache import cached
from views.plumbing.state import KINDS, Context, traced_decoding
from views.plumbing.state import knockout as knockout_of
from views.plumbing.state import patching as patching_of
from views.plumbing.urlstate import within
from viz.heads import head_name
from viz.lab import head_effect_grid, position_effect_figure, token_bars_figure
from viz.layout import PAGE_WIDTH_PX
from viz.text import escape_token
from viz.theme import theme

RESTORED = "share restored"
# Head knockout runs one teacher-forced pass per head: on a first visit only where that is quick. The budget is
# heads × parameters: opus-mt's 144 heads of 74M parameters pass (1.1e10), Flan-T5-base's 432 heads of 248M do not,
# and neither do the 600M models' 576 (docs/performance.md has their first visits with the switch on and off).
KNOCKOUT_AUTO = 2e10


def scored_tokens(ctx: Context) -> tuple[str, ...]:
    """The tokens the lab is teacher-forced on: the decoding shown, step by step (the end token included)."""
    return tuple(s.chosen_token for s in ctx.result.steps or [])


def measured_on(tokens: tuple[str, ...], compact: bool = False) -> int | None:
    """The "Measured on" box (URL `lab_token`): None for the whole translation, else a 0-based token index."""
    ss = st.session_state
    ss["lab_token"] = within(ss.get("lab_token"), 0, len(tokens))
    n = st.selectbox("Measured on", list(range(len(tokens) + 1)), key="lab_token", persist_state="session",
                     label_visibility="collapsed" if compact else "visible",
                     format_func=lambda i: "the whole translation" if i == 0 else f"output token {i}: {tokens[i - 1]}",
                     help="Which log-probability the knockout and patching grids show: of the whole translation shown "
                          "in the header (the sum over its tokens), or of one of its tokens.")
    return None if n == 0 else n - 1


def _what(tokens: tuple[str, ...], token: int | None) -> str:
    """What a grid measures, in words (escaped for Markdown)."""
    return "the whole translation" if token is None else f"output token {token + 1}, “{md_escape(tokens[token])}”"


def _plain(tokens: tuple[str, ...], token: int | None) -> str:
    """The same for a figure's title (Plotly text: the token escaped for it)."""
    return "the whole translation" if token is None else f"output token {token + 1}, “{escape_token(tokens[token])}”"


def _tag(token: int | None) -> str:
    return "all" if token is None else f"token{token + 1}"


def knockout(ctx: Context, tokens: tuple[str, ...], token: int | None, kind: str, layer: int, head: int,
             show) -> None:
    """Every head switched off alone: the change of log p; a grid per kind ("knockout") and the chosen head's
    per-token bars ("one head off")."""
    if not (show("knockout") or show("one head off")):
        return
    if not ctx.present:
        st.markdown("#### Head knockout on sentence A")
    if not tokens:
        st.info("The translation is empty: there is nothing to score.")
        return
    if not ctx.present and not _knockout_asked(ctx):
        return
    ko = knockout_of(ctx.key, ctx.text, tokens)
    values = pairs.knockout_effect(ko, token)  # kind -> (L, h) nats
    if show("knockout"):
        chart(st, cached(head_effect_grid, values, "Δ log p (nats)", chosen=(kind, layer, head),
                         title=f"One head off: the change of log p({_plain(tokens, token)})"),
              width="stretch", config=fig_config(ctx, f"whatif_knockout_{_tag(token)}"), key="knockout_fig")
    if show("one head off"):
        chart(st, cached(token_bars_figure, ko.delta[kind][layer, head], list(ko.tgt_tokens), "Δ log p (nats)",
                         highlight=token, title=f"{head_name(kind, layer, head)} off: each output token's log p",
                         width_px=PAGE_WIDTH_PX),
              width="stretch", config=fig_config(ctx, f"whatif_knockout_{kind}_L{layer + 1}_H{head + 1}"),
              key="knockout_bars")
    if ctx.present:
        return
    top = pairs.strongest(values, 3)
    total = float(ko.log_probs.sum() if token is None else ko.log_probs[token])
    st.caption(f"Each head of every kind is switched off alone (its output before W_O set to 0), all others on, "
               f"teacher-forced on the translation shown in the header ({md_escape(ctx.shows)}). Measured on "
               f"{_what(tokens, token)}: log p = {total:.3f} with every head on. Negative, in {theme().warm_name}: "
               "the head helped (without it the token is less probable: worse for the translation, the colour of "
               "worse in every effect the app draws). Largest changes: "
               + "; ".join(f"{head_name(k, l, h)} {v:+.3f}" for k, l, h, v in top)
               + ". The outlined cell is the head chosen above; the bars show its change on every output token. "
               "All heads are computed in a few batched passes, one batch row per head.")


def patching(ctx: Context, tokens: tuple[str, ...], token: int | None, text_b: str, show) -> None:
    """Patching A (clean) → B (corrupted): how much of A's log p one component restores in B's run."""
    if not (show("patching: heads") or show("patching: positions")):
        return
    ss = st.session_state
    if not ctx.present:
        st.markdown("#### Activation patching: A (clean) → B (corrupted)")
    b = traced_decoding(ctx.key, text_b, ss["decoding"], ss["beam"], ctx.max_len) if text_b.strip() else None
    src_a = ctx.result.source.axis_tokens
    src_b = b.result.source.axis_tokens if b is not None and b.result.source.tokens else None
    if not tokens or src_b is None or src_a == src_b:
        st.info("Patching needs a sentence B that differs from A (and a translation to score): change a word of B "
                "above, or choose a pair.")
        return
    if not pairs.same_length(src_a, src_b):
        st.warning(f"Activation patching copies position j of A's run into position j of B's, so it needs sentences "
                   f"with the same number of tokens. A reads {len(src_a)} (with the end token): "
                   f"{md_escape(' '.join(src_a))}; B reads {len(src_b)}: {md_escape(' '.join(src_b))}. Only "
                   "same-length edits are patched here: replace a word by one the tokenizer reads as as many tokens.")
        return
    if not ctx.present and not _asked():  # presenter mode: choosing a patching part is the request
        return
    pa = patching_of(ctx.key, ctx.text, text_b, tokens)
    clean, corrupt, gap = pairs.patch_gap(pa, token)
    if abs(gap) < pa.min_gap:
        st.info(f"Changing A into B moved log p of {_what(tokens, token)} by {_nats(gap)} nats only "
                f"({clean:.4f} in A's run, {corrupt:.4f} in B's): the gap is below the {pa.min_gap:g} nats a share "
                "needs, so no component's share restored is defined here. A share divides by this gap, and float32 "
                "computes log p to about 1e-5 nats: the share of a smaller gap would be noise. "
                + ("Measure another token, or the whole translation." if token is not None else
                   "Measure one token, or change B more."))
        return
    effect = pairs.patch_effect(pa, token)
    heads = {k: effect[k] for k in KINDS}
    plain, of_gap = _plain(tokens, token), f"of a gap of {gap:+.3f} nats"
    if show("patching: heads"):
        chart(st, cached(head_effect_grid, heads, RESTORED, zmin=-1.0, zmax=1.0, gap=gap,
                         title=f"One head's output from A, in B's run: share of log p({plain}) restored, {of_gap}"),
              width="stretch", config=fig_config(ctx, f"whatif_patching_heads_{_tag(token)}"), key="patch_heads_fig")
    if show("patching: positions"):
        labels = pairs.pair_labels(src_a, src_b, [(j, j) for j in range(len(src_a))])
        changed = [j for j, (x, y) in enumerate(zip(src_a, src_b)) if x != y]  # their labels are never thinned away
        chart(st, cached(position_effect_figure, effect["enc_resid"], effect["dec_resid"], labels,
                         ctx.result.decoder_input[: len(tokens)], RESTORED, gap=gap, keep_src=changed,
                         keep_dec=[] if token is None else [token],  # the decoder position that scores the token
                         title=f"One position of the residual stream from A: share of log p({plain}) restored, "
                               f"{of_gap}", width_px=PAGE_WIDTH_PX),
              width="stretch", config=fig_config(ctx, f"whatif_patching_positions_{_tag(token)}"),
              key="patch_pos_fig")
    if not ctx.present:
        top = pairs.strongest(heads, 3)
        st.caption(f"Clean: A, with the translation shown in the header ({md_escape(ctx.shows)}); corrupted: B, scored "
                   f"on the same tokens. Measured on {_what(tokens, token)}: log p = {clean:.3f} in A's run and "
                   f"{corrupt:.3f} in B's, a gap of {gap:+.3f} nats. Each cell runs B with one component copied from "
                   "A's run: a head's output (before W_O) at every position, or the residual stream after a layer at "
                   "one position (position j of A into position j of B). Its share restored is (log p with the patch "
                   "− log p in B's run) / gap: 0 = nothing of the gap restored, 1 = all of it; values beyond ±1 are "
                   "drawn at ±1 (the hover gives them, and the nats they stand for). A negative share: copying that "
                   f"head or position from A moved log p further from A's run than B's run already was. "
                   f"{theme().warm_name.capitalize()}: the copy lowered log p (worse for the translation), whichever "
                   "the sign of the gap. A share is "
                   f"defined only where the gap is at least {pa.min_gap:g} nats (below that, float32 noise would "
                   "decide it). Heads that restore most: "
                   + "; ".join(f"{head_name(k, l, h)} {v:+.2f} ({v * gap:+.3f} nats)" for k, l, h, v in top) + ".")


def _nats(x: float) -> str:
    """A log-probability difference with a sign and its first significant digits, however small."""
    return f"{x:+.4f}" if abs(x) >= 1e-3 else f"{x:+.1e}"


def heads_in(cfg) -> int:
    """All the heads knockout switches off one at a time: every layer's, of the three attention kinds."""
    return cfg.n_heads * (cfg.n_encoder_layers + 2 * cfg.n_decoder_layers)


def _knockout_asked(ctx: Context) -> bool:
    """On a large model the knockout waits for its switch (URL `lab_knockout`), so that the page's first visit is
    not many passes of the model long; on a small one it always runs."""
    heads, params = heads_in(ctx.cfg), sum(ctx.facts["parameters"].values())
    if heads * params <= KNOCKOUT_AUTO:
        return True
    on = st.toggle("Run head knockout", key="lab_knockout", persist_state="session",
                   help=f"Runs the translation again {heads:,} times, once with each head switched off (batched).")
    if not on:
        st.caption(f"This model has {heads:,} heads and {params / 1e6:,.0f}M parameters: switching each off in turn "
                   "takes a while, so it runs when you switch it on.")
    return on


def _asked() -> bool:
    """The "Run activation patching" switch (URL `lab_patch`). Patching is the heaviest computation of the page (a
    batch row for every head and for every layer and position of both residual streams), so it runs when asked for,
    as the Decoding page's beam search does; choosing an example pair asks for it."""
    on = st.toggle("Run activation patching", key="lab_patch", persist_state="session",
                   help="Runs B once for every head and for every layer and position of the residual streams, with "
                        "that one component copied from A's run (a few batched passes).")
    if not on:
        st.caption("Switch it on to see which heads and which positions carry the change from A to B: how much of "
                   "the gap in log p each one restores when copied from A's run into B's.")
    return on
