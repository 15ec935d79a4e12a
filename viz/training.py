"""The Training page's figures: a training film's curves over steps, and a toy run's loss.

Inputs are NumPy arrays and lists (the training film's arrays, a toy run's losses); nothing here knows torch.
Film steps are log-spaced (0, 25, 50, 100, ...), so the step axis is logarithmic; step 0, which a log axis
cannot show, is drawn one doubling left of the first logged step and labelled "0".
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.layout import PAGE_WIDTH_PX, style, text_px
from viz.scales import line_dash
from viz.theme import theme

TRAIN_COLOUR, VAL_COLOUR, NOW_COLOUR = "#1f77b4", "#ff7f0e", "#d62728"
LAYER_COLOURS = ("#08519c", "#3182bd", "#6baed6", "#9ecae1", "#c6dbef", "#deebf7")


def step_positions(steps: Sequence[int], axis_px: float | None = None) -> tuple[np.ndarray, dict]:
    """(x positions on a log axis, the axis settings): step 0 sits at half the first non-zero step.

    The labelled ticks are ones whose labels do not run into each other on an axis ``axis_px`` wide (default: a
    figure half the page wide): late epochs are close together on a log axis ("1,174 1,565 2,348" would touch).
    """
    s = np.asarray(steps, dtype=np.float64)
    first = s[s > 0].min() if (s > 0).any() else 1.0
    x = np.where(s > 0, s, first / 2)
    ticks = sorted({float(v) for v in x})
    labels = {v: "0" if v == first / 2 else f"{v:,.0f}" for v in ticks}
    shown = spaced_ticks(ticks, labels, axis_px or PAGE_WIDTH_PX // 2 - 100)
    axis = dict(type="log", tickvals=shown, ticktext=[labels[v] for v in shown],
                title=dict(text="training step (log scale)"), tickfont=dict(size=theme().tick))
    return x, axis


# Plotly pads a log axis with markers beyond the data: the decades shown are about this much more than the data's.
LOG_PAD = 1.15


def spaced_ticks(ticks: Sequence[float], labels: dict, axis_px: float) -> list[float]:
    """The ticks (sorted, > 0) whose labels fit side by side on a log axis ``axis_px`` wide, at least
    the theme's label gap apart: the first, the last, and greedily as many between as fit."""
    if len(ticks) <= 2:
        return list(ticks)
    t = theme()
    logs = np.log10(np.asarray(ticks, dtype=np.float64))
    px_per_decade = axis_px / max((logs[-1] - logs[0]) * LOG_PAD, 1e-9)
    half = {v: text_px(labels[v], t.tick) / 2 for v in ticks}

    def apart(a: int, b: int) -> bool:  # labels a and b, their centres at the ticks, with room between
        return (logs[b] - logs[a]) * px_per_decade >= half[ticks[a]] + half[ticks[b]] + t.min_tick_px

    kept, last = [0], len(ticks) - 1
    for i in range(1, last):
        if apart(kept[-1], i) and apart(i, last):
            kept.append(i)
    if apart(kept[-1], last):  # every tick kept between leaves the last one room
        kept.append(last)
    return [ticks[i] for i in kept]


def _now_marks(x: float, step: int) -> dict:
    """Layout entries marking the frame shown: a dotted vertical line and its step (one dict, no figure calls:
    fig.add_vline validates the whole figure again)."""
    return {"shapes": [dict(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                            line=dict(color=NOW_COLOUR, width=2, dash="dot"))],
            "annotations": [dict(x=float(np.log10(x)), y=1, xref="x", yref="paper", text=f"step {step:,}",
                                 showarrow=False, yanchor="bottom",
                                 font=dict(color=NOW_COLOUR, size=theme().base - 2))]}


def _curves_figure(traces: list[dict], x_axis: dict, y_axis: dict, now_x: float, now_step: int) -> go.Figure:
    # The legend at the figure's bottom edge: above the plot it ran into the title and the step marked. A presenter
    # figure, as short as the screen leaves, has no room below its step labels: there the legend is one line of
    # short names on the plot's top edge, left of the step marked at the right.
    legend = (dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom") if theme().height_px
              else dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))
    return go.Figure(data=traces, layout=dict(xaxis=x_axis, yaxis=y_axis, legend=legend,
                                              **_now_marks(now_x, now_step)))


