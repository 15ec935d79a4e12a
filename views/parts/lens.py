"""The Decoding page's what-if parts at the chosen step: the logit lens (in which layer does the decoder commit to
its word?) and why A and not B (contrastive attribution over the source, and the heads that move the difference).

Both are teacher-forced on the decoding shown (its chosen tokens, step by step), so the decoder reads at step n
exactly the prefix it read while decoding. Numbers come from model/analysis/lens.py through the door.
"""
from __future__ import annotations

import math

import streamlit as st

from model.analysis import pairs
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, fig_config
from views.plumbing.figcache import cached
from views.plumbing.state import Context, contrast, logit_lens
from views.plumbing.urlstate import within
from viz.heads import head_name
from viz.lab import contrast_figure, head_effect_grid, lens_figure
from viz.layout import PAGE_WIDTH_PX
from viz.text import escape_token
from viz.theme import theme

LENS_K = 5  # candidates per layer: as many as the candidates chart shows


def _step(ctx: Context) -> tuple[int, object, tuple[str, ...]]:
    """(1-based step shown, its Step, the tokens of the decoding shown) as the step slider above left them."""
    steps = ctx.result.steps
    n = within(st.session_state.get("dec_step"), 1, len(steps))
    return n, steps[n - 1], tuple(s.chosen_token for s in steps)


def render_lens(ctx: Context) -> None:
    """Each decoder layer's output at this step through the final norm and the generator: its top candidates."""
    step_no, step, tokens = _step(ctx)
    if not ctx.present:
        st.markdown(f"#### Logit lens: where step {step_no} commits to **{md_escape(step.chosen_token)}**")
    res = logit_lens(ctx.key, ctx.text, tokens, step_no - 1, LENS_K)
    chart(st, cached(lens_figure, res.top_tokens, res.top_probs, res.chosen_probs, res.chosen_ranks,
                     res.chosen_token, title=f"step {step_no}: each decoder layer read as if it were the last"),
          width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_logit-lens"), key="lens_fig")
    if ctx.present:
        return
    layers = len(res.chosen_ranks)
    first = pairs.commit_layer(res.chosen_ranks)
    said = (f"**{md_escape(res.chosen_token)}** is the top candidate from layer {first + 1} of {layers} on."
            if first is not None else
            f"The last layer does not rank **{md_escape(res.chosen_token)}** first "
            f"(rank {int(res.chosen_ranks[-1])}): it was not the model's own choice at this step.")
    st.caption(said + " Each row takes that decoder layer's output at this step through the final layer norm (where "
               "the model has one) and the generator, as if the decoder ended there; the last row is the model's own "
               "distribution. Its probabilities are the raw generator's, before the start and padding tokens are set "
               "to 0, so they can be a little lower than the candidates chart's above. Teacher-forced on "
               f"{md_escape(ctx.shows)}.")


def _pair(step) -> tuple[list[str], str, str]:
    """(the step's candidates, default A, default B): A the token chosen (or forced), B the best other candidate
    (for a forced step that is what greedy decoding would have chosen)."""
    options = list(dict.fromkeys(list(step.top_tokens) + [step.chosen_token]))
    a = step.chosen_token
    b = next((t for t in options if t != a), a)
    return options, a, b


def render_contrast(ctx: Context) -> None:
    """Why A and not B at this step: input × gradient and relevance of log p(A) − log p(B), and head knockout."""
    ss = st.session_state
    step_no, step, tokens = _step(ctx)
    if not ctx.present:
        st.markdown(f"#### Why A and not B at step {step_no}")
    options, a0, b0 = _pair(step)
    if ss.get("why_a") not in options:
        ss["why_a"] = a0
    if ss.get("why_b") not in options:
        ss["why_b"] = b0
    with choices(ctx):  # presenter mode: A and B in the header's Choose
        c1, c2, _ = st.columns([1, 1, 2])
        vis = "collapsed" if ctx.present else "visible"  # presenter mode: the options say which is which
        a = c1.selectbox("A (why this token…)", options, key="why_a", persist_state="session", label_visibility=vis,
                         format_func=(lambda t: f"A: {t}") if ctx.present else str,
                         help="A candidate of this step; by default the token chosen (or the one you forced).")
        b = c2.selectbox("B (…and not this one)", options, key="why_b", persist_state="session", label_visibility=vis,
                         format_func=(lambda t: f"B: {t}") if ctx.present else str,
                         help="Another candidate; by default the best other one (after a forced token: the model's own "
                              "choice).")
    if a == b:
        st.info("Choose two different candidates: A against itself is 0 everywhere.")
        return
    res = contrast(ctx.key, ctx.text, tokens, step_no - 1, a, b)
    # Presenter mode: the two figures side by side, so that both fit the screen below the controls.
    left, right = st.columns(2) if ctx.present else (st.container(), st.container())
    # Presenter mode: a title of one line that names A and B (their boxes are in the header's Choose), so the two
    # panels keep the height.
    chart(left, cached(contrast_figure, res.input_x_grad, res.relevance, res.src_tokens, a, b,
                     title=f"step {step_no}: for “{escape_token(a)}”, not “{escape_token(b)}”" if ctx.present else
                           f"step {step_no}: which source words push towards “{escape_token(a)}” rather than "
                           f"“{escape_token(b)}”",
                     width_px=PAGE_WIDTH_PX // 2 if ctx.present else PAGE_WIDTH_PX),
          width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_why-A-not-B"), key="why_fig")
    chart(right, cached(head_effect_grid, res.heads, "Δ (log p(A) − log p(B))", worse="worse for A",
                     title=f"step {step_no}: one head off, the change of log p({escape_token(a)}) − "
                           f"log p({escape_token(b)})", cell_values=not ctx.present),
          width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_why-A-not-B_heads"), key="why_heads_fig")
    if ctx.present:
        return
    top = [f"{head_name(k, l, h)} {v:+.3f}" for k, l, h, v in res.top_heads[:3]]
    ratio = math.exp(min(res.log_prob_diff, 700.0))
    st.caption(f"log p({md_escape(a)}) − log p({md_escape(b)}) = {res.log_prob_diff:+.3f} nats with every head on: "
               f"A is {ratio:.3g} times as probable as B here. Input × gradient: how much each source token's "
               "embedding moves that difference, to first order (positive: towards A). Relevance: the gradient-"
               "weighted relevance of the same difference (Chefer et al.), non-negative, summing to 1. The grid "
               f"switches each head off alone; negative, in {theme().warm_name}: the head favoured A over B "
               "(without it, worse for A). Largest: " + "; ".join(top)
               + f". Teacher-forced on {md_escape(ctx.shows)}, so the decoder reads the prefix it read at this step.")
