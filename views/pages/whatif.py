"""What if: change the sentence and see what moves (a minimal pair), switch one head off (knockout), or copy one
component from the sentence into its changed twin (activation patching).

Sentence A is the sidebar's (its translation is the header's); sentence B is typed here (URL `pair`), and until
then is a copy of A that follows it (left out of the link). Knockout and patching are teacher-forced on the
translation shown in the header; patching runs B (corrupted) with one component of A's run (clean) copied in.
The parts' figures are in viz/lab.py, their numbers in model/analysis/patch.py and pairs.py, reached through the
door.
"""
from __future__ import annotations

import streamlit as st

from model.analysis import pairs
from views.parts import lab_parts
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, fig_config, kind_layer_head, sections, shows_caption
from views.plumbing.figcache import cached
from views.plumbing.state import Context, traced_decoding
from viz.compare import Side, side_by_side_figure
from viz.heads import head_name
from viz.lab import pair_difference_figure
from viz.layout import PAGE_WIDTH_PX
from viz.theme import BLOCK_GAP_PX, TEXT_LINE_PX, below_controls

# Pairs that teach something, each with the same number of tokens for the shipped model, so patching runs too.
# What the model does with them is computed on the page, never promised here.
# The labels say what changes (short enough for the box); whether the model notices is for the page to show.
EXAMPLE_PAIRS = {
    "singular → plural": ("Ein Mann spielt Gitarre.", "Zwei Männer spielen Gitarre."),
    "der → das (gender)": ("Der Junge spielt Fußball.", "Das Mädchen spielt Fußball."),
    "den → der (case: who sees whom)": ("Die Frau sieht den Hund.", "Die Frau sieht der Hund."),
    "word order (roles swapped)": ("Der Mann hält das Kind.", "Das Kind hält den Mann."),
    "negation (ein → kein)": ("Ein Mann fährt ein Fahrrad.", "Ein Mann fährt kein Fahrrad."),
    "an adjective (brown → black)": ("Ein brauner Hund rennt im Schnee.", "Ein schwarzer Hund rennt im Schnee."),
}
# The page's parts (presenter mode shows one at a time): a figure each, the minimal pair's lines with the first.
PARTS = ["A and B", "B − A", "knockout", "one head off", "patching: heads", "patching: positions"]
B_PARTS = ("A and B", "B − A", "patching: heads", "patching: positions")  # the parts that read sentence B
MARK = "orange-background"  # a changed token: coloured and bold (the colour is not the only sign)
# A pair sharing fewer of its source tokens than this (pairs.shared_tokens) is no minimal pair: the page says so.
MINIMAL_SHARE = 0.5
WARNING_PX = 96  # presenter mode: a one-line warning box and the gap after it (Chromium, 1280×720)
SET_A = "_lab_set_a"  # the sentence a pair or the swap just wrote into the sidebar, said once by the page


def _new_pair(a: str, b: str) -> None:
    ss = st.session_state
    if a != ss.get("text"):  # the sidebar's sentence changes under the user's eyes: the page says so
        ss[SET_A] = a
    ss["text"], ss["pair"] = a, b  # a B equal to A is A's copy (sentence_b)
    ss["prefix"], ss["dec_step"] = (), 1  # a new sentence starts from plain decoding, as the sidebar's does


def _use_example() -> None:
    chosen = EXAMPLE_PAIRS.get(st.session_state.get("lab_example") or "")
    if chosen:
        _new_pair(*chosen)
        st.session_state["lab_patch"] = True  # the examples are there to be patched


def _swap() -> None:
    """A becomes B and B becomes A (patching then runs the other way round)."""
    ss = st.session_state
    _new_pair(ss["pair"] or ss["text"], ss["text"])


def _edit_b() -> None:
    """The user typed sentence B: it is theirs from now on (unless it equals A: then it follows A again)."""
    st.session_state["pair"] = st.session_state["pair_box"]


def sentence_b(a: str) -> str:
    """Sentence B: the user's (URL `pair`: typed, a link's, an example's), or a copy of sentence A that follows A.

    While B follows A, `pair` is empty and the link leaves it out. A B equal to A (surrounding spaces aside), or an
    empty one, is that copy: typing A's sentence into B, or changing A into B's sentence, makes B follow A again."""
    ss = st.session_state
    own = ss.get("pair") or ""
    if not own.strip() or own.strip() == a.strip():
        ss["pair"] = ""
        return a
    return own


