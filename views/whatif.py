"""What if: change the sentence and see what moves (a minimal pair), switch one head off (knockout), or copy one
component from the sentence into its changed twin (activation patching).

Sentence A is the sidebar's (its translation is the header's); sentence B is typed here (URL `pair`). Knockout and
patching are teacher-forced on the translation shown in the header; patching runs B (corrupted) with one
component of A's run (clean) copied in. The parts' figures are in viz/lab.py, their numbers in
model/analysis/patch.py and pairs.py, reached through the door.
"""
from __future__ import annotations

import streamlit as st

from model import service
from views import lab_parts
from views.figcache import cached
from views.state import Context, traced_decoding
from views.text import md_escape
from views.widgets import chart, fig_config, kind_layer_head, sections, shows_caption
from viz.compare import Side, side_by_side_figure
from viz.heads import head_name
from viz.lab import pair_difference_figure
from viz.layout import PAGE_WIDTH_PX
from viz.theme import TEXT_LINE_PX, below_controls

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
MARK = "orange-background"  # a changed token: coloured and bold (the colour is not the only sign)


def _new_pair(a: str, b: str) -> None:
    ss = st.session_state
    ss["text"], ss["pair"] = a, b
    ss["prefix"], ss["dec_step"] = (), 1  # a new sentence starts from plain decoding, as the sidebar's does


def _use_example() -> None:
    chosen = EXAMPLE_PAIRS.get(st.session_state.get("lab_example") or "")
    if chosen:
        _new_pair(*chosen)
        st.session_state["lab_patch"] = True  # the examples are there to be patched


def _swap() -> None:
    """A becomes B and B becomes A (patching then runs the other way round)."""
    ss = st.session_state
    _new_pair(ss["pair"], ss["text"])


def render(ctx: Context) -> None:
    ss = st.session_state
    if not (ss.get("pair") or "").strip():
        ss["pair"] = ctx.text  # B starts as A: change a word of it
    if not ctx.present:  # presenter mode: the pair comes from the link, the screen holds the figure
        st.subheader("What if")
        st.caption("Change the sentence, switch a head off, or copy one part of the model's computation from sentence "
                   "A into sentence B, and measure what changes. A is the sentence in the sidebar; B is typed below.")
        _sentence_b(ctx)
        shows_caption(ctx)  # which decoding A's figures show, and the knockout and patching are forced on
    text_b = ss["pair"]
    tokens = lab_parts.scored_tokens(ctx)
    kind, layer, head, token = _controls(ctx, tokens)
    show = sections(ctx, PARTS)
    _minimal_pair(ctx, text_b, kind, layer, head, show)
    lab_parts.knockout(ctx, tokens, token, kind, layer, head, show)
    lab_parts.patching(ctx, tokens, token, text_b, show)


def _controls(ctx: Context, tokens: tuple[str, ...]) -> tuple[str, int, int, int | None]:
    """One row: the head the pair's attention and the one-head bars show (kind, layer, head: shared with the
    Attention page), and the log-probability the grids measure; (kind, 0-based layer, 0-based head, token index
    or None for the whole translation)."""
    if ctx.present:  # one row of boxes without labels: the screen keeps its height for the figure
        heads, measured = st.columns([5, 2], vertical_alignment="bottom")
    else:  # the Attention page's row, then the token box, wide enough for a long token
        heads, (measured, _) = st.container(), st.columns([2, 3])
    with heads:
        kind, layer, head = kind_layer_head(ctx.cfg.n_encoder_layers, ctx.cfg.n_decoder_layers, ctx.cfg.n_heads,
                                            compact=ctx.present)
    with measured:
        token = lab_parts.measured_on(tokens, compact=ctx.present)
    return kind, layer, head, token


def _sentence_b(ctx: Context) -> None:
    """Sentence B's box and the example pairs (URL `pair`; an example sets `text` and `pair`)."""
    ss = st.session_state
    ss["lab_example"] = next((k for k, v in EXAMPLE_PAIRS.items() if v == (ctx.text, ss["pair"])), "")
    c1, c2, c3 = st.columns([6, 4, 2], vertical_alignment="bottom")
    c1.text_input(f"Sentence B (A changed; {ctx.langs['src_name']})", key="pair", persist_state="session",
                  max_chars=2000, help="Edit one word (or anything) of sentence A; Enter applies it. Activation "
                                       "patching needs A and B to have the same number of tokens.")
    c2.selectbox("…or a pair that teaches something", [""] + list(EXAMPLE_PAIRS), key="lab_example",
                 on_change=_use_example, format_func=lambda k: k or "choose a pair",
                 help="Sets sentence A in the sidebar and sentence B here.")
    c3.button("Swap A and B", on_click=_swap, key="lab_swap", width="stretch",
              help="B becomes the sidebar's sentence (clean, its translation scored) and A the changed one.")


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


