"""Architecture views: parameter counts and a simple block diagram."""

from __future__ import annotations

import plotly.graph_objects as go

from viz.layout import styled_figure
from viz.text import escape_token, fmt_share
from viz.theme import theme


def parameter_table(counts: dict[str, int]) -> list[dict[str, str]]:
    """Parameter counts per component -> table rows with a share of the total (no pandas: the server's first page
    shows this table).

    Columns (keys; text, ready to display): ``component``, ``parameters`` with
    thousands separators ("1,234,567") and ``share`` of the total
    (:func:`viz.text.fmt_share`: "30.0 %", "0.0056 %"; never "0" for a
    non-zero count). Rows keep the dict's order and end with a ``total`` row.
    """
    if not counts:
        raise ValueError("counts is empty; pass {component name: number of parameters}")
    bad = {k: v for k, v in counts.items() if int(v) < 0}
    if bad:
        raise ValueError(f"parameter counts must be >= 0, got {bad}")
    total = sum(int(v) for v in counts.values())
    rows = [{"component": str(name), "parameters": f"{int(n):,}", "share": fmt_share(int(n), total)}
            for name, n in counts.items()]
    rows.append({"component": "total", "parameters": f"{total:,}",
                 "share": "100 %" if total else "0 %"})
    return rows


def _box(x0: float, y0: float, x1: float, y1: float, text: str, colour: str) -> tuple[dict, dict]:
    """A labelled box in data coordinates: (its shape, its label)."""
    shape = {"type": "rect", "x0": x0, "y0": y0, "x1": x1, "y1": y1, "fillcolor": colour,
             "line": {"color": "#333333", "width": 1.5}, "layer": "below"}
    label = {"x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "text": text, "showarrow": False,
             "font": {"size": 14, "color": "#111111"}}
    return shape, label


ENC, DEC, GEN, TOKENS = "#c6dbef", "#fdd0a2", "#c7e9c0", "#e5e5e5"


def _arrow(x0: float, y0: float, x1: float, y1: float) -> dict:
    """An arrow from (x0, y0) to (x1, y1), as an annotation."""
    return {"x": x1, "y": y1, "ax": x0, "ay": y0, "xref": "x", "yref": "y", "axref": "x", "ayref": "y",
            "text": "", "showarrow": True, "arrowhead": 2, "arrowwidth": 1.8}


def architecture_figure(n_enc_layers: int, n_dec_layers: int, d_model: int, n_heads: int,
                        title: str = "Encoder–decoder Transformer", *,
                        src_lang: str = "German", tgt_lang: str = "English") -> go.Figure:
    """Block diagram: embeddings → encoder ×N → (memory) → decoder ×N → generator.

    Source (``src_lang``) flows up the left column, target (``tgt_lang``) up
    the right; both embeddings are scaled by √d_model; the cross-attention
    arrow goes from the encoder output into the decoder. Built in one pass (a session's first page draws it:
    plotly's add_shape / add_annotation validate the whole figure again at each call).
    """
    src, tgt = escape_token(src_lang), escape_token(tgt_lang)
    if theme().figure_px:  # a phone: shorter lines in taller boxes
        return _narrow_figure(n_enc_layers, n_dec_layers, d_model, n_heads, title, src, tgt)
    # Presenter mode's 20 px type in a figure as short as the screen leaves: two lines a box, no notes under them.
    short = bool(theme().height_px)
    boxes = [
        _box(0, 0, 4, 1.1, f"{src} tokens → embedding<br>× √d_model + positional enc.", TOKENS),
        _box(0, 1.7, 4, 3.7, f"encoder layer × {n_enc_layers}<br>self-attention ({n_heads} heads)<br>feed-forward",
             ENC),
        _box(6, 0, 10, 1.1, f"{tgt} tokens, shifted right<br>→ embedding, as on the left" if short else
             f"{tgt} tokens (shifted right)<br>→ embedding × √d_model<br>+ positional enc.", TOKENS),
        _box(6, 1.7, 10, 3.7, f"decoder layer × {n_dec_layers}<br>masked self-attention<br>"
             "cross-attention · feed-forward", DEC),
        _box(6, 4.3, 10, 5.1, f"generator → next {tgt} token" if short else
             f"generator: linear + softmax<br>→ next {tgt} token", GEN),
    ]
    notes = [label for _, label in boxes]
    notes += [_arrow(2, 1.1, 2, 1.7), _arrow(8, 1.1, 8, 1.7), _arrow(8, 3.7, 8, 4.3), _arrow(4, 2.7, 6, 2.7)]
    notes.append({"x": 5, "y": 2.9, "text": "memory", "showarrow": False, "font": {"size": 14}})
    notes += [] if short else [{"x": x, "y": -0.45, "text": text, "showarrow": False,
                                "font": {"size": 15, "color": "#333333"}}
                               for x, text in ((2, f"encoder: reads {src}"), (8, f"decoder: writes {tgt}"))]
    layout = {"shapes": [shape for shape, _ in boxes], "annotations": notes,
              "xaxis": {"visible": False, "range": [-0.3, 10.3]}, "yaxis": {"visible": False, "range": [-0.75, 5.4]}}
    return styled_figure([], layout, f"{title}<br>d_model = {d_model}, {n_heads} heads", height=500)


def _narrow_figure(n_enc: int, n_dec: int, d_model: int, n_heads: int, title: str, src: str, tgt: str) -> go.Figure:
    """The block diagram for a phone's 356 px: the same blocks, their text in short lines (a line of the laptop's
    boxes ran out of a box 130 px wide), "memory" above the arrow between the columns."""
    boxes = [
        _box(0, 0, 4.6, 1.5, f"{src} tokens<br>→ embedding<br>× √d_model<br>+ positional enc.", TOKENS),
        _box(0, 2.1, 4.6, 4.3, f"encoder<br>layer × {n_enc}<br>self-attention<br>({n_heads} heads)<br>feed-forward",
             ENC),
        _box(5.4, 0, 10, 1.5, f"{tgt} tokens<br>(shifted right)<br>→ embedding<br>× √d_model, + pos.", TOKENS),
        _box(5.4, 2.1, 10, 4.3, f"decoder<br>layer × {n_dec}<br>masked<br>self-attention<br>cross-attention<br>"
             "feed-forward", DEC),
        _box(5.4, 4.9, 10, 5.9, f"generator:<br>linear + softmax<br>→ next {tgt} token", GEN),
    ]
    notes = [dict(label, font=dict(label["font"], size=12)) for _, label in boxes]
    notes += [_arrow(2.3, 1.5, 2.3, 2.1), _arrow(7.7, 1.5, 7.7, 2.1), _arrow(7.7, 4.3, 7.7, 4.9),
              _arrow(4.6, 4.0, 5.4, 4.0)]
    notes.append({"x": 5, "y": 4.55, "text": "memory", "showarrow": False, "font": {"size": 12}})
    notes += [{"x": x, "y": -0.45, "text": text, "showarrow": False, "font": {"size": 12, "color": "#333333"}}
              for x, text in ((2.3, f"encoder: reads {src}"), (7.7, f"decoder: writes {tgt}"))]
    layout = {"shapes": [shape for shape, _ in boxes], "annotations": notes,
              "xaxis": {"visible": False, "range": [-0.2, 10.2]}, "yaxis": {"visible": False, "range": [-0.75, 6.1]}}
    return styled_figure([], layout, f"{title}<br>d_model = {d_model}, {n_heads} heads", height=560)
