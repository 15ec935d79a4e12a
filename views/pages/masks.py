"""Masks: the padding mask in a batch, the causal mask, and what goes wrong without them.

Every mask drawn here is the one the model recorded in its trace, never one rebuilt from tokens.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from model.analysis.experiments import weight_on_keys
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, fig_config, layer_head, panel_group, sections, table
from views.plumbing.figcache import cached
from views.plumbing.state import Context, causal_experiment, padded_batch, reference_tokens
from views.plumbing.urlstate import within
from viz.layout import PAGE_WIDTH_PX
from viz.masks import causal_figure, padding_figure, window_figure
from viz.theme import theme
from viz.token_axes import panels_that_fit

SHIFT_TOLERANCE = 1e-4  # float32 rounding of the same computation stays far below this
_PROBS = ("p(ref), on", "p(ref), off", "weight on later")  # the table's number columns, 3 decimals


def _padding(ctx: Context) -> None:
    if not ctx.present:  # presenter mode: the controls and the figures, which keep the screen's height
        # The heading and its paragraph as one Markdown element: each element costs the browser a render and a
        # Markdown parser of its own on every visit.
        st.markdown("### Padding mask\n\nTraining runs on batches of inputs, so shorter ones are filled up with "
                    "`<pad>` tokens. The padding mask hides the pads **as keys** (columns): no real token takes "
                    "information from them. Pad positions are still **queries** (rows) and compute attention of "
                    "their own, which is simply never used.")
    with choices(ctx):  # presenter: the toggle, layer and head in one row
        row = st.columns([2, 1, 1], vertical_alignment="center") if ctx.present else None
        use_mask = (row[0] if row else st).toggle("Padding mask on", key="pad_on", persist_state="session")
    on, demo = _padding_data(ctx, use_mask)
    tr = demo["trace"]
    partner = ("Batched with: " + md_escape(" ".join(demo["partner_tokens"]))
               + " · Encoder side: the same for every decoding.")
    if not ctx.present:  # presenter mode: below the figures
        st.caption(partner)
    with choices(ctx):
        layer, head = layer_head(ctx.cfg.n_encoder_layers, ctx.cfg.n_heads, "pad", ctx.present,
                                 row[1:3] if row else None)
    probs = tr.attn["enc_self"][layer]["probs"][head]  # (s, s) with pad rows and columns
    # (s,) key columns the padding mask hides: from every query (a local layer's window hides a real key from
    # the far queries only)
    pads = ~on["trace"].attn["enc_self"][layer]["mask"].any(0)
    tokens = demo["trace"].src_tokens
    # the weights' panel takes three fifths of the row, the mask's two: the narrower labels its keys as two of them
    only = panel_group(ctx, ["the weights", "the mask"], panels_that_fit(2, tokens, tokens, int(PAGE_WIDTH_PX * 0.8)))
    chart(st, _padding_chart(demo, layer, head, use_mask, only), width="stretch", key="pad_attn",
          config=fig_config(ctx, f"masks_padding_L{layer + 1}_H{head + 1}_mask-{'on' if use_mask else 'off'}"))
    if ctx.present:
        st.caption(partner)
    _local_note(ctx, "encoder", layer)
    leak = weight_on_keys(probs, ~pads, pads)
    m1, m2 = st.columns(2)
    m1.metric("weight real tokens give to pads", f"{leak:.3f}",
              help="Mean over the real query rows of this head of the total weight on `<pad>` keys.")
    m2.metric("encoder output change", f"{demo['encoder_shift']:.1e}",
              help="max |difference| of the encoder output over the real positions, padded batch vs. the sentence "
                   "alone; around 1e-6 is float rounding")
    st.markdown(f"Alone: **{md_escape(demo['alone'])}**  \nIn the padded batch: **{md_escape(demo['padded'])}**  \n"
                "(both greedy" + (f", at most {ctx.max_len} tokens as chosen in the sidebar)" if ctx.max_len else ")"))
    moved = demo["encoder_shift"] > SHIFT_TOLERANCE
    changed = demo["alone"] != demo["padded"]
    if use_mask:
        st.caption(f"With the mask, the pads get {leak:.3f} of the real tokens' weight in this head and the encoder "
                   f"output moves by {demo['encoder_shift']:.1e}: " +
                   ("float rounding only." if not moved else "more than float rounding."))
    else:
        st.warning(f"Without the mask, real tokens give {leak:.3f} of their weight to pads in this head; the encoder "
                   f"output {'moves by ' + format(demo['encoder_shift'], '.1e') if moved else 'barely moves'} just "
                   "because the sentence shares a batch with a longer one, and its translation "
                   + ("changes." if changed else "stays the same here."))


def _causal(ctx: Context) -> None:
    if not ctx.present:  # presenter mode: the controls and the three figures in one row
        st.markdown(f"### Causal mask\n\nWhen a decoder is trained, the whole reference ({ctx.langs['tgt_name']}) "
                    "is fed in at once (teacher forcing). The causal mask stops position i from seeing positions "
                    "after i; otherwise it could read the very token it is asked to predict.")
    if not ctx.result.raw_tokens:
        st.info("The translation is empty, so there is no decoder sequence to mask.")
        return
    reference, on, off, exp = _causal_data(ctx)
    forced = f"Teacher-forced on {md_escape(reference)}."
    if not ctx.present:
        st.caption(forced)
    with choices(ctx):
        layer, head = layer_head(ctx.cfg.n_decoder_layers, ctx.cfg.n_heads, "causal", ctx.present)
    # The mask and both heatmaps are one figure of three panels, the explanation under it.
    only = panel_group(ctx, ["the mask", "with it", "without it"], panels_that_fit(3, on.tgt_tokens, on.tgt_tokens))
    chart(st, _causal_chart(on, off, layer, head, only), width="stretch", key="causal",
          config=fig_config(ctx, f"masks_causal_L{layer + 1}_H{head + 1}"))
    st.markdown("Blue cells may be attended to: the lower triangle and the diagonal. Grey cells are set to −∞ "
                "before the softmax, so they get weight exactly 0. Row i is the step that predicts token i+1; "
                "the cell right of the diagonal holds that very token.")
    _local_note(ctx, "decoder", layer)
    if ctx.present:
        st.caption(forced)
    rows = [{c: f"{v:.3f}" if c in _PROBS else v for c, v in row.items()} for row in exp.rows]
    table(rows, "the causal mask's effect", right=_PROBS, scroll=False)
    never = " or ".join(md_escape(t) for t in dict.fromkeys((ctx.facts["start_token"], "<pad>")))
    st.caption("reference next: the token each position must predict (the next token of the reference); top: the most "
               f"probable next token among those decoding can write (never {never}); p(ref): the probability of the "
               "reference token among those; weight on later: self-attention on later positions without the mask "
               "(mean of layers and heads).\n\n"
               + md_escape(exp.summary()) + " A model trained without the mask could learn to copy the next input "
               "token (its training loss would look excellent) and then fail at generation, where no later tokens "
               "exist.")


def _padding_data(ctx: Context, use_mask: bool) -> tuple[dict, dict]:
    """(the padded batch with the mask on, the one shown: with the mask on or off)."""
    on = padded_batch(ctx.key, ctx.text, True, ctx.max_len)
    return on, on if use_mask else padded_batch(ctx.key, ctx.text, False, ctx.max_len)


def _padding_chart(demo: dict, layer: int, head: int, use_mask: bool, only: list[int] | None = None):
    """One encoder head's weights in the padded batch beside the mask the model used: one figure, one chart to draw
    on a first visit (0-based layer and head; ``only``: the panels drawn, all by default)."""
    rec = demo["trace"].attn["enc_self"][layer]  # (s, s) with pad rows and columns; the mask the model used
    return cached(padding_figure, rec["probs"][head], rec["mask"], demo["trace"].src_tokens,
                  title=f"encoder self-attention, layer\u00a0{layer + 1}, head\u00a0{head + 1}, mask "
                        + ("on" if use_mask else "OFF"),
                  mask_title="mask the model used (blue\u00a0=\u00a0may\u00a0attend)",
                  only=None if only is None or len(only) == 2 else tuple(only))


def _causal_data(ctx: Context):
    """(what the decoder is teacher-forced on, the trace with the causal mask, the one without, the comparison)."""
    tokens, ended, reference = reference_tokens(ctx.key, ctx.text, tuple(ctx.result.raw_tokens), ctx.result.finished)
    return (reference, *causal_experiment(ctx.key, ctx.text, tuple(tokens), reference, ended))


def _causal_chart(on, off, layer: int, head: int, only: list[int] | None = None):
    """The causal mask the model used, one decoder head with it and without it: one figure (0-based layer, head;
    ``only``: the panels drawn, all by default)."""
    rec_on, rec_off = on.attn["dec_self"][layer], off.attn["dec_self"][layer]
    return cached(causal_figure, rec_on["mask"], rec_on["probs"][head], rec_off["probs"][head], rec_off["mask"],
                  on.tgt_tokens, **(dict(  # a projector's panels a third of the screen wide: one line each
                      mask_title="causal mask (blue\u00a0=\u00a0may\u00a0attend)", on_title="with the mask",
                      off_title="without it") if theme().height_px else dict(
                      mask_title="causal mask the model used (blue\u00a0=\u00a0may\u00a0attend)",
                      on_title=f"with the mask (layer {layer + 1}, head {head + 1})",
                      off_title="without it: the upper triangle may fill")),
                  only=None if only is None or len(only) == 3 else tuple(only))


def ahead(ctx: Context) -> list:
    """What a first visit computes, to be done before it (views/plumbing/ahead.py): the padded batch as the session
    shows it, the causal part's reference and passes, and both figures for the session's layers and heads."""
    ss, cfg = st.session_state, ctx.cfg
    use_mask = ss.get("pad_on", True) is not False
    pad = _index(ss.get("pad_layer"), cfg.n_encoder_layers), _index(ss.get("pad_head"), cfg.n_heads)
    causal = _index(ss.get("causal_layer"), cfg.n_decoder_layers), _index(ss.get("causal_head"), cfg.n_heads)
    calls = [lambda: _padding_chart(_padding_data(ctx, use_mask)[1], *pad, use_mask)]
    return calls + ([lambda: _causal_chart(*_causal_data(ctx)[1:3], *causal)] if ctx.result.raw_tokens else [])


def _index(value, n: int) -> int:
    """A 1-based choice of the session, kept within 1..n as the page's select box keeps it, as a 0-based index."""
    return within(value, 1, n) - 1


