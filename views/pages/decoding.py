"""Decoding: step by step, choosing another candidate, and greedy and beam search side by side."""
from __future__ import annotations

import streamlit as st

from model.text.reading import misread
from views.parts import lens, quiz
from views.parts.carried import low_share
from views.parts.carried import record as carried_record
from views.parts.reading import forced_by
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, csv_button, fig_config, sections, shows_caption, table
from views.plumbing.figcache import cached
from views.plumbing.state import Context, attribution, beam_translation, trace_sentence
from views.plumbing.urlstate import LAST, within
from viz.decoding import (
    attribution_figure,
    candidates_figure,
    decoding_rows,
    source_share_figure,
    step_cross_attention_figure,
)
from viz.layout import PAGE_WIDTH_PX
from viz.tables import candidates_csv
from viz.theme import below_controls


def _force(prefix: list[str]) -> None:
    st.session_state["prefix"] = tuple(prefix)
    st.session_state["dec_step"] = len(prefix) + 1  # show what happens right after the choice


def render(ctx: Context) -> None:
    ss = st.session_state
    if not ctx.present:  # presenter mode: the part, its controls and its figures; explanations go below them
        st.subheader("Decoding, step by step")
    end = ctx.facts["end_token"]
    never = list(dict.fromkeys((ctx.facts["start_token"], "<pad>")))  # Marian starts from <pad> itself
    if not ctx.present:
        st.write(f"The decoder writes one token per step. At each step it sees the {ctx.langs['src_name']} sentence "
                 f"(through cross-attention) and the {ctx.langs['tgt_name']} prefix written so far, and gives a "
                 "probability to every token of its "
                 f"vocabulary; greedy decoding takes the most probable one and stops at `{end}`. "
                 + " and ".join(f"`{t}`" for t in never)
                 + (" are" if len(never) > 1 else " is") + " never generated: set to probability 0 before choosing.")
    res = ctx.result
    shows_caption(ctx)
    if ctx.other is not None:
        _side_by_side(ctx)
        return
    prefix = tuple(ss.get("prefix", ()))
    if prefix:
        c1, c2 = st.columns([4, 1])
        c1.info(_forced_note(prefix, res.steps or []))
        c2.button("Undo the forcing", on_click=_force, args=([],), key="unforce")
    steps = res.steps or []
    if not steps:
        st.info("Nothing to decode.")
        return
    with choices(ctx):
        show = sections(ctx, quiz.parts(ctx, ["this step", "where it came from", "logit lens", "why A and not B",
                                              "all steps", "greedy and beam"]))
    if show("this step") or show("quiz"):  # the quiz is this step, asked before it is shown
        _step(ctx, steps)
    if show("where it came from"):
        _attribution(ctx, steps)
    if show("logit lens") and _asked(ctx, "dec_lens", "Logit lens: in which decoder layer does this step commit "
                                     "to its token?", "Reads each decoder layer's output at this step as if it "
                                     "were the last; switch it on to run the model again for it."):
        lens.render_lens(ctx)
    if show("why A and not B") and _asked(ctx, "dec_why", "Why A and not B: which source words and heads decide "
                                          "between two candidates of this step?", "Compares two candidates with "
                                          "gradients and by switching off each head in turn; switch it on to run it."):
        lens.render_contrast(ctx)
    if show("all steps"):
        _all_steps(steps)
    if show("greedy and beam"):
        _greedy_and_beam(ctx)


def _forced_note(prefix: tuple[str, ...], steps: list) -> str:
    """What the user forced, as the model received it (the forced steps' tokens): a token its vocabulary does not
    hold reaches it as the unknown token, and the note says so rather than repeat what was typed (a link's `prefix`
    may hold anything)."""
    received = [s.chosen_token for s in steps if s.forced][-len(prefix):]
    wrong = misread(prefix, received)
    note = f"You forced the first {len(prefix)} token(s): {md_escape(' '.join(received) or '∅')}."
    if wrong:
        note += (" Not in the model's vocabulary: "
                 + ", ".join(f"{md_escape(g)} (read as {md_escape(r)})" for g, r in wrong) + ".")
    return note + " Decoding continued greedily."


