"""The readers of :func:`viz.alt.describe` for traces along one axis: bars, lines (with a wave's period), dots
and boxes, each turning the arrays Plotly draws into a :class:`viz.alt.Part`."""
from __future__ import annotations

import numpy as np

from viz.alt_base import (
    MAX_DETAIL_ROWS,
    FigureView,
    Part,
    Table,
    axis_title,
    caption,
    cut_rows,
    fmt_number,
    is_whole,
    labels,
    layout_axis,
    listing,
    panel_name,
    plain,
    ticks_cover,
)


def highlighted(marker) -> int | None:
    """The one bar whose colour differs from all the others (the chosen token, the most-attended key), if any."""
    colours = marker.color if marker is not None else None
    if colours is None or isinstance(colours, str) or len(colours) < 2:
        return None
    values, counts = np.unique(np.asarray(colours, dtype=str), return_counts=True)
    if len(values) != 2 or min(counts) != 1:
        return None
    odd = values[int(np.argmin(counts))]
    return int(np.flatnonzero(np.asarray(colours, dtype=str) == odd)[0])


def bar_part(fig: FigureView, t) -> Part | None:
    """A set of bars: every category and its value, the three largest in the summary, the highlighted one."""
    across = t.orientation == "h"
    cats, vals = (t.y, t.x) if across else (t.x, t.y)
    v = np.asarray(vals if vals is not None else (), dtype=np.float64).reshape(-1)
    if v.size == 0:
        return None
    cat_ref, val_ref = (t.yaxis or "y", t.xaxis or "x") if across else (t.xaxis or "x", t.yaxis or "y")
    cat_name = axis_title(fig, cat_ref) or "category"
    names = _bar_names(t, cats, layout_axis(fig, cat_ref), len(v), cat_name)
    value = plain(t.name) or axis_title(fig, val_ref) or "value"
    hl = highlighted(t.marker)
    whole = is_whole(v)

    def num(x: float) -> str:
        return fmt_number(x, whole)
    panel = panel_name(fig, t.xaxis or "x", t.yaxis or "y")
    head = f"{panel}: " if panel else ""
    top = [i for i in np.argsort(-np.nan_to_num(v, nan=-np.inf), kind="stable")[:3] if np.isfinite(v[i])]
    marked = f" Highlighted: {names[hl]} ({num(v[hl])})." if hl is not None else ""
    summary = (f"{head}{len(v)} bars of {value} by {cat_name}; largest "
               f"{listing([f'{names[i]} {num(v[i])}' for i in top])}.{marked}")
    details = [f"{head}{value} by {cat_name}, in the order drawn:"]
    details += [f"{names[i]}: {num(v[i])}" + (" (highlighted)" if i == hl else "")
                for i in range(min(len(v), MAX_DETAIL_ROWS))]
    if len(v) > MAX_DETAIL_ROWS:
        details.append(f"… {len(v) - MAX_DETAIL_ROWS} more bars in the table.")
    columns, values = (value,), v[:, None]
    marks = None
    if hl is not None:
        columns, values = (value, "highlighted"), np.column_stack([v, np.full(len(v), np.nan)])
        marks = np.full(values.shape, "", dtype=object)
        marks[hl, 1] = "yes"
    kept = cut_rows(len(v), len(columns))
    table = Table(caption(f"{head}{value} by {cat_name}", kept, len(v)), cat_name, tuple(names[:kept]), columns,
                  values[:kept], None if marks is None else marks[:kept], len(v))
    return Part(summary, details, table, f"{head}{value}: {len(v)} bars, largest {names[top[0]]} {num(v[top[0]])}."
                if top else summary)


def _bar_names(t, cats, axis, n: int, word: str) -> list[str]:
    """A bar's name: its category, or the tick label of its position when every bar has one, else the label its
    hover shows (first column of customdata: a thinned axis names only some bars), else its position."""
    cats = list(cats) if cats is not None else list(range(n))
    if (cats and isinstance(cats[0], str)) or ticks_cover(axis, cats):
        return labels(cats, axis, n, word.split(" (")[0])
    data = t.customdata
    if data is not None:
        data = np.asarray(data, dtype=object)
        first = data[:, 0] if data.ndim == 2 else data
        if len(first) == n and all(isinstance(x, str) for x in first):
            return [plain(x) for x in first]
    return labels(cats, axis, n, word.split(" (")[0])


def _xy(t) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(t.y if t.y is not None else (), dtype=np.float64).reshape(-1)
    x = np.asarray(t.x, dtype=np.float64).reshape(-1) if t.x is not None else np.arange(len(y), dtype=np.float64)
    return x, y


