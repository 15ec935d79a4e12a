"""Word alignment over what cross-attention carries: a word-level matrix with the gold and the predicted links."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.alt import with_alt
from viz.alt_base import Alt, clip_summary, plain
from viz.heatmap import heatmap
from viz.theme import fit_height, theme

# The three kinds of link, each drawn by a shape of its own (colour alone is lost in greyscale).
SURE = dict(symbol="square-open", color="#111111", name="gold: sure")
POSSIBLE = dict(symbol="square-open", color="#777777", name="gold: possible", dash=True)
PREDICTED = dict(symbol="circle", color="#ff7f0e", name="predicted")


def alignment_figure(m: np.ndarray, src_words: Sequence[str], tgt_words: Sequence[str], *,
                     sure: set | None = None, possible: set | None = None, predicted: set = frozenset(),
                     title: str, measure: str, src_lang: str = "DE", tgt_lang: str = "EN") -> go.Figure:
    """``m`` (target words, source words) as a heatmap, rows the target words; the gold links ``sure`` and
    ``possible`` (0-based (source word, target word)) as squares, ``predicted`` ones as dots."""
    m = np.asarray(m, dtype=np.float32)
    fig = heatmap(m, list(tgt_words), list(src_words), row_title=f"target word ({tgt_lang}) ↓",
                  col_title=f"source word ({src_lang}) →", zmin=0.0, zmax=float(m.max()) or 1.0, title=title,
                  value_name=measure, row_name="target word", col_name="source word", colorbar_title=measure)
    cells = fig.data[0]
    xs, ys = list(cells.x), list(cells.y)  # the category names of the columns and rows
    size = max(10, int(1.1 * theme().tick))  # a square within its cell: rows are 20 px and more
    layers = ([(SURE, sure or set()), (POSSIBLE, (possible or set()) - (sure or set()))]
              if sure is not None or possible is not None else []) + [(PREDICTED, predicted)]  # no gold: no squares
    for look, found in layers:
        pts = sorted(found)
        fig.add_trace(go.Scatter(
            x=[xs[i] for i, _ in pts], y=[ys[j] for _, j in pts], mode="markers", name=look["name"],
            marker=dict(symbol=look["symbol"], color=look["color"], size=size if look is not PREDICTED else size // 2,
                        line=dict(width=3 if look is SURE else 2, color=look["color"])),
            hovertemplate=f"{look['name']}: %{{y}} – %{{x}}<extra></extra>", showlegend=True))
    # the legend in a row between the title and the plot (below it, the key labels and a phone's colour bar are)
    rows = 2 if theme().figure_px else 1  # a phone's 356 px hold two of the three names in a row
    grow = int(1.6 * theme().base) * rows
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
                      margin=dict(t=(fig.layout.margin.t or 80) + grow),
                      height=fit_height((fig.layout.height or 450) + grow))
    return with_alt(fig, _alt(title, src_words, tgt_words, layers))


def _alt(title: str, src_words, tgt_words, layers) -> Alt:
    """The figure in words: how many links of each kind, and each link as "source – target"."""
    counts = ", ".join(f"{len(found)} {look['name']}" for look, found in layers)
    details = tuple(f"{look['name']}: " + (", ".join(f"{tgt_words[j]} – {src_words[i]}" for i, j in sorted(found))
                                          or "none") for look, found in layers)
    return Alt(clip_summary(f"{plain(title)}: {len(tgt_words)} target words × {len(src_words)} source words; "
                            f"{counts} links."), details)
