"""Presenter mode's row window: a heatmap keeps readable rows on a projector instead of squeezing them.

Presenter mode fits a page part on a 1280×720 screen. A long sentence has more query rows than that height holds
at a readable size (58 rows of a 48-word sentence's decoder side in about 100 px). So where the rows would be
shorter than :data:`MIN_ROW_PX`, the figure shows as many rows as fit at that height, from the first, and the rest
are a drag away: the y axis pans (dragmode "pan", the x axis fixed), and the title says which rows are shown.
Every row is still in the figure (its values, its hover, its label): only the axis' range is a window on them.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import replace

import plotly.graph_objects as go

from viz.layout import TITLE_LINE_PX, top_margin
from viz.text import title_lines
from viz.theme import theme, using_theme

MIN_ROW_PX = 14  # the least height of a row on a projector: 20 px labels are then thinned to every second row
# A long key axis on a projector: its slanted labels, cut to this many characters, leave the rows a third more room
# (a label of 12 characters at 20 px takes about 120 px below the plot). The hover names every token in full.
LONG_AXIS, SHORT_LABEL_CHARS = 24, 8


def short_labels_on_long_axes(tokens_arg: str):
    """Build a presenter figure whose ``tokens_arg`` (its key tokens) are more than LONG_AXIS with token labels cut
    to SHORT_LABEL_CHARS."""
    def wrap(build):
        signature = inspect.signature(build)

        @functools.wraps(build)
        def built(*args, **kwargs):
            tokens = signature.bind_partial(*args, **kwargs).arguments.get(tokens_arg)
            t = theme()
            if t.height_px and tokens is not None and len(tokens) > LONG_AXIS and \
                    (t.max_label_chars or LONG_AXIS) > SHORT_LABEL_CHARS:
                with using_theme(replace(t, max_label_chars=SHORT_LABEL_CHARS)):
                    return build(*args, **kwargs)
            return build(*args, **kwargs)
        return built
    return wrap


def row_window(n_rows: int, rows_px: float | None) -> int | None:
    """How many of ``n_rows`` rows a plot ``rows_px`` tall shows at once: None when every row gets at least
    :data:`MIN_ROW_PX` (or outside presenter mode, where the page scrolls and a figure grows with its rows)."""
    if not theme().height_px or rows_px is None or n_rows * MIN_ROW_PX <= rows_px:
        return None
    return max(1, int(rows_px // MIN_ROW_PX))


def windowed_title(title: str | None, shown: int, n_rows: int) -> str:
    """The figure's title with the rows it shows and how to reach the others."""
    note = f"rows 1–{shown} of {n_rows}, drag ↕"
    return f"{title} · {note}" if title else note


def tick_px(rows_px: float, n_rows: int, shown: int | None) -> float:
    """The pixels the whole axis would take at the rows' drawn height: the length label thinning works on."""
    return rows_px if shown is None else n_rows * rows_px / shown


def window_axis(y_axis: dict, shown: int | None, **more) -> dict:
    """A reversed category y axis (rows top down) showing rows 0..shown-1, pannable; unchanged without a window."""
    if shown is None:
        return y_axis
    return dict(y_axis, range=[shown - 0.5, -0.5], autorange=False, fixedrange=False, **more)


def pan_layout(shown: int | None) -> dict:
    """The layout settings that make a drag scroll the rows (the x axis keeps its range)."""
    return {} if shown is None else {"dragmode": "pan"}


def label_room(height: int | None, rows_px: int | None, title: str | None, wrap: int | None) -> dict | None:
    """A presenter heatmap's bottom margin: what its height leaves below the rows and the title (the key labels and
    their axis title). A figure cut to the screen is too short for plotly's estimate to widen the margin, and the
    labels would be drawn past the figure's edge."""
    if not (theme().height_px and height and rows_px):
        return None
    return dict(b=max(20, height - rows_px - top_margin(title_lines(title, wrap))))


def rows_as_drawn(fig: go.Figure, n_rows: int, grid_rows: int, v_space: float) -> go.Figure:
    """The row window of a presenter facet figure, measured on the figure as built (its margins can be wider than
    estimated before building it): rows that would be drawn below MIN_ROW_PX become a window, said in the title."""
    lay = fig.layout
    panel = (lay.height - lay.margin.t - lay.margin.b) * (1 - v_space * (grid_rows - 1)) / grid_rows
    fit = row_window(n_rows, panel)
    windowed = lay.yaxis.autorange is False
    if fit is None or (windowed and lay.yaxis.range[0] + 0.5 <= fit):
        return fig
    y_axes = {k: dict(range=[fit - 0.5, -0.5], autorange=False, fixedrange=False, **({"matches": "y"} if k != "yaxis"
                                                                                      else {}))
              for k in lay.to_plotly_json() if k.startswith("yaxis")}
    x_axes = {k: dict(fixedrange=True) for k in lay.to_plotly_json() if k.startswith("xaxis")}
    text = lay.title.text or ""
    text = (re.sub(r"rows 1–\d+ of", f"rows 1–{fit} of", text) if windowed
            else windowed_title(text, fit, n_rows).replace(" · ", "<br>", 1))  # a line of its own: the margin grows
    more = 0 if windowed else TITLE_LINE_PX
    fig.update_layout(**y_axes, **x_axes, dragmode="pan", title_text=text, margin_t=lay.margin.t + more)
    return fig if not more else rows_as_drawn(fig, n_rows, grid_rows, v_space)
