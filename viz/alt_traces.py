"""The readers behind :func:`viz.alt.describe`: one per kind of trace, each turning the arrays Plotly draws
(z, x, y, the axes' tick labels, the panel titles) into a :class:`viz.alt.Part`.

Shape letters (see :mod:`viz`): ``i`` rows (queries), ``j`` columns (keys).
"""
from __future__ import annotations

import numpy as np

from viz.alt import (
    MAX_DETAIL_ROWS,
    MAX_TABLE_CELLS,
    TOP_K,
    FigureView,
    Part,
    Table,
    axis_name,
    fmt_number,
    is_whole,
    listing,
    plain,
)
from viz.heatmap import MASK_TRACE_NAME


def trace_parts(fig: FigureView) -> list[Part]:
    """One part per heatmap panel, set of bars, line, set of dots and box of ``fig``, in drawing order. Lines that
    share their x values share one table."""
    from viz.alt_series import bar_part, box_part, dots_part, line_part  # they use the axis helpers below

    masks = {_axes(t): t for t in fig.data if t.type == "heatmap" and t.name == MASK_TRACE_NAME}
    parts: list[Part] = []
    lines: dict[tuple, Part] = {}  # a panel's lines with the same x values share the first one's table
    for t in fig.data:
        name = t.name or ""
        if name.startswith(MASK_TRACE_NAME):
            continue  # the grey overlay and its crosses: read with the heatmap they cover
        if t.type == "heatmap":
            part = heatmap_part(fig, t, masks.get(_axes(t)))
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


# ----------------------------------------------------------------------------- axes and labels

def _axes(t) -> tuple[str, str]:
    return t.xaxis or "x", t.yaxis or "y"


def layout_axis(fig: FigureView, ref: str):
    """The layout axis of a trace's axis reference ("x2" -> layout.xaxis2)."""
    return fig.layout[ref[0] + "axis" + ref[1:]]


def axis_title(fig: FigureView, ref: str) -> str:
    """The axis title of ``ref``, or (facets title only their outer axes) of the first axis of its letter that has
    one."""
    own = axis_name(layout_axis(fig, ref).title.text)
    if own:
        return own
    for key in sorted(k for k in fig.layout if k.startswith(ref[0] + "axis")):
        title = axis_name(fig.layout[key].title.text)
        if title:
            return title
    return ""


def labels(values, axis, n: int, word: str) -> list[str]:
    """The names of ``n`` cells along an axis: category names, tick labels of numeric positions, or the
    numbers themselves ("dim 17")."""
    if values is None:
        values = range(n)
    values = list(values)
    if values and isinstance(values[0], str):
        return [plain(v) for v in values]
    ticks = {float(v): plain(t) for v, t in zip(axis.tickvals or (), axis.ticktext or ())}
    whole = is_whole(np.asarray(values, dtype=np.float64))
    out = []
    for v in values:
        text = ticks.get(float(v))
        if text is None or _is_number(text):  # a bare number says more with its axis' word: "layer 2"
            text = f"{word} {text if text is not None else fmt_number(v, whole)}".strip()
        out.append(text)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def ticks_cover(axis, values) -> bool:
    """Whether the axis names every one of ``values`` with a tick label (a thinned axis names only some)."""
    named = {float(v) for v in axis.tickvals or ()} if axis.ticktext else set()
    return bool(named) and all(float(v) in named for v in values)


def panel_name(fig: FigureView, xref: str, yref: str) -> str:
    """The panel's title: the annotation centred above its plot area, with the row title beside it (a grid of
    layers × heads names both)."""
    x_dom = list(layout_axis(fig, xref).domain or (0, 1))
    y_dom = list(layout_axis(fig, yref).domain or (0, 1))
    centre, middle = sum(x_dom) / 2, sum(y_dom) / 2
    above, beside = "", ""
    for a in fig.layout.annotations or ():
        if a.xref != "paper" or a.x is None or a.y is None:
            continue
        if a.textangle in (90, -90) and abs(a.y - middle) < 1e-3:
            beside = plain(a.text)
        elif a.xanchor == "center" and a.yanchor == "bottom" and abs(a.x - centre) < 1e-3 and a.y >= y_dom[1] - 1e-3:
            if not above or abs(a.y - y_dom[1]) < 1e-3:
                above = plain(a.text)
    return ", ".join(p for p in (beside, above) if p)


def cut_rows(n_rows: int, n_cols: int) -> int:
    """How many rows of an (n_rows, n_cols) table fit MAX_TABLE_CELLS (at least one)."""
    return max(1, min(n_rows, MAX_TABLE_CELLS // max(n_cols, 1)))


def caption(what: str, kept: int, total: int) -> str:
    return what + (f" (the first {kept} of {total} rows)" if kept < total else "")


# ----------------------------------------------------------------------------- heatmaps

def heatmap_part(fig: FigureView, t, mask_trace=None) -> Part | None:
    """A heatmap panel: size, range, the largest cell, and per row the TOP_K largest columns (by absolute value
    when values are signed), or every column with the words written in its cells (a head's role); a two-valued map
    with a state per cell (a mask) says per row which columns are in which state; a grid over two continuous axes
    (a density) only its range and peak."""
    z = np.asarray(t.z, dtype=np.float64) if t.z is not None else np.zeros((0, 0))
    if z.ndim != 2 or z.size == 0:
        return None
    xref, yref = _axes(t)
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