def _minimal_pair(ctx: Context, text_b: str, kind: str, layer: int, head: int, show) -> None:
    """A and B with their changed tokens marked and one head's attention in both ("A and B"), and B − A."""
    if not (show("A and B") or show("B − A")):
        return
    if not ctx.present:
        st.markdown("#### Minimal pair: A and B side by side")
    b = side_b(ctx, text_b)
    if b is None:
        st.info(f"Sentence B has no words the tokenizer can read. Type a {ctx.langs['src_name']} sentence.")
        return
    a_res, b_res = ctx.result, b.result
    src = service.align(a_res.source.axis_tokens, b_res.source.axis_tokens)
    out = service.align(a_res.decoder_input, b_res.decoder_input)
    if show("A and B"):
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
    _attention_pair(ctx, b, text_b, kind, layer, head, show)


def _lines(ctx: Context, b, src, out) -> None:
    """A and B, source and output, the changed tokens marked (presenter mode: the outputs only, one line each)."""
    a_res, b_res = ctx.result, b.result
    if ctx.present:
        for tag, res, changed in (("A", a_res, out.changed_a), ("B", b_res, out.changed_b)):
            st.markdown(f"**{tag}** → {marked(res.decoder_input[1:], changed[1:])}")
        return
    cols = st.columns(2)
    for col, tag, res, s_changed, o_changed, shows in ((cols[0], "A", a_res, src.changed_a, out.changed_a, ctx.shows),
                                                       (cols[1], "B", b_res, src.changed_b, out.changed_b, b.shows)):
        col.markdown(f"**{tag}** · {ctx.langs['src']}: {marked(res.source.axis_tokens, s_changed)}  \n"
                     f"→ {ctx.langs['tgt']}: {marked(res.decoder_input[1:], o_changed[1:])}")
        col.caption(f"{md_escape(res.text) or '∅ (empty output)'} · {shows}")


def _attention_pair(ctx: Context, b, text_b: str, kind: str, layer: int, head: int, show) -> None:
    """One head's attention in A and in B, and B − A on the aligned tokens."""
    ta, tb = ctx.result.trace, b.result.trace
    sides, masks = [], []
    for tag, c, t in (("A", ctx.text, ta), ("B", text_b, tb)):
        q, k = t.axes(kind)
        masks.append(t.attn[kind][layer]["mask"])  # (i, j) True = may attend, as the model used it
        sides.append(Side(f"{tag} · {c}"[:48], t.probs(kind)[layer], q, k, masks[-1]))  # (h, i, j)
    if show("A and B"):
        with below_controls(rows=2, extra_px=2 * TEXT_LINE_PX):  # presenter: the two output lines above it
            figure = cached(side_by_side_figure, sides[0], sides[1], kind, layer, [head], width_px=PAGE_WIDTH_PX)
        chart(st, figure, width="stretch", config=fig_config(ctx, f"whatif_pair_{kind}_L{layer + 1}_H{head + 1}"),
              key="pair_fig")
    if not show("B − A"):
        return
    rows = service.align(sides[0].query_tokens, sides[1].query_tokens)
    keys = service.align(sides[0].key_tokens, sides[1].key_tokens)
    diff, mask = service.aligned_difference(sides[0].probs[head], sides[1].probs[head], rows, keys, *masks)
    where = [[f"A: query {ra}, key {ka} · B: query {rb}, key {kb}" for ka, kb in keys.pairs] for ra, rb in rows.pairs]
    chart(st, cached(pair_difference_figure, diff, service.pair_labels(sides[0].query_tokens, sides[1].query_tokens,
                                                                       rows.pairs),
                     service.pair_labels(sides[0].key_tokens, sides[1].key_tokens, keys.pairs), kind, mask=mask,
                     where=where, title=f"B − A: {head_name(kind, layer, head)}, on the aligned tokens",
                     width_px=PAGE_WIDTH_PX),
          width="stretch", config=fig_config(ctx, f"whatif_pair-difference_{kind}_L{layer + 1}_H{head + 1}"),
          key="pair_diff_fig")
    if not ctx.present:
        biggest = service.strongest({"cell": diff if mask is None else abs(diff) * mask}, 1)
        moved = (f" The largest change: {abs(float(diff[biggest[0][1], biggest[0][2]])):.3f} of a row's weight of 1."
                 if biggest and biggest[0][3] else " No aligned weight changed.")
        st.caption(f"Each side is decoded and traced on its own ({md_escape(ctx.shows)} for A); the difference is B's "
                   "weight minus A's for each pair of aligned query and key tokens, on a diverging scale: the "
                   "positive colour where B attends more, the negative one where it attends less, white where "
                   "nothing changed." + moved)
