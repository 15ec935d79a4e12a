"""The quiz's live poll drawn: the room's answers as they arrive, and after the reveal the room beside the model.

Plain lists in, Plotly figures out. The counts are whole students; the model's values are probabilities (the next
word) or attention weights (where it looks), so the reveal puts the room's share (answers / all answers) on the
same 0..1 axis as the model's value.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.decoding import bar_marker
from viz.layout import styled_figure
from viz.text import escape_tokens, fmt_prob
from viz.theme import theme

ROOM_COLOR = "#64748b"  # the room's bars: slate, beside the model's blue and the highlighted answer


def shares(counts: Sequence[int]) -> list[float]:
    """Each option's share of all answers (0 everywhere while nobody has answered)."""
    n = sum(counts)
    return [c / n if n else 0.0 for c in counts]


def _check(options: Sequence[str], counts: Sequence[int]) -> None:
    if len(options) != len(counts):
        raise ValueError(f"{len(options)} options but {len(counts)} counts")
    if any(c < 0 for c in counts):
        raise ValueError("a count below 0")


def room_figure(options: Sequence[str], counts: Sequence[int], title: str | None = "the room's answers",
                height: int | None = None, axis: bool = True) -> go.Figure:
    """Horizontal bars of how many students chose each option (options in display order, first at the top); the
    axis reaches at least 5 so that the first answers do not fill the screen. ``height`` in px (default: room for
    the title and 40 px a bar). Without ``axis`` the count axis is hidden (each bar still writes its count), which
    leaves the rows the height of a projector's strip below the question."""
    _check(options, counts)
    ys = np.arange(len(options), dtype=np.int32)
    labels = escape_tokens(options)
    c = np.asarray(counts, dtype=np.int64)
    bar = dict(type="bar", x=c, y=ys, orientation="h", marker=dict(color=ROOM_COLOR), name="answers",
               text=[str(int(v)) for v in c], textposition="outside", textangle=0, textfont=dict(size=16),
               cliponaxis=False, customdata=np.asarray(labels, dtype=str),
               hovertemplate="%{customdata}: %{x} answers<extra></extra>")
    top = max(5, int(c.max(initial=0)))
    layout = dict(xaxis=dict(range=[0, top * 1.15], title=dict(text="answers"), tickfont=dict(size=theme().tick),
                             dtick=max(1, -(-top // 5)), showgrid=False, visible=axis),
                  yaxis=dict(tickmode="array", tickvals=ys.tolist(), ticktext=labels, autorange="reversed",
                             tickfont=dict(size=16)))
    return styled_figure([bar], layout, title, height=height or max(240, 100 + 40 * len(options)))


def room_and_model_figure(options: Sequence[str], counts: Sequence[int], values: Sequence[float], answer: int,
                          value_name: str = "probability", title: str = "the room and the model",
                          height: int | None = None) -> go.Figure:
    """After the reveal: per option, the room's share of answers beside the model's ``values`` (its probability or
    attention weight), the model's answer highlighted. Both on one 0..1 axis. ``height`` in px (default: room for
    the title, the legend and 56 px an option)."""
    _check(options, counts)
    if len(values) != len(options):
        raise ValueError(f"{len(options)} options but {len(values)} values")
    if not 0 <= answer < len(options):
        raise ValueError(f"answer {answer} is outside 0..{len(options) - 1}")
    ys = np.arange(len(options), dtype=np.int32)
    labels = escape_tokens(options)
    room = shares(counts)
    model = [float(v) for v in values]
    tip = np.asarray(labels, dtype=str)
    bars = [
        dict(type="bar", x=model, y=ys, orientation="h", name=f"model's {value_name}",
             marker=bar_marker(len(options), answer), text=[fmt_prob(v) for v in model], textposition="outside",
             textangle=0, cliponaxis=False, customdata=tip,
             hovertemplate=f"%{{customdata}}: {value_name} %{{x:.3f}}<extra></extra>"),
        dict(type="bar", x=room, y=ys, orientation="h", name="the room's share", marker=dict(color=ROOM_COLOR),
             text=[f"{round(100 * s)} %" for s in room], textposition="outside", textangle=0, cliponaxis=False,
             customdata=np.stack([tip, np.asarray([str(int(c)) for c in counts], dtype=str)], axis=-1),
             hovertemplate="%{customdata[0]}: %{customdata[1]} answers<extra></extra>"),
    ]
    layout = dict(barmode="group", bargap=0.25, legend=dict(orientation="h", y=-0.2),
                  xaxis=dict(range=[0, 1.25], tickvals=[0, 0.25, 0.5, 0.75, 1.0], tickfont=dict(size=theme().tick),
                             showgrid=False),
                  yaxis=dict(tickmode="array", tickvals=ys.tolist(), ticktext=labels, autorange="reversed",
                             tickfont=dict(size=16)))
    return styled_figure(bars, layout, title, height=height or max(280, 130 + 56 * len(options)))

