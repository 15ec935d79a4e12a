"""Controls and captions shared by several views, bound to URL state."""
from __future__ import annotations

import re
from collections.abc import Callable

import streamlit as st

from views.state import KINDS, Context


def kind_layer_head(n_enc: int, n_dec: int, n_heads: int, with_head: bool = True) -> tuple[str, int, int]:
    """Selectors for attention kind, layer and head; returns (kind, 0-based layer, 0-based head)."""
    ss = st.session_state
    cols = st.columns([3, 1, 1] if with_head else [3, 1])
    kind = cols[0].selectbox("Attention", list(KINDS), key="kind", format_func=KINDS.get)
    n_layers = n_enc if kind == "enc_self" else n_dec
    ss["layer"] = min(max(int(ss["layer"]), 1), n_layers)
    ss["head"] = min(max(int(ss["head"]), 1), n_heads)
    layer = cols[1].selectbox("Layer", list(range(1, n_layers + 1)), key="layer")
    head = cols[2].selectbox("Head", list(range(1, n_heads + 1)), key="head") if with_head else 1
    return kind, layer - 1, head - 1


def layer_head(n_layers: int, n_heads: int, prefix: str) -> tuple[int, int]:
    """Layer and head selectors with URL keys `{prefix}_layer` / `{prefix}_head`; returns 0-based indices."""
    ss = st.session_state
    ss[f"{prefix}_layer"] = min(max(int(ss.get(f"{prefix}_layer", 1)), 1), n_layers)
    ss[f"{prefix}_head"] = min(max(int(ss.get(f"{prefix}_head", 1)), 1), n_heads)
    c1, c2, _ = st.columns([1, 1, 3])
    layer = c1.selectbox("Layer", list(range(1, n_layers + 1)), key=f"{prefix}_layer")
    head = c2.selectbox("Head", list(range(1, n_heads + 1)), key=f"{prefix}_head")
    return layer - 1, head - 1


def shows(ctx: Context, kind: str = "dec") -> str:
    """Which decoding a figure shows, in words: encoder figures do not depend on it."""
    if kind in ("enc_self", "src"):
        return "Encoder side: the same for every decoding."
    return f"Decoding shown: {ctx.shows}."


def shows_caption(ctx: Context, kind: str = "dec") -> None:
    st.caption(":material/route: " + shows(ctx, kind))


def file_name(ctx: Context, what: str) -> str:
    """A download's name without extension: model, sentence, decoding, then what it shows (view, kind, layer, head)."""
    from model.export import file_stem

    return file_stem(ctx.key, ctx.text, ctx.shows) + "_" + re.sub(r"[^\w-]+", "-", what).strip("-")


def fig_config(ctx: Context, what: str) -> dict:
    """Plotly's camera button saves the figure as PNG (3× scale, print resolution) or SVG, named after what it
    shows: model, sentence, decoding, view, kind, layer, head (the format is the sidebar's `fig_format`)."""
    fmt = st.session_state.get("fig_format", "png")
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": file_name(ctx, what), "scale": 3 if fmt == "png" else 1}}


def csv_button(label: str, make_csv: Callable[[], str], ctx: Context, what: str, key: str, container=st) -> None:
    """Download a matrix on screen as CSV (token labels on both axes), without rerunning the page.

    `make_csv` runs only when the button is clicked, so drawing the page costs nothing extra."""
    container.download_button(label, make_csv, file_name=file_name(ctx, what) + ".csv", mime="text/csv", on_click="ignore",
                              key=key)