def _y_title(long: str, short: str) -> str:
    """The y axis title: the short one where the theme asks for short titles (a presenter figure's short axis)."""
    return short if theme().short_axis_titles else long


def loss_figure(steps: Sequence[int], train_loss: np.ndarray, val_loss: np.ndarray, now: int, *,
                val_on: str | None = None, title: str | None = None) -> go.Figure:
    """Train and validation loss per frame (NaN = not measured at that frame), the frame shown marked."""
    x, axis = step_positions(steps)
    steps_a = np.asarray(steps)
    tr = np.asarray(train_loss, dtype=np.float64)
    ok = np.isfinite(tr)
    traces = [
        dict(type="scatter", x=x[ok], y=tr[ok], mode="lines+markers",
             name="train" if theme().height_px else "train loss (dropout on)",
             line=dict(color=TRAIN_COLOUR), customdata=steps_a[ok],
             hovertemplate="step %{customdata:,}<br>train loss %{y:.3f}<extra></extra>"),
        dict(type="scatter", x=x, y=np.asarray(val_loss, dtype=np.float64), mode="lines+markers",
             name="validation" if theme().height_px else "validation loss" + (f" ({val_on})" if val_on else ""),
             line=dict(color=VAL_COLOUR, dash=line_dash(1)),
             customdata=steps_a, hovertemplate="step %{customdata:,}<br>validation loss %{y:.3f}<extra></extra>"),
    ]
    y_axis = dict(title=dict(text=_y_title("loss (nats per token)", "loss (nats)")), tickfont=dict(size=theme().tick))
    return _legend_room(style(_curves_figure(traces, axis, y_axis, float(x[now]), int(steps[now])), title or "loss",
                              height=340))


def _legend_room(fig: go.Figure) -> go.Figure:
    """A presenter figure's legend line stands between the title and the plot: the top margin grows by it. The plot
    left is a few tick labels tall: at most three on the y axis, so that its 20 px labels stand apart."""
    if theme().height_px:
        fig.layout.margin.t = (fig.layout.margin.t or 0) + int(1.4 * theme().tick)
        fig.update_yaxes(nticks=3)
    return fig


def entropy_figure(steps: Sequence[int], entropy: np.ndarray, now: int, *, kind_name: str,
                   title: str | None = None) -> go.Figure:
    """Mean attention entropy per layer over the frames; ``entropy`` (F, L) in nats."""
    x, axis = step_positions(steps)
    e = np.asarray(entropy, dtype=np.float64)
    traces = [dict(type="scatter", x=x, y=e[:, layer], mode="lines+markers", name=f"layer {layer + 1}",
                   line=dict(color=LAYER_COLOURS[layer % len(LAYER_COLOURS)], dash=line_dash(layer)),
                   customdata=np.asarray(steps),
                   hovertemplate=(f"layer {layer + 1}<br>step %{{customdata:,}}<br>mean entropy "
                                  "%{y:.3f} nats<extra></extra>"))
              for layer in range(e.shape[1])]
    y_axis = dict(title=dict(text=_y_title("mean entropy (nats)", "entropy (nats)")), tickfont=dict(size=theme().tick),
                  rangemode="tozero")
    return _legend_room(style(_curves_figure(traces, axis, y_axis, float(x[now]), int(steps[now])),
                              title or f"{kind_name}: how sharp, per layer", height=340))


def toy_loss_figure(losses: Sequence[tuple[int, float]], total_steps: int, *, title: str | None = None) -> go.Figure:
    """A live toy run's training loss (mean over each reporting interval) against the step."""
    steps = [s for s, _ in losses]
    fig = go.Figure(go.Scatter(x=steps, y=[v for _, v in losses], mode="lines+markers", name="train loss",
                               line=dict(color=TRAIN_COLOUR),
                               hovertemplate="step %{x}<br>loss %{y:.3f}<extra></extra>"))
    fig.update_xaxes(title=dict(text="step"), range=[0, total_steps * 1.02], tickfont=dict(size=theme().tick))
    fig.update_yaxes(title=dict(text="loss (nats per token)"), rangemode="tozero", tickfont=dict(size=theme().tick))
    return style(fig, title or "training loss", height=300)
