"""Controls and captions shared by several views, bound to URL state."""
from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import streamlit as st

from views.parts.text import md_escape, md_table
from views.plumbing.figcache import drawable, kept_with
from views.plumbing.state import KINDS, Context, kind_labels
from views.plumbing.urlstate import within
from viz.kinds import languages
from viz.speed import off
from viz.token_axes import panels_that_fit

# Presenter mode: the place of the popover "Choose" at the end of the header's second line
# (views.parts.header.presenter_slots), and the popover once a page has drawn into it; set for the page's run by the
# router. Per run, as the theme: one cached module serves every session.
_CHOOSE: ContextVar = ContextVar("atlas_choose", default=None)


@contextmanager
def choosing_in(place) -> Iterator[None]:
    """Pages drawn inside the block put their pickers into a popover at ``place`` (see :func:`choices`)."""
    token = _CHOOSE.set([place, None] if place is not None else None)
    try:
        yield
    finally:
        _CHOOSE.reset(token)


@contextmanager
def choices(ctx: Context) -> Iterator[None]:
    """Where a page draws its pickers (kind, layer, head, the part to show): in presenter mode, the header's "Choose"
    popover, so the figure takes the screen below two lines; elsewhere, in the page above its figure. A page that
    chooses nothing has no such button."""
    held = _CHOOSE.get() if ctx.present else None
    if held is None:
        yield
        return
    if held[1] is None:
        held[1] = held[0].popover(":material/tune: Choose", width="stretch")
    with held[1]:
        yield


def chart(where, figure, *, details: bool = True, **kwargs) -> None:
    """`where.plotly_chart(figure, **kwargs)` for the app's figures (`where`: st or a container).

    The figures carry their own look (`viz.look`), so Streamlit's theme is off: with it, every chart was drawn
    twice in full each time it appeared (see `viz.transport.browser_json`). The chart's accessible name is its
    text alternative's summary (`viz.alt`, read from the figure's data); below it, "Text description and
    numbers" opens the whole description and the numbers as a table (not in presenter mode, which fits one
    screen; not with ``details=False``, for a chart drawn into an `st.empty` slot again and again)."""
    shown = drawable(figure)
    kept = kept_with(shown)  # its text alternative and thinned-labels note (views/plumbing/figcache.py)
    alt = kept.alt if kept is not None else None
    look = "streamlit" if off("look") else None  # the look switched off: Streamlit's theme styles it in the browser
    where.plotly_chart(shown, theme=look, alt=alt.summary if alt is not None else None, **kwargs)
    if not details:
        return
    thinned = kept.thinned if kept is not None else None
    if thinned:  # the figure's token axes label only some tokens: said under it
        where.caption(thinned)
    if alt is not None and not st.session_state.get("present"):
        described(where, alt, kwargs.get("key"))


def table(rows: list[dict], name: str, right: tuple[str, ...] = (), scroll: bool = True) -> None:
    """A page's table, drawn with the page as Markdown (an HTML table): whole up to ten rows, then scrolling at
    400 px (always whole without `scroll`); the columns in `right` (numbers) are right-aligned. Not st.table: it
    sends an Arrow table that the browser decodes before drawing, converted through pandas and pyarrow on the
    server. Not st.dataframe: a canvas grid whose 1.3 MB of code a first visit would wait for. A scrolling table is
    a region named `name` that the keyboard reaches (Tab) and scrolls (arrow keys), which an st.container of fixed
    height is not."""
    text = md_table(rows, right)
    if len(rows) <= 10 or not scroll:
        st.markdown(text)
        return
    # Every cell is escaped (md_table), so HTML is allowed only for the region around them; the blank lines make
    # the table between them Markdown again.
    st.markdown(f'<div class="atlas-scroll" tabindex="0" role="region" aria-label="{html.escape(name)}">\n\n'
                f"{text}\n\n</div>", unsafe_allow_html=True)


def described(where, alt, key: str | None) -> None:
    """The text alternative `alt` in an expander, drawn only while it is open (its content can be a large table).
    The expander's key follows the chart's, so it stays open when the chart shows another layer or head."""
    name = f"alt_{key}" if key else "alt_" + hashlib.blake2b(alt.summary.encode(), digest_size=8).hexdigest()
    box = where.expander("Text description and numbers", key=name, on_change="rerun")
    if not box.open:
        return
    box.markdown("\n".join(f"- {md_escape(line)}" for line in alt.details))
    for table in alt.tables:
        box.markdown(f"**{md_escape(table.caption)}**")
        box.table(table.frame())


def kind_layer_head(n_enc: int, n_dec: int, n_heads: int, with_head: bool = True,
                    compact: bool = False) -> tuple[str, int, int]:
    """Selectors for attention kind, layer and head; returns (kind, 0-based layer, 0-based head).

    ``compact`` (presenter mode): no labels above the boxes, the options say "layer 2", "head 1" instead."""
    ss = st.session_state
    cols = st.columns([3, 1, 1] if with_head else [3, 1])
    vis = "collapsed" if compact else "visible"
    src, tgt = languages()  # the loaded model's, set by the page's fragment (views/plumbing/router.py)
    labels = kind_labels({"src": src, "tgt": tgt})
    # persist_state: a page runs as a fragment, and a fragment-only run would otherwise let Streamlit forget the
    # value of a widget it did not draw (another page's, or a part presenter mode hides)
    kind = cols[0].selectbox("Attention", list(KINDS), key="kind", persist_state="session", format_func=labels.get,
                             label_visibility=vis)
    n_layers = n_enc if kind == "enc_self" else n_dec
    ss["layer"], ss["head"] = within(ss["layer"], 1, n_layers), within(ss["head"], 1, n_heads)
    layer = cols[1].selectbox("Layer", list(range(1, n_layers + 1)), key="layer", persist_state="session",
                              label_visibility=vis, format_func=(lambda v: f"layer {v}") if compact else str)
    head = cols[2].selectbox("Head", list(range(1, n_heads + 1)), key="head", persist_state="session",
                             label_visibility=vis,
                             format_func=(lambda v: f"head {v}") if compact else str) if with_head else 1
    return kind, layer - 1, head - 1


