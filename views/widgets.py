"""Controls shared by several views (attention kind, layer, head), bound to URL state."""
from __future__ import annotations

import streamlit as st

from views.state import KINDS


def kind_layer_head(n_enc: int, n_dec: int, n_heads: int, with_head: bool = True, prefix: str = "") -> tuple[str, int, int]:
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
