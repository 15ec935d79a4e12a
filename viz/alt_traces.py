"""The readers behind :func:`viz.alt.describe`: one per kind of trace, each turning the arrays Plotly draws
(z, x, y, the axes' tick labels, the panel titles) into a :class:`viz.alt.Part`.

Shape letters (see :mod:`viz`): ``i`` rows (queries), ``j`` columns (keys).
"""
from __future__ import annotations

import numpy as np

from viz.alt_base import (
    MAX_DETAIL_ROWS,
    TOP_K,
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
    trace_axes,
)
from viz.alt_series import bar_part, box_part, dots_part, line_part
from viz.heatmap import MASK_TRACE_NAME


def trace_parts(fig: FigureView) -> list[Part]:
    """One part per heatmap panel, set of bars, line, set of dots and box of ``fig``, in drawing order. Lines that
    share their x values share one table."""
    masks = {trace_axes(t): t for t in fig.data if t.type == "heatmap" and t.name == MASK_TRACE_NAME}
    parts: list[Part] = []
    lines: dict[tuple, Part] = {}  # a panel's lines with the same x values share the first one's table
    for t in fig.data:
        name = t.name or ""
        if name.startswith(MASK_TRACE_NAME):
            continue  # the grey overlay and its crosses: read with the heatmap they cover
        if t.type == "heatmap":
            part = heatmap_part(fig, t, masks.get(trace_axes(t)))
        elif t.type == "bar":
            part = bar_part(fig, t)
        elif t.type == "scatter" and "lines" in (t.mode or ""):
            part = line_part(fig, t, lines)
        elif t.type == "scatter" and "markers" in (t.mode or "markers"):
            part = dots_part(fig, t)
        elif t.type == "box":
            part = box_part(t)
        else:
            part = None
        if part is not None:
            parts.append(part)
    return parts


def heatmap_part(fig: FigureView, t, mask_trace=None) -> Part | None:
    """A heatmap panel: size, range, the largest cell, and per row the TOP_K largest columns (by absolute value
    when values are signed), or every column with the words written in its cells (a head's role); a two-valued map
    with a state per cell (a mask) says per row which columns are in which state; a grid over two continuous axes
    (a density) only its range and peak."""
    z = np.asarray(t.z, dtype=np.float64) if t.z is not None else np.zeros((0, 0))
    if z.ndim != 2 or z.size == 0:
        return None
    xref, yref = trace_axes(t)
    row_name, col_name = axis_title(fig, yref) or "row", axis_title(fig, xref) or "column"
    rows = labels(t.y, layout_axis(fig, yref), z.shape[0], row_name.split(" (")[0])
    cols = labels(t.x, layout_axis(fig, xref), z.shape[1], col_name.split(" (")[0])
    masked = np.zeros(z.shape, dtype=bool)
    if mask_trace is not None:
        mz = np.asarray(mask_trace.z, dtype=np.float64)
        masked = np.isfinite(mz) & (mz > 0)
    value, panel = plain(t.name) or "value", panel_name(fig, xref, yref)
    ok = np.isfinite(z) & ~masked
    head = f"{panel}: " if panel else ""
    if panel and panel == value.split(" (")[0]:
        value = "value"  # the panel's title names it already
    if not ok.any():
        return Part(f"{head}no values.", [f"{head}no values."])
    signed, whole = bool((z[ok] < 0).any()), is_whole(z[ok])

    def num(v: float) -> str:
        return fmt_number(v, whole)
    rank = np.where(ok, np.abs(z) if signed else z, -np.inf)  # (i, j)
    top_i, top_j = np.unravel_index(int(np.argmax(rank)), z.shape)
    size = f"{z.shape[0]} {row_name} rows × {z.shape[1]} {col_name} columns"
    strongest = f"{rows[top_i]} → {cols[top_j]} ({num(z[top_i, top_j])})"
    n_masked = int(masked.sum())
    masked_text = f" {n_masked} cells are masked." if n_masked else ""
    summary = (f"{head}{value} for {size}, from {num(np.min(z[ok]))} to {num(np.max(z[ok]))}; the "
               f"{'strongest' if signed else 'largest'} cell is {strongest}.{masked_text}")
    short = f"{head}largest {strongest}.{masked_text}"
    words = _cell_text(t.text, z.shape)
    marks = np.where(masked, "masked", "") if n_masked else None
    if _continuous(t.x) and _continuous(t.y):  # cells of a grid over two measured axes: no row is a "thing"
        peak = (f"{head}{value} over {col_name} and {row_name}, from {num(np.min(z[ok]))} to {num(np.max(z[ok]))}; "
                f"the largest, {num(z[top_i, top_j])}, at {col_name} {cols[top_j].split()[-1]}, "
                f"{row_name} {rows[top_i].split()[-1]}.")
        return Part(peak, [peak], None, peak)
    if t.customdata is not None and set(np.unique(z[ok])) <= {0.0, 1.0}:  # a two-state map (a mask)
        states = np.asarray(t.customdata, dtype=str)
        names, counts = np.unique(states[ok], return_counts=True)
        summary = short = f"{head}{value} for {size}: " + ", ".join(f"{plain(n)} {c} cells" for n, c in
                                                                    zip(names, counts)) + "."
        details = _state_rows(states, rows, cols, head + size)
    elif words is not None:  # a few cells, each with its words: say them all
        marks = np.where(ok, np.vectorize(lambda v, w: f"{num(v)} ({w})" if w else num(v), otypes=[object])(z, words),
                         "no value")
        details = [f"{head}{value} for {size}, with the words in each cell:"]
        details += [f"{rows[i]}: " + ", ".join(f"{cols[j]} {marks[i, j]}" for j in range(z.shape[1]))
                    for i in range(min(z.shape[0], MAX_DETAIL_ROWS))]
    else:
        details = _top_rows(z, rank, masked, rows, cols, num, f"{head}{value} for {size}. For each {row_name}, the "
                            f"{TOP_K} {col_name} columns with the largest {value}"
                            f"{' by absolute value' if signed else ''}:")
    kept = cut_rows(*z.shape)
    table = Table(caption(f"{head}{value}: rows {row_name}, columns {col_name}", kept, z.shape[0]), row_name,
                  tuple(rows[:kept]), tuple(cols), z[:kept], None if marks is None else marks[:kept], z.shape[0])
    return Part(summary, details, table, short)