def layer_head(n_layers: int, n_heads: int, prefix: str, compact: bool = False, cols=None) -> tuple[int, int]:
    """Layer and head selectors with URL keys `{prefix}_layer` / `{prefix}_head`; returns 0-based indices.

    ``compact`` (presenter mode): no labels above the boxes, the options say "layer 2", "head 1"; ``cols``: the two
    columns to draw them in (default: two narrow columns of their own row)."""
    ss = st.session_state
    ss[f"{prefix}_layer"] = within(ss.get(f"{prefix}_layer"), 1, n_layers)
    ss[f"{prefix}_head"] = within(ss.get(f"{prefix}_head"), 1, n_heads)
    c1, c2 = cols if cols is not None else st.columns([1, 1, 3])[:2]
    vis = "collapsed" if compact else "visible"
    layer = c1.selectbox("Layer", list(range(1, n_layers + 1)), key=f"{prefix}_layer", persist_state="session",
                         label_visibility=vis, format_func=(lambda v: f"layer {v}") if compact else str)
    head = c2.selectbox("Head", list(range(1, n_heads + 1)), key=f"{prefix}_head", persist_state="session",
                        label_visibility=vis, format_func=(lambda v: f"head {v}") if compact else str)
    return layer - 1, head - 1


def shows(ctx: Context, kind: str = "dec") -> str:
    """Which decoding a figure shows, in words: encoder figures do not depend on it."""
    if kind in ("enc_self", "src"):
        return "Encoder side: the same for every decoding."
    return f"Decoding shown: {ctx.shows}."


def shows_caption(ctx: Context, kind: str = "dec") -> None:
    """Which decoding the figures show (presenter mode: the page header's line says it already)."""
    if not ctx.present:
        st.caption(":material/route: " + shows(ctx, kind))


def file_name(ctx: Context, what: str) -> str:
    """A download's name without extension: model, sentence, decoding, then what it shows (view, kind, layer, head)."""
    from model.io.export import file_stem

    return file_stem(str(ctx.key), ctx.text, ctx.shows) + "_" + re.sub(r"[^\w-]+", "-", what).strip("-")


def fig_config(ctx: Context, what: str) -> dict:
    """Plotly's camera button saves the figure as PNG (3× scale, print resolution) or SVG, named after what it
    shows: model, sentence, decoding, view, kind, layer, head (the format is the sidebar's `fig_format`)."""
    fmt = st.session_state.get("fig_format", "png")
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": file_name(ctx, what),
                                     "scale": 3 if fmt == "png" else 1}}


def csv_button(label: str, make_csv: Callable[[], str], ctx: Context, what: str, key: str, container=st,
               help: str | None = None) -> None:
    """Download a matrix on screen as CSV (token labels on both axes), without rerunning the page.

    `make_csv` runs only when the button is clicked, so drawing the page costs nothing extra. Presenter mode
    leaves the buttons out (the figure's own camera button still saves it)."""
    if ctx.present:
        return
    container.download_button(label, make_csv, file_name=file_name(ctx, what) + ".csv", mime="text/csv",
                              on_click="ignore", key=key, help=help)


def sections(ctx: Context, names: list[str], container=st, always: bool = False) -> Callable[[str], bool]:
    """Which parts of a page to draw: all of them, or in presenter mode (or ``always``) the one chosen (URL `focus`).

    Use as ``show = sections(ctx, [...])`` then ``if show("name"): ...`` around each part."""
    if not (ctx.present or always):
        return lambda name: True
    ss = st.session_state
    if ss.get("focus") not in names:
        ss["focus"] = names[0]
    chosen = container.radio("Show", names, key="focus", persist_state="session", horizontal=True,
                             label_visibility="collapsed")
    return lambda name: name == chosen


def panel_group(ctx: Context, names: list[str], fit: int) -> list[int]:
    """The panels of a figure to draw (indices into ``names``, each panel's name): all of them, but in presenter mode,
    where only ``fit`` of them side by side label every key (viz.token_axes.panels_that_fit), a group of ``fit``,
    chosen in the header's "Choose" (URL `panels`, 1-based)."""
    n = len(names)
    if not ctx.present or fit >= n:
        return list(range(n))
    groups = [list(range(start, min(start + fit, n))) for start in range(0, n, fit)]
    ss = st.session_state
    ss["panels"] = within(ss.get("panels") or 1, 1, len(groups))
    with choices(ctx):
        chosen = st.selectbox("Panels", range(1, len(groups) + 1), key="panels", persist_state="session",
                              format_func=lambda g: " · ".join(names[i] for i in groups[g - 1]),
                              help=f"{fit} of the {n} panels fit side by side with every label; the others are "
                                   "here.")
    return groups[chosen - 1]


def shown_heads(ctx: Context, n_heads: int, q_tokens, k_tokens) -> tuple[int, ...] | None:
    """The heads an all-heads figure draws: all (None), or in presenter mode as many as label every key, chosen in
    "Choose" (the Training film's heads too)."""
    heads = panel_group(ctx, [f"head {h + 1}" for h in range(n_heads)], panels_that_fit(n_heads, k_tokens, q_tokens))
    return None if len(heads) == n_heads else tuple(heads)