def _asked(ctx: Context, key: str, label: str, what: str) -> bool:
    """Whether to draw a part that runs the model again at the chosen step: when its switch (in the URL) is on, or
    in presenter mode, whose part chooser picked it. A first visit of the page does not pay for parts nobody opened."""
    if ctx.present or st.toggle(label, key=key, persist_state="session"):
        return True
    st.caption(what)
    return False


def _step(ctx: Context, steps: list) -> None:
    ss, cfg = st.session_state, ctx.cfg
    n = len(steps)
    ss["dec_step"] = _step_no(ss.get("dec_step"), n)
    # Presenter mode: the step, layer and head in one row above the two figures (the quiz's button at its end: the
    # lecturer steps through on stage), what the decoder read below them.
    top = st.columns([1.7, 1, 1.25, 1.35], vertical_alignment="bottom") if ctx.present else None
    slider = dict(format="step %d", label_visibility="collapsed") if top else {}
    step_no = (top[0] if top else st).slider("Step", 1, n, key="dec_step", persist_state="session",
                                             **slider) if n > 1 else 1
    step = steps[step_no - 1]
    read = f"**Step {step_no} of {n}.** The decoder has read: **{md_escape(' '.join(step.prefix_tokens))}**"
    if not ctx.present:
        st.markdown(read)
    quizzed = 0  # presenter mode's quiz: the height its lines take above the charts
    if top:
        layer, head = _layer_head(cfg, top[1], top[2])
        quizzed = quiz.ask(ctx, top[3], step, step_no, step.candidates(), layer, head)
        if quizzed is None:
            return  # the room is asked first: the charts wait for the reveal
    left, right = st.columns(2)
    with left, below_controls(rows=1, extra_px=quizzed) as look:
        # after a quiz's Reveal, the room's answers beside the model's, in the place of the chart the question
        # was not about
        room = quiz.room_beside(ctx, step, step_no, step.candidates(), layer, head, look.height_px) if top else None
        if room and room[1] == "left":
            chart(st, room[0], width="stretch", key="room_beside", config={"displayModeBar": False})
        else:
            _candidates_part(ctx, step, step_no, read, bool(top))
    with right, below_controls(rows=1, extra_px=quizzed):
        if not top:
            layer, head = _layer_head(cfg)
        if room and room[1] == "right":
            chart(st, room[0], width="stretch", key="room_beside", config={"displayModeBar": False})
        else:
            _cross_figure(ctx, step, step_no, layer, head, "step_cross")
    if not top:  # presenter mode: the screen holds the step's two figures
        _source_share(ctx, steps, step_no)


def _source_share(ctx: Context, steps: list, step_no: int) -> None:
    """Each output token's source share (ALTI+), the step shown highlighted, and what it says of that step."""
    share, fig = _source_share_chart(ctx, steps, step_no)
    chart(st, fig, width="stretch", key="source_share", config=fig_config(ctx, "decoding_source_share"))
    st.caption(f"Step {step_no}: {share[step_no - 1]:.0%} of **{md_escape(steps[step_no - 1].chosen_token)}** came "
               f"from the {ctx.langs['src_name']} sentence, {1 - share[step_no - 1]:.0%} from the translation so far "
               "(ALTI+, Ferrando et al. 2022: each attention block's contributions rolled out through the network; "
               "the feed-forward blocks are left out). A token made mostly from the translation so far is how a "
               "hallucination looks from inside. " + low_share(ctx, float(share[step_no - 1])))