def render(ctx: Context) -> None:
    """The What if page: sentence B, the minimal pair, head knockout and activation patching."""
    text_b = sentence_b(ctx.text)
    if not ctx.present:  # presenter mode: sentence B's row stands above the part that reads it
        st.subheader("What if")
        st.caption("Change the sentence, switch a head off, or copy one part of the model's computation from sentence "
                   "A into sentence B, and measure what changes. A is the sentence in the sidebar; B is typed below "
                   "(it follows A until you change it).")
        _sentence_b(ctx, text_b)
        _unrelated(ctx, text_b)
        shows_caption(ctx)  # which decoding A's figures show, and the knockout and patching are forced on
    tokens = lab_parts.scored_tokens(ctx)
    with choices(ctx):
        kind, layer, head, token = _controls(ctx, tokens)
        show = sections(ctx, PARTS)
    rows, extra = 0, 0  # presenter mode: B's row where the part reads B, above the figures
    if ctx.present and any(show(p) for p in B_PARTS):
        _sentence_b(ctx, text_b)
        rows, extra = 1, _unrelated(ctx, text_b)
    with below_controls(rows=rows, extra_px=extra):  # the figures fit below all of it on a 1280×720 screen
        _minimal_pair(ctx, text_b, kind, layer, head, show, (rows, extra))
        lab_parts.knockout(ctx, tokens, token, kind, layer, head, show)
        lab_parts.patching(ctx, tokens, token, text_b, show)


def _unrelated(ctx: Context, text_b: str) -> int:
    """Say, before any figure, when A and B share less than MINIMAL_SHARE of their source tokens: they are no
    minimal pair. Returns the height the warning takes in presenter mode (0 when there is none)."""
    b = side_b(ctx, text_b) if text_b != ctx.text else None
    if b is None:
        return 0
    a_tokens, b_tokens = ctx.result.source.axis_tokens, b.result.source.axis_tokens
    shared, longer = pairs.shared_tokens(a_tokens, b_tokens)
    if shared >= MINIMAL_SHARE * longer:
        return 0
    if ctx.present:  # one line on a 1280 px screen
        st.warning(f"No minimal pair: A and B share only {shared} of {longer} tokens (patching compares unrelated "
                   "sentences).")
        return WARNING_PX
    st.warning(f"**A and B are no minimal pair**: they share only {shared} of the {longer} source tokens of the "
               f"longer one ({shared / longer:.0%}; tokens counted with the end token, in any order). The figures "
               "below compare two unrelated sentences, and patching between them does not show what one change "
               "does. To see that, make B a copy of A with a word or two changed (typing A's sentence into B makes "
               "B follow A again), or choose a pair.")
    return 0


def _controls(ctx: Context, tokens: tuple[str, ...]) -> tuple[str, int, int, int | None]:
    """One row: the head the pair's attention and the one-head bars show (kind, layer, head: shared with the
    Attention page), and the log-probability the grids measure; (kind, 0-based layer, 0-based head, token index
    or None for the whole translation)."""
    if ctx.present:  # one row of boxes without labels, in the header's Choose
        heads, measured = st.columns([5, 2], vertical_alignment="bottom")
    else:  # the Attention page's row, then the token box, wide enough for a long token
        heads, (measured, _) = st.container(), st.columns([2, 3])
    with heads:
        kind, layer, head = kind_layer_head(ctx.cfg.n_encoder_layers, ctx.cfg.n_decoder_layers, ctx.cfg.n_heads,
                                            compact=ctx.present)
    with measured:
        token = lab_parts.measured_on(tokens, compact=ctx.present)
    return kind, layer, head, token