def _windowed(cfg) -> dict[str, tuple[int, ...]]:
    """{stack: each layer's window} of the stacks with a sliding-window (local) layer; 0 = a full layer."""
    sides = {"encoder": "enc_self", "decoder": "dec_self"}
    return {sides[s]: w for s in sides if any(w := (cfg.windows(s) if hasattr(cfg, "windows") else ()))}


def _local_note(ctx: Context, stack: str, layer: int) -> None:
    """Under a local layer's figure: its mask is also its sliding window (0-based `layer`)."""
    windows = ctx.cfg.windows(stack) if hasattr(ctx.cfg, "windows") else ()
    if windows and windows[layer]:
        st.caption(f"{stack.capitalize()} layer {layer + 1} is a local layer: the mask it used also hides the keys "
                   f"outside its window of {windows[layer]} (the sliding window, below).")


def _window(ctx: Context) -> None:
    """Local layers (T5Gemma): the sliding window the model recorded beside a global layer's mask."""
    tr, stacks = ctx.result.trace, _windowed(ctx.cfg)
    if not ctx.present:
        windows = [w for side in ("encoder", "decoder") for w in ctx.cfg.windows(side)]
        st.markdown(f"### Sliding window\n\n{sum(map(bool, windows))} of this model's {len(windows)} self-attention "
                    "layers are local: a query sees only the keys within a fixed distance (the window; in the decoder "
                    "only those before it too). A global layer sees every key its mask allows. Cross-attention is "
                    "always global.")
    if ctx.present and len(stacks) > 1:  # a projector's screen holds one stack's pair of masks: the side chosen
        with choices(ctx):
            side = st.radio("Stack", ["src", "tgt"], horizontal=True, key="emb_side", persist_state="session",
                            format_func={"src": "encoder", "tgt": "decoder"}.get)
        stacks = {k: w for k, w in stacks.items() if k == ("enc_self" if side == "src" else "dec_self")}
    for kind, windows in stacks.items():
        local = next(i for i, w in enumerate(windows) if w)
        full = next((i for i, w in enumerate(windows) if not w), None)
        tokens, rec = tr.axes(kind)[0], tr.attn[kind]
        if not tokens:
            continue
        stack = "encoder" if kind == "enc_self" else "decoder"
        local_mask = rec[local]["mask"]
        full_mask = rec[full]["mask"] if full is not None else np.ones_like(local_mask)
        chart(st, cached(window_figure, local_mask, full_mask, tokens, kind,
                         local_title=f"{stack} layer {local + 1}: window {windows[local]}",
                         full_title=(f"{stack} layer {full + 1}: global" if full is not None
                                     else "without a window")), width="stretch",
              config=fig_config(ctx, f"masks_window_{stack}_L{local + 1}"))
        hidden = int((~local_mask).sum() - (~full_mask).sum())
        layers = ", ".join(str(i + 1) for i, w in enumerate(windows) if w)
        st.caption(f"Local {stack} layers: {layers} (window {windows[local]}). " + (
            f"In layer {local + 1} the window hides {hidden} query–key cells (of {local_mask.size}) that the global "
            "layer allows: keys too far from their query." if hidden > 0 else
            f"Your sentence's {len(tokens)} tokens all fit in the window: here the local layers see what the global "
            "ones see (a longer sentence shows the band)."))


def render(ctx: Context) -> None:
    if not ctx.present:
        st.subheader("Masks")
    windowed = bool(_windowed(ctx.cfg))
    with choices(ctx):
        show = sections(ctx, ["padding mask", "causal mask"] + ["sliding window"] * windowed)
    if show("padding mask"):
        _padding(ctx)
    if not ctx.present:
        st.divider()
    if show("causal mask"):
        _causal(ctx)
    if windowed and show("sliding window"):
        if not ctx.present:
            st.divider()
        _window(ctx)