def _cell_text(text, shape) -> np.ndarray | None:
    """The words written in a heatmap's cells (``text``, one per cell), if every cell has its entry."""
    if text is None or isinstance(text, str):
        return None
    words = np.asarray(text, dtype=object)
    if words.shape != shape:
        return None
    return np.vectorize(lambda w: plain(w) if w is not None else "", otypes=[object])(words)


def _continuous(values) -> bool:
    """Whether cell coordinates are measurements (non-integer numbers), not names or positions."""
    if values is None:
        return False
    v = list(values)
    if not v or isinstance(v[0], str):
        return False
    return not is_whole(np.asarray(v, dtype=np.float64))


def _top_rows(z, rank, masked, rows, cols, num, header: str) -> list[str]:
    out = [header]
    n = min(len(rows), MAX_DETAIL_ROWS)
    order = np.argsort(-rank[:n], axis=1, kind="stable")[:, :TOP_K]  # (i, TOP_K)
    for i in range(n):
        best = [f"{cols[j]} {num(z[i, j])}" for j in order[i] if np.isfinite(rank[i, j])]
        gone = int(masked[i].sum())
        out.append(f"{rows[i]}: {', '.join(best) or 'no values'}" + (f"; {gone} masked" if gone else ""))
    if len(rows) > n:
        out.append(f"… {len(rows) - n} more rows in the table.")
    return out


def _state_rows(states: np.ndarray, rows, cols, header: str) -> list[str]:
    """Per row, how many columns are in each state and which ("may attend: Ein (0), Hund (1); masked: 2")."""
    out = [f"{header}. For each row, the columns in each state:"]
    for i in range(min(len(rows), MAX_DETAIL_ROWS)):
        groups = []
        for state in dict.fromkeys(states[i]):
            where = [cols[j] for j in np.flatnonzero(states[i] == state)]
            groups.append(f"{plain(state)} {len(where)}" + (f" ({listing(where, 8)})" if len(where) <= 8 else ""))
        out.append(f"{rows[i]}: " + "; ".join(groups))
    if len(rows) > MAX_DETAIL_ROWS:
        out.append(f"… {len(rows) - MAX_DETAIL_ROWS} more rows in the table.")
    return out
