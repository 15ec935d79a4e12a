"""Architecture views: parameter counts and a simple block diagram."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from viz.common import style


def parameter_table(counts: dict[str, int]) -> pd.DataFrame:
    """Parameter counts per component -> DataFrame with a share of the total.

    Columns: ``component``, ``parameters`` (int), ``share (%)`` (float, 1
    decimal). Rows keep the dict's order and end with a ``total`` row.
    """
    if not counts:
        raise ValueError("counts is empty; pass {component name: number of parameters}")
    bad = {k: v for k, v in counts.items() if int(v) < 0}
    if bad:
        raise ValueError(f"parameter counts must be >= 0, got {bad}")
    total = sum(int(v) for v in counts.values())
    rows = [{"component": str(name), "parameters": int(n),
             "share (%)": round(100.0 * int(n) / total, 1) if total else 0.0}
            for name, n in counts.items()]
    rows.append({"component": "total", "parameters": total, "share (%)": 100.0 if total else 0.0})
    return pd.DataFrame(rows, columns=["component", "parameters", "share (%)"])


def _box(fig: go.Figure, x0: float, y0: float, x1: float, y1: float, text: str,
         colour: str) -> None:
    """Rounded-looking labelled box in data coordinates."""
    fig.add_shape(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, fillcolor=colour,
                  line=dict(color="#333333", width=1.5), layer="below")
    fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False,
                       font=dict(size=14, color="#111111"))


def _arrow(fig: go.Figure, x0: float, y0: float, x1: float, y1: float) -> None:
    """Arrow from (x0, y0) to (x1, y1)."""
    fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                       text="", showarrow=True, arrowhead=2, arrowwidth=1.8)


def architecture_figure(n_enc_layers: int, n_dec_layers: int, d_model: int, n_heads: int,
                        title: str = "Encoder–decoder Transformer") -> go.Figure:
    """Block diagram: embeddings → encoder ×N → (memory) → decoder ×N → generator.

    Source (DE) flows up the left column, target (EN) up the right; the
    cross-attention arrow goes from the encoder output into the decoder.
    """
    fig = go.Figure()
    enc, dec = "#c6dbef", "#fdd0a2"
    _box(fig, 0, 0, 4, 1, "DE tokens → embedding<br>× √d_model + positional enc.",
         "#e5e5e5")
    _box(fig, 0, 1.6, 4, 3.6, f"encoder layer × {n_enc_layers}<br>self-attention "
         f"({n_heads} heads)<br>feed-forward", enc)
    _box(fig, 6, 0, 10, 1, "EN tokens (shifted right)<br>→ embedding + positional enc.", "#e5e5e5")
    _box(fig, 6, 1.6, 10, 3.6, f"decoder layer × {n_dec_layers}<br>masked self-attention<br>"
         f"cross-attention · feed-forward", dec)
    _box(fig, 6, 4.2, 10, 5.0, "generator: linear + softmax<br>→ next EN token", "#c7e9c0")
    _arrow(fig, 2, 1.0, 2, 1.6)
    _arrow(fig, 8, 1.0, 8, 1.6)
    _arrow(fig, 8, 3.6, 8, 4.2)
    _arrow(fig, 4, 2.6, 6, 2.6)
    fig.add_annotation(x=5, y=2.8, text="memory", showarrow=False, font=dict(size=14))
    fig.update_xaxes(visible=False, range=[-0.3, 10.3])
    fig.update_yaxes(visible=False, range=[-0.3, 5.3])
    return style(fig, f"{title} (d_model = {d_model}, {n_heads} heads)", height=480)