def _candidates_part(ctx: Context, step, step_no: int, read: str, present: bool) -> None:
    """The step's candidates chart, what was chosen and the buttons that choose another."""
    labels, probs, chosen_idx = step.candidates()
    chart(st, _candidates_chart(labels, probs, chosen_idx, step_no, present),
          width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_candidates"), key="cands")
    if ctx.present:
        st.markdown(read)
    csv_button(f"Step {step_no} candidates (CSV)", lambda: candidates_csv(labels, probs, chosen_idx), ctx,
               f"decoding_step{step_no}_candidates", "csv_cands")
    forced = forced_by(ctx, step_no, step)
    how = " (chosen by beam search)" if ctx.mode == "beam" else f" ({forced})" if forced else ""
    st.markdown(f"Chosen: **{md_escape(step.chosen_token)}** (p = {step.chosen_prob:.3f}){how}")
    st.caption("Pick another candidate: decoding goes on greedily from it.")
    with st.container(horizontal=True, key="force_buttons"):
        for tok, tid in zip(step.top_tokens, step.top_ids):
            st.button(md_escape(tok), key=f"force_{step_no}_{tid}", disabled=tid == step.chosen,
                      on_click=_force, args=(list(step.prefix_tokens[1:]) + [tok],), width="content")


def _layer_head(cfg, container=st, beside=None) -> tuple[int, int]:
    """Decoder layer (1-based) and head (1-based; 0 = mean of heads) selectors, URL keys dec_layer / dec_head: in two
    columns of ``container``, or in ``container`` and ``beside``."""
    ss = st.session_state
    layers = cfg.n_decoder_layers
    ss["dec_layer"], ss["dec_head"] = _dec_layer_head(cfg, ss.get("dec_layer"), ss.get("dec_head"))
    c1, c2 = (container, beside) if beside is not None else container.columns(2)
    compact = beside is not None  # presenter mode's row: no labels above the boxes, the options say what they are
    vis = "collapsed" if compact else "visible"
    layer = c1.selectbox("Layer", list(range(1, layers + 1)), key="dec_layer", persist_state="session",
                         label_visibility=vis, format_func=(lambda v: f"layer {v}") if compact else str)
    head = c2.selectbox("Head", list(range(0, cfg.n_heads + 1)), key="dec_head", persist_state="session",
                        label_visibility=vis, format_func=lambda h: "mean of heads" if h == 0 else f"head {h}")
    return layer, head


def ahead(ctx: Context) -> list:
    """What a first visit computes, to be done before it (views/plumbing/ahead.py): the step the session shows, its
    candidates, where it looked and its attribution, and ALTI+ along the decoding with the source-share strip."""
    steps = ctx.result.steps or []
    if not steps:
        return []
    ss = st.session_state
    step_no = _step_no(ss.get("dec_step"), len(steps))
    layer, head = _dec_layer_head(ctx.cfg, ss.get("dec_layer"), ss.get("dec_head"))
    step = steps[step_no - 1]
    return [lambda: _candidates_chart(*step.candidates(), step_no, False),
            lambda: _cross_chart(ctx, step, step_no, layer, head),
            lambda: _source_share_chart(ctx, steps, step_no), lambda: _attribution_chart(ctx, steps, step_no)]


def _step_no(value, n: int) -> int:
    """The session's step choice (1-based, None: not made) kept within 1..n, as the step slider keeps it."""
    return within(value, 1, n)


def _dec_layer_head(cfg, layer, head) -> tuple[int, int]:
    """The session's decoder layer and head choices as the page reads them: the layer within 1..n (none: the last),
    the head within 0 (mean of heads)..n_heads."""
    return within(layer, 1, cfg.n_decoder_layers, LAST), within(head, 0, cfg.n_heads)


def _cross_figure(ctx: Context, step, step_no: int, layer: int, head: int, key: str, title: str = "") -> None:
    chart(st, _cross_chart(ctx, step, step_no, layer, head, title), width="stretch",
          config=fig_config(ctx, f"decoding_step{step_no}_cross_L{layer}_{_head_words(head)}"), key=key)


def _candidates_chart(labels, probs, chosen_idx: int, step_no: int, present: bool):
    """The step's candidates (``step.candidates()``) as a figure."""
    title = "next-token candidates" if present else f"step {step_no}: next-token candidates"  # the slider says it
    return cached(candidates_figure, labels, probs, chosen_idx, title=title)


def _head_words(head: int) -> str:
    return "mean of heads" if head == 0 else f"head {head}"


def _cross_chart(ctx: Context, step, step_no: int, layer: int, head: int, title: str = ""):
    """Where step `step_no` looked in the source: one decoder layer's cross-attention, one head or their mean
    (1-based layer; head 0 = mean of heads)."""
    cross = step.cross[layer - 1]  # (h, s) this step's query over the source
    weights = cross.mean(0) if head == 0 else cross[head - 1]
    which = "" if ctx.present and not title else f"step {step_no}: "  # presenter mode: the slider says the step
    return cached(step_cross_attention_figure, weights, ctx.result.source.axis_tokens,
                  title=title + which + f"cross-attention, layer {layer}, {_head_words(head)}",
                  width_px=PAGE_WIDTH_PX // 2)


def _side_by_side(ctx: Context) -> None:
    """Step n of side A beside step n of side B: candidates, then where that step looked."""
    ss, sides = st.session_state, (ctx, ctx.other)
    n = max(len(c.result.steps) for c in sides)
    if n == 0:
        st.info("Neither side wrote anything to decode.")
        return
    ss["dec_step"] = _step_no(ss.get("dec_step"), n)
    c0, c1 = st.columns(2)  # the layer and head boxes need half the page at 1280 px ("mean of heads")
    step_no = c0.slider("Step", 1, n, key="dec_step", persist_state="session") if n > 1 else 1
    layer, head = _layer_head(ctx.cfg if ctx.cfg.n_decoder_layers <= ctx.other.cfg.n_decoder_layers else ctx.other.cfg,
                              c1)
    for c, col, tag in zip(sides, st.columns(2), "AB"):
        with col:
            steps = c.result.steps
            st.markdown(f"**{md_escape(c.label)}**")
            if step_no > len(steps):
                st.info(f"Side {tag} finished after {len(steps)} steps: {md_escape(c.result.text) or '∅'}")
                continue
            step = steps[step_no - 1]
            st.markdown(f"Step {step_no} of {len(steps)}. Read: **{md_escape(' '.join(step.prefix_tokens))}** · "
                        f"chose **{md_escape(step.chosen_token)}** (p = {step.chosen_prob:.3f})")
            labels, probs, chosen = step.candidates()
            chart(st, cached(candidates_figure, labels, probs, chosen, title=f"{tag}, step {step_no}: candidates"),
                      width="stretch", config=fig_config(c, f"decoding_step{step_no}_candidates"),
                      key=f"cands_{tag}")
            csv_button(f"{tag}: step {step_no} candidates (CSV)",
                       lambda labels=labels, probs=probs, chosen=chosen: candidates_csv(labels, probs, chosen), c,
                       f"decoding_step{step_no}_candidates", f"csv_cands_{tag}")
            if c.cfg.n_heads < head or c.cfg.n_decoder_layers < layer:
                st.info(f"Side {tag}'s model has no layer {layer}, head {head}.")
                continue
            _cross_figure(c, step, step_no, layer, head, f"step_cross_{tag}", title=f"{tag}, ")


# Rows of the attribution figure: method -> its label (Attribution.definitions says what each one is).
ATTRIBUTION_ROWS = {"cross_attention": "cross-attention (last layer, mean of heads)", "rollout": "attention rollout",
                    "relevance": "gradient-weighted relevance", "input_x_grad": "input × gradient",
                    "alti": "ALTI+ (the source's part)"}
ALTI_DEFINITION = ("each attention block's contributions (Ferrando et al. 2022) rolled out through the network; the "
                   "source tokens' shares of the token, scaled to sum to 1 (its source share is on the This step part)")


def _attribution(ctx: Context, steps: list) -> None:
    """Which source words the chosen step's token came from, by each attribution method."""
    ss = st.session_state
    step_no = _step_no(ss.get("dec_step"), len(steps))
    step = steps[step_no - 1]
    if not ctx.present:  # the figure's title says it
        st.markdown(f"#### Where step {step_no}'s **{md_escape(step.chosen_token)}** came from")
    res, methods, fig = _attribution_chart(ctx, steps, step_no)
    chart(st, fig, width="stretch", config=fig_config(ctx, f"decoding_step{step_no}_attribution"), key="attribution")
    if not ctx.present:
        st.caption("Each row sums to 1 over the source tokens, so the methods can be compared cell by cell; the step "
                   "slider above chooses the token. Computed by teacher-forcing the model along the decoding shown "
                   "(" + md_escape(ctx.shows) + "), which gives the same prefixes it read while decoding. "
                   + " ".join(f"**{ATTRIBUTION_ROWS[m]}**: {md_escape(_definition(res, m))}" for m in methods)
                   + " How faithful each method is on a model (removing the top-ranked word vs a random one): "
                     "`python -m model.attribution --checkpoint DIR`.")


def _attribution_chart(ctx: Context, steps: list, step_no: int):
    """(the attribution of step `step_no`'s token, its methods, the figure): one row per method."""
    step = steps[step_no - 1]
    # Token step_no - 1 (0-based) is the one chosen at step step_no; the result holds that row only.
    res = attribution(ctx.key, ctx.text, tuple(s.chosen_token for s in steps), (step_no - 1,))
    methods = [m for m in ATTRIBUTION_ROWS if m in res.matrices]
    shares = [res.matrices[m][0] for m in methods]
    total = carried_record(ctx).alti["total"][-1]  # (T, S + T) after the last decoder layer
    s = len(res.src_tokens)
    if total.shape[1] - total.shape[0] == s and step_no - 1 < len(total):
        source = total[step_no - 1, :s]
        methods.append("alti")
        shares.append(source / max(float(source.sum()), 1e-12))
    signed = res.signed.get("input_x_grad")
    notes = [[(f"signed: {signed[0, j]:+.3f} nats of log p" if m == "input_x_grad" and signed is not None else "")
              for j in range(len(res.src_tokens))] for m in methods]
    return res, methods, cached(attribution_figure, shares, [ATTRIBUTION_ROWS[m] for m in methods], res.src_tokens,
                                f"step {step_no}: attribution of “{step.chosen_token}”", hover_notes=notes,
                                width_px=PAGE_WIDTH_PX)


def _source_share_chart(ctx: Context, steps: list, step_no: int):
    """(each step's source share (T,), the strip's figure with step `step_no` highlighted)."""
    share = carried_record(ctx).alti["source_share"]  # (T,) one per decoder row, each predicting a step's token
    tokens = [s.chosen_token for s in steps][: len(share)]
    return share, cached(source_share_figure, tokens, share[: len(tokens)], step_no - 1)


def _definition(res, method: str) -> str:
    if method == "alti":
        return ALTI_DEFINITION
    # model/ names the array that keeps input × gradient's sign; here the hover shows it
    return res.definitions[method].replace("(signed values in `signed`)", "(the hover gives the signed value)")


def _all_steps(steps: list) -> None:
    st.markdown("#### All steps")
    rows = [{"step": i + 1, "prefix": " ".join(s.prefix_tokens), "chosen": s.chosen_token, "prob": s.chosen_prob}
            for i, s in enumerate(steps)]
    table(decoding_rows(rows), "all steps", right=("step", "prob"))


def _greedy_and_beam(ctx: Context) -> None:
    ss = st.session_state
    st.markdown("#### Greedy and beam search")
    beam = int(ss.get("beam", 5))
    # Beam search runs only when asked for, or when the figures already trace it (it was a third of the
    # server's work for every first visit of this page).
    if ctx.mode != "beam" and not st.toggle(f"Run beam search (beam {beam}) and compare", key="dec_beam",
                                            persist_state="session"):
        st.caption("Beam search keeps the best few partial translations at each step; switch it on to see what it "
                   "returns for this sentence beside the greedy output.")
        return
    g = trace_sentence(ctx.key, ctx.text, ctx.max_len)
    b = beam_translation(ctx.key, ctx.text, beam, ctx.max_len)
    # Say which column the figures trace (ctx.mode): a forced prefix is neither plain greedy nor beam search, so
    # it gets a column of its own beside the two it is compared with.
    forced = ctx.mode == "forced"
    columns = st.columns(3 if forced else 2)
    if forced:
        columns[0].markdown(f"**{md_escape(ctx.shows[:1].upper() + ctx.shows[1:])}** ({ctx.result.seconds * 1000:.0f} "
                            f"ms, traced: the figures show this)  \n{md_escape(ctx.result.text) or '∅'}")
    greedy_note = ("traced: the figures show this" if ctx.mode == "greedy"
                   else "without your forcing" if forced else "not traced")
    columns[-2].markdown(f"**Greedy** ({g.seconds * 1000:.0f} ms, {greedy_note})  \n{md_escape(g.text) or '∅'}")
    beam_note = ", traced: the figures show this" if ctx.mode == "beam" else ""
    cut = "" if b.finished else f"  \n(stopped at the length limit before `{ctx.facts['end_token']}`)"
    columns[-1].markdown(f"**Beam search, beam {beam}** ({b.seconds * 1000:.0f} ms{beam_note})  \n"
                         f"{md_escape(b.text) or '∅'}{cut}")
    st.caption("Beam search keeps the best few partial translations at each step and returns the one with the highest "
               "length-normalised log-probability. The beam size is set in the sidebar's decoding options, where you "
               "can also choose which of the two the figures trace"
               + ("; undo the forcing to trace greedy or beam search again." if forced else "."))