def line_part(fig: FigureView, t, tables: dict[tuple, Part]) -> Part | None:
    """A line: where it starts and ends, its lowest and highest points, and the period of a wave. Lines with the
    same x values add a column to one table (the first such line's part carries it)."""
    x, y = _xy(t)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return None
    x_name = axis_title(fig, t.xaxis or "x") or "x"
    name = plain(t.name) or axis_title(fig, t.yaxis or "y") or "line"
    panel = panel_name(fig, t.xaxis or "x", t.yaxis or "y")
    xs, ys = x[ok], y[ok]
    lo, hi = int(np.argmin(ys)), int(np.argmax(ys))
    y_whole, x_whole = is_whole(ys), is_whole(xs)

    def at(i: int) -> str:
        return f"{fmt_number(ys[i], y_whole)} at {x_name} = {fmt_number(xs[i], x_whole)}"
    period = wave_period(xs, ys)
    if period is not None:
        shape = (f"oscillates between {fmt_number(ys[lo])} and {fmt_number(ys[hi])}, repeating every "
                 f"{period:.1f} along {x_name}")
    else:
        shape = f"runs from {at(0)} to {at(len(ys) - 1)}; lowest {at(lo)}, highest {at(hi)}"
    head = f"{panel}: " if panel else ""
    summary = f"{head}{name} {shape}."
    key = (panel, x.tobytes())
    if key in tables:  # one more column of the table that the first line with these x values carries
        first = tables[key]
        old = first.table
        first.table = Table(old.caption, old.index_name, old.rows, old.columns + (name,),
                            np.column_stack([old.values, y[: len(old.rows)]]), None, old.total_rows)
        return Part(summary, [summary])
    kept = cut_rows(len(x), 4)
    steps = tuple(fmt_number(v, x_whole) for v in x[:kept])
    part = tables[key] = Part(summary, [summary], Table(caption(f"{head}{name} by {x_name}", kept, len(x)), x_name,
                                                         steps, (name,), y[:kept, None], None, len(x)))
    return part


def wave_period(x: np.ndarray, y: np.ndarray) -> float | None:
    """The period of a line that oscillates around its mean (at least two full waves with evenly spaced
    crossings of the mean), from where it crosses; None for anything else."""
    if len(y) < 8 or np.ptp(y) == 0:
        return None
    above = y > (y.max() + y.min()) / 2
    cross = np.flatnonzero(above[1:] != above[:-1])
    if len(cross) < 4:
        return None
    gaps = np.diff(x[cross])
    if gaps.std() > 0.25 * gaps.mean():
        return None
    return float(2 * gaps.mean())


def dots_part(fig: FigureView, t) -> Part | None:
    """A set of dots: how many, and the labelled ones (text drawn beside them) with their coordinates."""
    x, y = _xy(t)
    if not len(y):
        return None
    name = plain(t.name) or "points"
    x_name, y_name = axis_title(fig, t.xaxis or "x") or "x", axis_title(fig, t.yaxis or "y") or "y"
    texts = t.text if "text" in (t.mode or "") and t.text is not None and not isinstance(t.text, str) else None
    if texts is None:
        return Part(f"{name}: {len(y):,} dots (the hover names each).", [f"{name}: {len(y):,} dots."])
    names = [plain(s) for s in texts]
    where = [f"{n} ({fmt_number(a)}, {fmt_number(b)})" for n, a, b in zip(names, x, y)]
    summary = f"{name}: {len(y)} labelled dots: {listing(names, 10)}."
    details = [f"{name}, each at ({x_name}, {y_name}):"] + where[:MAX_DETAIL_ROWS]
    kept = cut_rows(len(y), 2)
    table = Table(caption(f"{name}: {x_name} and {y_name}", kept, len(y)), name, tuple(names[:kept]),
                  (x_name, y_name), np.column_stack([x, y])[:kept], None, len(y))
    return Part(summary, details, table)


def box_part(t) -> Part | None:
    """A box plot: the lowest, quartiles and highest of its values, or the five numbers it was drawn from."""
    name = plain(t.name) or "values"
    if t.q1 is not None:  # drawn from its five numbers (computed where the figure was built)
        q = [float(np.ravel(v)[0]) for v in (t.lowerfence, t.q1, t.median, t.q3, t.upperfence)]
        text = (f"{name}: whiskers from {fmt_number(q[0])} to {fmt_number(q[4])} (the furthest values within 1.5 "
                f"interquartile ranges), middle half {fmt_number(q[1])} to {fmt_number(q[3])}, median "
                f"{fmt_number(q[2])}.")
        return Part(text, [text])
    y = np.asarray(t.y if t.y is not None else (), dtype=np.float64).reshape(-1)
    y = y[np.isfinite(y)]
    if not len(y):
        return None
    q = np.percentile(y, [0, 25, 50, 75, 100])
    text = (f"{name}: {len(y):,} values from {fmt_number(q[0])} to {fmt_number(q[4])}, "
            f"middle half {fmt_number(q[1])} to {fmt_number(q[3])}, median {fmt_number(q[2])}.")
    return Part(text, [text])