def _sentence_b(ctx: Context, text_b: str) -> None:
    """Sentence B's box, the example pairs and the swap, in one row (URL `pair`; an example sets `text` and `pair`).
    Presenter mode: the box and the pairs, without labels."""
    ss = st.session_state
    ss["lab_example"] = next((k for k, v in EXAMPLE_PAIRS.items() if v == (ctx.text, text_b)), "")
    ss["pair_box"] = text_b  # A's copy while B follows A: changing A changes it
    vis = "collapsed" if ctx.present else "visible"
    # presenter mode: the box and the pairs only (the swap button is taller than a row of boxes)
    # the swap's column: its label whole beside an open sidebar at 1280 px
    cols = st.columns([3, 2] if ctx.present else [4, 3, 2], vertical_alignment="bottom")
    c1, c2 = cols[:2]
    c1.text_input(f"Sentence B (A changed; {ctx.langs['src_name']})", key="pair_box", on_change=_edit_b,
                  persist_state="session",
                  max_chars=5000, label_visibility=vis,
                  help="Edit one word (or anything) of sentence A; Enter applies it. Until you change it, B is a "
                       "copy of A that follows the sidebar's sentence. Activation patching needs A and B to have the "
                       "same number of tokens.")
    c2.selectbox("…or a pair that teaches something", [""] + list(EXAMPLE_PAIRS), key="lab_example",
                 on_change=_use_example, format_func=lambda k: k or "choose a pair", label_visibility=vis,
                 help="Sets sentence A in the sidebar and sentence B here.")
    if not ctx.present:
        cols[2].button("Swap A and B", on_click=_swap, key="lab_swap", width="stretch", disabled=not ss["pair"],
                  help="B becomes the sidebar's sentence (clean, its translation scored) and A the changed one.")
    set_a = ss.pop(SET_A, None)
    if set_a is not None:
        said = f"The sidebar's sentence is now this pair's A: “{md_escape(set_a)}”"
        if ctx.present:  # a toast: a line here would push the figure below a 720 px screen
            st.toast(said)
        else:
            st.caption(said)


def side_b(ctx: Context, text_b: str):
    """Sentence B decoded as A is (greedy or beam search; A's forced prefix is A's own), or None if unreadable."""
    ss = st.session_state
    if not text_b.strip():
        return None
    traced = traced_decoding(ctx.key, text_b, ss["decoding"], ss["beam"], ctx.max_len)
    return traced if traced.result.source.tokens else None


def marked(tokens: list[str], changed: list[bool]) -> str:
    """Tokens as Markdown, the changed ones marked."""
    return " ".join(f":{MARK}[**{md_escape(t)}**]" if c else md_escape(t) for t, c in zip(tokens, changed)) or "∅"


def _minimal_pair(ctx: Context, text_b: str, kind: str, layer: int, head: int, show, fit: tuple[int, int]) -> None:
    """A and B with their changed tokens marked and one head's attention in both ("A and B"), and B − A; `fit`:
    (rows of controls, pixels of warning) above the figures in presenter mode. There, under a warning, the lines
    are left out (every token of an unrelated pair is changed; the figure's titles name both sentences)."""
    if not (show("A and B") or show("B − A")):
        return
    if not ctx.present:
        st.markdown("#### Minimal pair: A and B side by side")
    b = side_b(ctx, text_b)
    if b is None:
        st.info(f"Sentence B has no words the tokenizer can read. Type a {ctx.langs['src_name']} sentence.")
        return
    a_res, b_res = ctx.result, b.result
    src = pairs.align(a_res.source.axis_tokens, b_res.source.axis_tokens)
    out = pairs.align(a_res.decoder_input, b_res.decoder_input)
    lines = show("A and B") and not (ctx.present and fit[1])
    if lines:
        _lines(ctx, b, src, out)
    if src.same:
        st.info("A and B are the same sentence. Change a word of B (or choose a pair above) to see what the change "
                "does to the translation, the attention and the model's computation.")
        return
    if not ctx.present:
        st.caption(f"Marked: tokens without an equal partner in the other sentence: {sum(src.changed_a)} of A's "
                   f"source tokens and {sum(src.changed_b)} of B's; {sum(out.changed_a[1:])} of A's output tokens "
                   f"and {sum(out.changed_b[1:])} of B's. "
                   + ("The translations are the same token for token. " if out.same else "")
                   + "Tokens are matched by their longest common runs (difflib): equal tokens in the same order are "
                   "aligned, a replaced run of the same length position by position; inserted or deleted tokens "
                   "have no partner and are left out of the difference below.")
    above = fit[1] + lines * (2 * TEXT_LINE_PX + BLOCK_GAP_PX)  # presenter: the two output lines, one block
    _attention_pair(ctx, b, text_b, kind, layer, head, show, (fit[0], above))


def _lines(ctx: Context, b, src, out) -> None:
    """A and B, source and output, the changed tokens marked (presenter mode: the outputs only, one line each)."""
    a_res, b_res = ctx.result, b.result
    if ctx.present:  # one block of two lines: the figure keeps the height of the gap between two blocks
        st.markdown("  \n".join(f"**{tag}** → {marked(res.decoder_input[1:], changed[1:])}"
                                for tag, res, changed in (("A", a_res, out.changed_a), ("B", b_res, out.changed_b))))
        return
    cols = st.columns(2)
    for col, tag, res, s_changed, o_changed, shows in ((cols[0], "A", a_res, src.changed_a, out.changed_a, ctx.shows),
                                                       (cols[1], "B", b_res, src.changed_b, out.changed_b, b.shows)):
        col.markdown(f"**{tag}** · {ctx.langs['src']}: {marked(res.source.axis_tokens, s_changed)}  \n"
                     f"→ {ctx.langs['tgt']}: {marked(res.decoder_input[1:], o_changed[1:])}")
        col.caption(f"{md_escape(res.text) or '∅ (empty output)'} · {shows}")


def _attention_pair(ctx: Context, b, text_b: str, kind: str, layer: int, head: int, show,
                    fit: tuple[int, int]) -> None:
    """One head's attention in A and in B, and B − A on the aligned tokens; `fit`: (rows of controls, pixels of
    text) above the first in presenter mode."""
    ta, tb = ctx.result.trace, b.result.trace
    sides, masks = [], []
    for tag, c, t in (("A", ctx.text, ta), ("B", text_b, tb)):
        q, k = t.axes(kind)
        masks.append(t.attn[kind][layer]["mask"])  # (i, j) True = may attend, as the model used it
        sides.append(Side(f"{tag} · {c}"[:48], t.probs(kind)[layer], q, k, masks[-1]))  # (h, i, j)
    if show("A and B"):
        with below_controls(rows=fit[0], extra_px=fit[1]):  # presenter: and the two output lines, if any
            figure = cached(side_by_side_figure, sides[0], sides[1], kind, layer, [head], width_px=PAGE_WIDTH_PX)
        chart(st, figure, width="stretch", config=fig_config(ctx, f"whatif_pair_{kind}_L{layer + 1}_H{head + 1}"),
              key="pair_fig")
    if not show("B − A"):
        return
    rows = pairs.align(sides[0].query_tokens, sides[1].query_tokens)
    keys = pairs.align(sides[0].key_tokens, sides[1].key_tokens)
    diff, mask = pairs.aligned_difference(sides[0].probs[head], sides[1].probs[head], rows, keys, *masks)
    where = [[f"A: query {ra}, key {ka} · B: query {rb}, key {kb}" for ka, kb in keys.pairs] for ra, rb in rows.pairs]
    chart(st, cached(pair_difference_figure, diff, pairs.pair_labels(sides[0].query_tokens, sides[1].query_tokens,
                                                                       rows.pairs),
                     pairs.pair_labels(sides[0].key_tokens, sides[1].key_tokens, keys.pairs), kind, mask=mask,
                     where=where, title=f"B − A: {head_name(kind, layer, head)}, on the aligned tokens",
                     width_px=PAGE_WIDTH_PX),
          width="stretch", config=fig_config(ctx, f"whatif_pair-difference_{kind}_L{layer + 1}_H{head + 1}"),
          key="pair_diff_fig")
    if not ctx.present:
        biggest = pairs.strongest({"cell": diff if mask is None else abs(diff) * mask}, 1)
        moved = (f" The largest change: {abs(float(diff[biggest[0][1], biggest[0][2]])):.3f} of a row's weight of 1."
                 if biggest and biggest[0][3] else " No aligned weight changed.")
        st.caption(f"Each side is decoded and traced on its own ({md_escape(ctx.shows)} for A); the difference is B's "
                   "weight minus A's for each pair of aligned query and key tokens, on a diverging scale: the "
                   "positive colour where B attends more, the negative one where it attends less, white where "
                   "nothing changed." + moved)
